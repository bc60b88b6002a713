package gpu

import (
	"fmt"
	"sync"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpuplan"
)

// Device is one GPU device, on whichever API (gpuplan.API: wgpu-native
// through internal/gpu/native, or the browser's WebGPU through
// internal/webgpu), with the variant its probe chose, shared by every
// index on it. Its mutex serialises every call on the device: error
// scopes are per device, so concurrent calls could see each other's
// errors.
type Device struct {
	mu   sync.Mutex
	api  gpuplan.API
	info core.AdapterInfo
	lim  Limits
	// features are the adapter's, by name.
	features []string
	// pipes are the pipelines compiled on the device (pipelines.go).
	pipes pipelineCache
	// built is the key of every pipeline the driver asked the API for
	// (gpuplan.PipeSpec.Key), so a caller can count what is left to build.
	built map[string]bool
	// owned is set when the caller created the device (Adopt), so it may
	// use an index's buffers on it (share.go).
	owned bool
	// hasSubgroups: the API offers subgroup built-ins on this device.
	// subgroups: the scores variant in use reduces with them, after it
	// passed the self-test.
	hasSubgroups, subgroups bool
	// timestamps is set when the device can write timestamps inside a
	// compute pass.
	timestamps bool
	// fused is set once the fused scan-and-select (topk.wgsl) has passed
	// the self-test on this device with its chosen variant; fusedErr says
	// why not when it failed (searches then take the radix select).
	fused    bool
	fusedErr error
	// team is the widest team (invocations per row) scores.wgsl uses on
	// this device, measured by tune; 0 until then (64).
	team uint32
	// staged is set when batches score faster with their queries staged
	// in workgroup memory, also measured by tune.
	staged bool
	// gemm is set when gemm.wgsl passed its self-test (every score the
	// same bits as a single query's) and a batch searched faster with it
	// (tuneGemm); gemmErr says why not when the self-test failed.
	gemm    bool
	gemmErr error
	// scanRate is how many bytes of rows a second one scoring pass reads
	// on this device, measured by tune (0: not measured): what a
	// submission's work is estimated by (workLimit).
	scanRate float64
	// policy is how the probe chooses the variant (Policy).
	policy Policy
	// checks are what the probe's self-tests and timings found, one
	// entry per variant tried: what umbra probe --json reports.
	checks []VariantCheck
	// mem is the ledger of the device memory the driver allocated, and
	// its budget (budget.go).
	mem memLedger
	// reopen, when set (a probed wgpu device), opens a new device on the
	// same adapter and probes it anew: how Renew replaces a lost device.
	reopen func() (*Device, error)
	// timingBytes, when not 0, replaces hardwareTimingBytes (tests time a
	// hardware-sized slab on a software adapter in seconds); failTiming,
	// set by tests only, fails the timing of a slab of that many rows, as
	// a device without the memory for it would.
	timingBytes uint64
	failTiming  func(rows int) bool
	// editScores, set by tests only, rewrites scores.wgsl (and gemm.wgsl)
	// before it is compiled (to reach a branch no software adapter takes,
	// or to emulate another compiler).
	editScores func(string) string
	// Calibrate's measurements, taken on first use.
	routeOnce   sync.Once
	latency     time.Duration
	bytesPerSec float64
	routeErr    error
	// GatherCosts' measurements, taken on first use (gather.go).
	gatherOnce    sync.Once
	gatherFixed   time.Duration
	gatherPerByte float64
	gatherErr     error
}

// Caps are what an API says about a device when the driver takes it.
type Caps struct {
	Info     core.AdapterInfo
	Limits   Limits
	Features []string
	// Subgroups: the device may run subgroup built-ins; Timestamps: it
	// can time a pass on its own clock.
	Subgroups, Timestamps bool
	// Owned: the caller created the device (its buffers may be shared).
	Owned bool
}

// NewDevice is the driver over api, on a device of caps, not yet probed:
// Verify (or SetVariant) chooses the variant its indexes use.
func NewDevice(api gpuplan.API, caps Caps) *Device {
	return &Device{api: api, info: caps.Info, lim: caps.Limits, features: caps.Features, hasSubgroups: caps.Subgroups, subgroups: caps.Subgroups,
		timestamps: caps.Timestamps, owned: caps.Owned, built: map[string]bool{}, team: 32}
}

// Info describes the device's adapter.
func (d *Device) Info() core.AdapterInfo { return d.info }

// Features lists the adapter's features.
func (d *Device) Features() []string { return d.features }

// HasSubgroups reports whether the device may run the subgroup reduction.
func (d *Device) HasSubgroups() bool { return d.hasSubgroups }

// Limits are the device's limits with the variant in use.
func (d *Device) Limits() Limits {
	l := d.lim
	l.Subgroups, l.Timestamps, l.Team, l.StagedQueries = d.subgroups, d.timestamps, d.team, d.staged
	l.Gemm = d.gemm
	// What an index of the common width gets on this device: the fused
	// limits and gemm.wgsl's queries a pass (Index.Limits has its own).
	if g, err := d.planIndex(768, core.Dot, core.F32, 0); err == nil {
		l.FusedK, l.FusedBatchK = gpuplan.MaxK(g.topkSingle), gpuplan.MaxK(g.topkBatch)
		l.GemmQueries = g.gemm.QT
	}
	return l
}

// Checks are what the probe's self-tests and timings found for every
// variant it tried, in order.
func (d *Device) Checks() []VariantCheck {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]VariantCheck(nil), d.checks...)
}

// scoped runs f holding nothing more than the API's error scopes; the
// caller holds d.mu.
func (d *Device) scoped(what string, f func() error) error { return d.api.Scope(what, f) }

// submit submits w (no read back) and counts it into c (may be nil).
func (d *Device) submit(c *core.Stages, w gpuplan.Work) error {
	if _, err := d.api.Submit(w, false); err != nil {
		return err
	}
	if c != nil {
		c.Submissions++
	}
	return nil
}

// flush submits the queued writes and waits until they are done, which
// frees their staging copies (gfx-rs/wgpu #7114) and surfaces a failure
// here rather than in a later search.
func (d *Device) flush(c *core.Stages) error {
	return d.submit(c, gpuplan.Work{Wait: true})
}

// String names the device's variant: "team 32, subgroups, staged".
func (d *Device) String() string {
	return fmt.Sprintf("%s, %s", d.info, d.variantName())
}
