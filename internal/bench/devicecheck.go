package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/umbravec/umbra"

	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/probe"
)

// The device check: what a lent GPU machine must show in one short loan,
// in one process (bench/DEVICE-CHECK.md). One deadline covers the whole
// run; its steps run in order of value, each given at most the time left
// and skipped, said so, when its estimate does not fit. The adapter is
// probed once (the engine reuses the verdict); the data is generated once,
// on every core, and every index of the run shares it. Every search must
// run on the GPU (a CPU fallback fails the check) and every sampled
// answer must be the float64 reference's.

// DeviceCheckOptions size a device check.
type DeviceCheckOptions struct {
	// Deadline bounds the whole run (7 minutes by default).
	Deadline time.Duration
	// Smoke accepts a software adapter and skips the NVIDIA assertions:
	// CI's end-to-end run on lavapipe. Never on a GPU machine.
	Smoke bool
	// Rows × Dim random rows (uniform in [-1, 1)), k and the batch sizes
	// of the float32 step, and the larger k the radix select is checked
	// with.
	Rows, Dim, K, LargeK int
	Batches              []int
	// Seed makes the data; Adapter narrows the adapters considered.
	Seed    uint64
	Adapter engine.AdapterSelect
	// PeakBytesPerSec is the card's memory bandwidth (0: from the table
	// of known cards by the adapter's name, or none).
	PeakBytesPerSec float64
	// Soak is how long the mixed-load soak may run if time is left.
	Soak time.Duration
	// SMI is nvidia-smi's path ("": not sampled).
	SMI string
	// Log hears one line per step as it starts and ends (may be nil).
	Log io.Writer
	// Negative is the verdict of the negative control run before (the
	// probe with no ICD must refuse): "ok", or "FAIL: why"; "" when none
	// ran.
	Negative string
	// editQueries, when set (the tests), changes the generated queries
	// before any step uses them.
	editQueries func([][]float32)
}

// CheckStep is one step of the run: ok, FAIL or skipped, and why.
type CheckStep struct {
	Name    string  `json:"name"`
	Status  string  `json:"status"` // ok, FAIL, skipped
	Detail  string  `json:"detail,omitempty"`
	Seconds float64 `json:"seconds"`
	// Start and End are seconds since the run began.
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	// Estimate is what the step was expected to take.
	Estimate float64 `json:"estimate_seconds"`
}

// CheckSearch is one timed search of the run.
type CheckSearch struct {
	Precision string `json:"precision"`
	NQ        int    `json:"nq"`
	K         int    `json:"k"`
	// Kernel is what the call asked for: auto, tiles, gemm or radix.
	Kernel      string  `json:"kernel"`
	MS          float64 `json:"ms"`
	KernelMS    float64 `json:"kernel_ms"`
	Clock       string  `json:"kernel_clock"`
	Path        string  `json:"select_path"`
	Device      string  `json:"device"`
	Submissions int64   `json:"submissions"`
	Dispatches  int64   `json:"dispatches"`
	BytesRead   int64   `json:"bytes_read"`
	// GBps is BytesRead over the kernel time; PeakPct that as a share of
	// the card's memory bandwidth (0: unknown).
	GBps    float64 `json:"gb_per_s"`
	PeakPct float64 `json:"peak_pct"`
	QPS     float64 `json:"queries_per_s"`
	Checked int     `json:"checked"`
	OK      bool    `json:"ok"`
	Error   string  `json:"error,omitempty"`
}

// BusySample is one nvidia-smi sample.
type BusySample struct {
	At      float64 `json:"at"` // seconds since the run began
	UtilPct float64 `json:"util_pct"`
	MemMiB  float64 `json:"mem_mib"`
	PowerW  float64 `json:"power_w"`
}

// DeviceCheckReport is everything the run found.
type DeviceCheckReport struct {
	Date      string             `json:"date"`
	Host      string             `json:"host"`
	CPU       CPUInfo            `json:"cpu"`
	GoVersion string             `json:"go"`
	Smoke     bool               `json:"smoke"`
	Rows      int                `json:"rows"`
	Dim       int                `json:"dim"`
	Deadline  float64            `json:"deadline_seconds"`
	Adapter   diag.AdapterInfo   `json:"adapter"`
	Limits    gpu.Limits         `json:"limits"`
	Variants  []gpu.VariantCheck `json:"variants"`
	ProbeMS   float64            `json:"probe_ms"`
	Steps     []CheckStep        `json:"steps"`
	Searches  []CheckSearch      `json:"searches"`
	Upload    map[string]float64 `json:"upload"`    // per precision: bytes a second sent to the device
	Bandwidth map[string]float64 `json:"bandwidth"` // floor_gb_per_s, peak_gb_per_s, floor_pct
	Busy      []BusySample       `json:"busy"`
	BusyPeak  map[string]float64 `json:"busy_peak"` // during the float32 searches: util_pct, mem_mib
	Soak      *SoakReport        `json:"soak,omitempty"`
	Filter    *FilterReport      `json:"filter,omitempty"`
	Asserts   map[string]string  `json:"asserts"` // each assertion: ok, or why not
	Passed    bool               `json:"passed"`
	Failures  []string           `json:"failures"`
	mu        sync.Mutex
}

func (o *DeviceCheckOptions) defaults() {
	if o.Deadline <= 0 {
		o.Deadline = 7 * time.Minute
	}
	if o.Rows <= 0 {
		o.Rows = 4_000_000
	}
	if o.Dim <= 0 {
		o.Dim = 768
	}
	if o.K <= 0 {
		o.K = 10
	}
	if o.LargeK <= 0 {
		o.LargeK = 1000
	}
	if len(o.Batches) == 0 {
		o.Batches = []int{1, 64, 256, 1024}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// checkRun is the state of one device check.
type checkRun struct {
	o        DeviceCheckOptions
	rep      *DeviceCheckReport
	start    time.Time
	deadline time.Time
	data     []float32
	queries  [][]float32
	sample   []int                // query indexes checked against the reference
	refs     map[int]*Reference   // float64 references of the sampled queries
	f32      *engine.Index        // the float32 index, once uploaded
	sel      engine.AdapterSelect // the adapter every index uses
	rates    struct{ host, upload, scan float64 }
}

// RunDeviceCheck runs the device check: rep.Passed says whether the
// machine showed what it must; an error is a run that could not start.
func RunDeviceCheck(ctx context.Context, o DeviceCheckOptions) (*DeviceCheckReport, error) {
	o.defaults()
	start := time.Now()
	host, _ := os.Hostname()
	rep := &DeviceCheckReport{Date: start.UTC().Format(time.RFC3339), Host: host, CPU: hostCPU(), GoVersion: runtime.Version(),
		Smoke: o.Smoke, Rows: o.Rows, Dim: o.Dim, Deadline: o.Deadline.Seconds(), Upload: map[string]float64{},
		Bandwidth: map[string]float64{}, BusyPeak: map[string]float64{}, Asserts: map[string]string{}, Failures: []string{}}
	r := &checkRun{o: o, rep: rep, start: start, deadline: start.Add(o.Deadline), refs: map[int]*Reference{}}
	// Host work is estimated at this many bytes a second a core until a
	// step measures it; the device's rates likewise (a small GPU's).
	r.rates.host = 0.3e9 * float64(runtime.GOMAXPROCS(0))
	r.rates.upload, r.rates.scan = 2e9, 20e9
	ctx, cancel := context.WithDeadline(ctx, r.deadline)
	defer cancel()
	stopSMI := r.sampleSMI(ctx)
	defer func() {
		if r.f32 != nil {
			r.f32.Close()
		}
	}()

	rowBytes := float64(o.Rows) * float64(o.Dim) * 4
	steps := []struct {
		name  string
		needs []string
		est   func() float64
		run   func(ctx context.Context) (string, error)
	}{
		{"probe", nil, func() float64 { return 60 }, r.probe},
		{"data", []string{"probe"}, func() float64 { return rowBytes / r.rates.host }, r.makeData},
		{"reference", []string{"data"}, func() float64 { return float64(len(r.sampleFor())) * rowBytes / r.rates.host }, r.reference},
		{"f32 upload", []string{"data"}, func() float64 { return 2*rowBytes/r.rates.host + rowBytes/r.rates.upload + 10 }, r.uploadF32},
		{"f32 batches", []string{"f32 upload", "reference"}, func() float64 { return r.batchEstimate(rowBytes) }, r.f32Batches},
		{"bandwidth", []string{"f32 upload"}, func() float64 { return 5 + 4*rowBytes/r.rates.scan }, r.bandwidth},
		{"int8", []string{"data", "reference"}, func() float64 { return r.quantEstimate(rowBytes) }, func(ctx context.Context) (string, error) { return r.quant(ctx, umbra.Int8) }},
		{"f16", []string{"data", "reference"}, func() float64 { return r.quantEstimate(rowBytes) }, func(ctx context.Context) (string, error) { return r.quant(ctx, umbra.F16) }},
		{"f32 kernels", []string{"f32 upload", "reference"}, func() float64 { return r.kernelsEstimate(rowBytes) }, r.f32Kernels},
		{"filtered", []string{"data", "f32 upload"}, r.filterEstimate, r.filtered},
		{"soak", []string{"probe"}, func() float64 { return min(o.Soak.Seconds(), 30) + 15 }, r.soak},
	}
	status := map[string]string{}
	for _, s := range steps {
		st := CheckStep{Name: s.name, Start: time.Since(start).Seconds(), Estimate: s.est()}
		var missing []string
		for _, n := range s.needs {
			if status[n] != "ok" {
				missing = append(missing, n)
			}
		}
		left := time.Until(r.deadline).Seconds()
		switch {
		case len(missing) > 0:
			st.Status, st.Detail = "skipped", "needs "+strings.Join(missing, ", ")
		case st.Estimate > left:
			st.Status, st.Detail = "skipped", fmt.Sprintf("needs about %.0f s, %.0f s left of the deadline", st.Estimate, left)
		default:
			fmt.Fprintf(o.Log, "device check: %s (about %.0f s, %.0f s left)\n", s.name, st.Estimate, left)
			sctx, scancel := context.WithDeadline(ctx, r.deadline)
			detail, err := s.run(sctx)
			scancel()
			st.Detail = detail
			st.Status = "ok"
			if err != nil {
				st.Status = "FAIL"
				if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
					err = fmt.Errorf("the run's deadline passed: %w", err)
				}
				st.Detail = strings.TrimSpace(detail + " " + err.Error())
				rep.Failures = append(rep.Failures, s.name+": "+err.Error())
			}
		}
		st.End = time.Since(start).Seconds()
		st.Seconds = st.End - st.Start
		status[s.name] = st.Status
		rep.Steps = append(rep.Steps, st)
		fmt.Fprintf(o.Log, "device check: %-12s %s (%.1f s) %s\n", s.name, st.Status, st.Seconds, st.Detail)
	}
	stopSMI()
	r.assertBusy(status)
	r.assertGPU()
	// Every tier must have run: a step skipped for time showed nothing.
	var missed []string
	for _, n := range requiredSteps {
		if status[n] != "ok" {
			missed = append(missed, fmt.Sprintf("%s (%s)", n, cmpOr(status[n], "not reached")))
		}
	}
	if len(missed) > 0 {
		rep.Asserts["every tier ran"] = "FAIL: " + strings.Join(missed, ", ")
		rep.Failures = append(rep.Failures, "every tier ran: "+strings.Join(missed, ", "))
	} else {
		rep.Asserts["every tier ran"] = "ok: " + strings.Join(requiredSteps, ", ")
	}
	switch {
	case o.Negative == "":
		rep.Asserts["negative control"] = "not run"
	case strings.HasPrefix(o.Negative, "ok"):
		rep.Asserts["negative control"] = o.Negative
	default:
		rep.Asserts["negative control"] = o.Negative
		rep.Failures = append(rep.Failures, "negative control: "+o.Negative)
	}
	rep.Passed = len(rep.Failures) == 0
	return rep, nil
}

// requiredSteps are the steps a passing run must have completed; the
// soak is extra.
var requiredSteps = []string{"probe", "data", "reference", "f32 upload", "f32 batches", "bandwidth", "int8", "f16", "f32 kernels", "filtered"}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// fail records a failed assertion; check says it held.
func (r *checkRun) fail(name, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	r.rep.Asserts[name] = "FAIL: " + msg
	return fmt.Errorf("%s: %s", name, msg)
}

func (r *checkRun) check(name, detail string) { r.rep.Asserts[name] = "ok: " + detail }

// probe probes the adapters once (the engine's indexes reuse the verdict)
// and takes the first that works: on a GPU machine it must be NVIDIA's
// (vendor 0x10de), discrete, on Vulkan, and not a software adapter.
func (r *checkRun) probe(ctx context.Context) (string, error) {
	sel := r.o.Adapter
	p := probe.Run(ctx, probe.Select{LowPower: sel.LowPower, Name: sel.Name, Backend: sel.Backend}, probe.DefaultTimeout)
	var seen []string
	for _, a := range p.Adapters {
		info := a.Adapter
		if !a.Works {
			seen = append(seen, fmt.Sprintf("%s: probe failed: %s", info, a.Error))
			continue
		}
		if info.Software() && !r.o.Smoke {
			seen = append(seen, fmt.Sprintf("%s: a software adapter, refused", info))
			continue
		}
		r.rep.Adapter, r.rep.Limits, r.rep.Variants, r.rep.ProbeMS = info, a.Limits, a.Checks, float64(a.Elapsed.Microseconds())/1e3
		r.sel = engine.AdapterSelect{Backend: info.API, Name: info.Name}
		detail := fmt.Sprintf("%s (vendor 0x%x, %s, %s), team %d, subgroups %v, fused k %d, gemm %v", info.Name, info.VendorID,
			info.Type, info.API, a.Limits.Team, a.Limits.Subgroups, a.Limits.FusedK, a.Limits.Gemm)
		if r.o.Smoke {
			r.rep.Asserts["nvidia adapter"] = "not checked: smoke run"
			return detail, nil
		}
		var bad []string
		if info.VendorID != 0x10de {
			bad = append(bad, fmt.Sprintf("vendor 0x%x, not NVIDIA's 0x10de", info.VendorID))
		}
		if info.Type != "discrete" {
			bad = append(bad, fmt.Sprintf("type %s, not discrete", info.Type))
		}
		if info.API != "vulkan" {
			bad = append(bad, fmt.Sprintf("API %s, not vulkan", info.API))
		}
		if len(bad) > 0 {
			return detail, r.fail("nvidia adapter", "%s", strings.Join(bad, "; "))
		}
		r.check("nvidia adapter", detail)
		return detail, nil
	}
	return "", r.fail("nvidia adapter", "no usable adapter: %s", strings.Join(seen, "; "))
}

// makeData generates the rows and the queries, on every core: each block
// of rows from its own stream of the seed, so the data is the same
// whatever the core count.
func (r *checkRun) makeData(ctx context.Context) (string, error) {
	start := time.Now()
	r.data = ParallelMatrix(r.o.Rows, r.o.Dim, r.o.Seed)
	nq := slices.Max(r.o.Batches)
	qr := rand.New(rand.NewPCG(r.o.Seed, 7))
	r.queries = make([][]float32, nq)
	for i := range r.queries {
		q := make([]float32, r.o.Dim)
		for j := range q {
			q[j] = float32(qr.NormFloat64())
		}
		r.queries[i] = q
	}
	if r.o.editQueries != nil {
		r.o.editQueries(r.queries)
	}
	took := time.Since(start)
	r.rates.host = float64(len(r.data)*4) / max(took.Seconds(), 1e-3)
	return fmt.Sprintf("%d × %d (%.1f GB) and %d queries in %.1f s on %d cores", r.o.Rows, r.o.Dim, float64(len(r.data))*4/1e9, nq,
		took.Seconds(), runtime.GOMAXPROCS(0)), ctx.Err()
}

// ParallelMatrix is rows × dim values uniform in [-1, 1) (multiples of
// 2^-23), generated on every core: block b of 65,536 rows from the PCG
// stream b of seed, so the values do not depend on the core count.
func ParallelMatrix(rows, dim int, seed uint64) []float32 {
	const block = 1 << 16
	out := make([]float32, rows*dim)
	blocks := (rows + block - 1) / block
	var next sync.Mutex
	b := 0
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				mine := b
				b++
				next.Unlock()
				if mine >= blocks {
					return
				}
				// Two values from each 64-bit draw, 24 bits each: every
				// multiple of 2^-23 in [-1, 1) equally likely.
				g := rand.NewPCG(seed, uint64(mine)+1<<32)
				part := out[mine*block*dim : min((mine+1)*block, rows)*dim]
				for i := 0; i < len(part); i += 2 {
					u := g.Uint64()
					part[i] = float32(u>>40)*0x1p-23 - 1
					if i+1 < len(part) {
						part[i+1] = float32(u>>16&(1<<24-1))*0x1p-23 - 1
					}
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// sampleFor is the queries checked against the reference: the first of
// each batch, the ends of each gemm tile and each submission a batch may
// cross, spread over the largest batch.
func (r *checkRun) sampleFor() []int {
	if r.sample != nil {
		return r.sample
	}
	nq := slices.Max(r.o.Batches)
	var out []int
	for _, i := range []int{0, 1, 7, 8, 31, 32, 63, 64, 127, 128, 255, 256, 383, 511, 767, 1023} {
		if i < nq {
			out = append(out, i)
		}
	}
	out = append(out, nq-1)
	slices.Sort(out)
	r.sample = slices.Compact(out)
	return r.sample
}

// reference scores every row against each sampled query in float64, on
// every core.
func (r *checkRun) reference(ctx context.Context) (string, error) {
	start := time.Now()
	for _, qi := range r.sampleFor() {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		r.refs[qi] = NewReference(r.data, r.o.Dim, r.queries[qi], umbra.Dot)
	}
	// Each query's best rows selected once, for every check, the queries
	// side by side.
	var wg sync.WaitGroup
	for _, ref := range r.refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref.TopK(max(r.o.K, r.o.LargeK))
		}()
	}
	wg.Wait()
	took := time.Since(start)
	r.rates.host = max(r.rates.host, float64(len(r.sample))*float64(len(r.data))*4/max(took.Seconds(), 1e-3))
	return fmt.Sprintf("%d queries in %.1f s", len(r.sample), took.Seconds()), nil
}

// newIndex opens an index of prec on the probed adapter, Device GPU: a
// device that cannot take it fails the step, never falls back.
func (r *checkRun) newIndex(ctx context.Context, prec umbra.Precision) (*engine.Index, error) {
	ix, err := engine.New(ctx, engine.Config{Dim: r.o.Dim, Metric: umbra.Dot, Device: engine.GPU, Precision: prec,
		Adapters: []engine.AdapterSelect{r.sel}})
	if err != nil {
		return nil, err
	}
	if info := ix.Info(); info.Device != engine.GPU {
		ix.Close()
		return nil, fmt.Errorf("the index is on the %v, not the GPU: %s", info.Device, info.Reason)
	}
	return ix, nil
}

// add uploads the data to ix, traced: the rate the rows went up at.
func (r *checkRun) add(ctx context.Context, ix *engine.Index, prec string) (string, error) {
	var tr diag.Trace
	start := time.Now()
	if _, err := ix.Add(diag.WithTrace(ctx, &tr), umbra.Flat(r.data, r.o.Dim)); err != nil {
		return "", err
	}
	took := time.Since(start)
	if info := ix.Info(); info.Device != engine.GPU {
		return "", r.fail("gpu "+prec, "after the upload the index is on the %v: %s", info.Device, info.Reason)
	}
	rate := float64(tr.BytesUp) / max(tr.Upload.Seconds(), 1e-9)
	r.rep.Upload[prec] = rate
	if prec == "f32" {
		r.rates.upload = rate
	}
	return fmt.Sprintf("%d bytes up in %.2f s of upload (%.2f GB/s), the whole Add %.2f s", tr.BytesUp, tr.Upload.Seconds(), rate/1e9, took.Seconds()), nil
}

func (r *checkRun) uploadF32(ctx context.Context) (string, error) {
	ix, err := r.newIndex(ctx, umbra.F32)
	if err != nil {
		return "", r.fail("gpu f32", "%v", err)
	}
	r.f32 = ix
	return r.add(ctx, ix, "f32")
}

// search runs one traced batch on ix and checks its sampled queries
// against the reference: every search must have run on the GPU.
func (r *checkRun) search(ctx context.Context, ix *engine.Index, prec, kernel string, nq, k, reps int) CheckSearch {
	cs := CheckSearch{Precision: prec, NQ: nq, K: k, Kernel: kernel}
	switch kernel {
	case "tiles":
		ctx = gpu.WithBatchKernel(ctx, gpu.BatchTile)
	case "gemm":
		ctx = gpu.WithBatchKernel(ctx, gpu.BatchGemm)
	case "radix":
		ctx = gpu.WithSelectPath(ctx, gpu.SelectRadix)
	}
	var hits [][]umbra.Hit
	best := time.Duration(0)
	var tr diag.Trace
	for i := range reps {
		var t diag.Trace
		start := time.Now()
		got, err := ix.SearchBatch(diag.WithTrace(ctx, &t), r.queries[:nq], k)
		took := time.Since(start)
		if err != nil {
			cs.Error = err.Error()
			return cs
		}
		if t.Device != "gpu" {
			cs.Error = fmt.Sprintf("the search ran on the %q path, not the GPU", t.Device)
			return cs
		}
		if i == 0 || took < best {
			best, tr, hits = took, t, got
		}
	}
	cs.MS = best.Seconds() * 1e3
	cs.KernelMS, cs.Clock, cs.Path, cs.Device = tr.Kernel.Seconds()*1e3, tr.KernelClock, tr.SelectPath, tr.Device
	cs.Submissions, cs.Dispatches, cs.BytesRead = tr.Submissions, tr.Dispatches, tr.BytesRead
	cs.QPS = float64(nq) / best.Seconds()
	if tr.Kernel > 0 {
		cs.GBps = float64(tr.BytesRead) / tr.Kernel.Seconds() / 1e9
		if peak := r.rep.Bandwidth["peak_gb_per_s"]; peak > 0 {
			cs.PeakPct = 100 * cs.GBps / peak
		}
	}
	cs.OK = true
	for _, qi := range r.sampleFor() {
		if qi >= nq {
			break
		}
		res := r.refs[qi].CompareTopK(hits[qi], k)
		cs.Checked++
		if !res.Match {
			cs.OK = false
			cs.Error = fmt.Sprintf("query %d differs from the float64 reference from rank %d", qi, res.Rank)
			break
		}
	}
	return cs
}

// record adds searches to the report and fails on the first wrong one.
func (r *checkRun) record(cs ...CheckSearch) error {
	r.rep.mu.Lock()
	r.rep.Searches = append(r.rep.Searches, cs...)
	r.rep.mu.Unlock()
	for _, c := range cs {
		if !c.OK {
			return fmt.Errorf("%s nq %d k %d %s: %s", c.Precision, c.NQ, c.K, c.Kernel, c.Error)
		}
	}
	return nil
}

// batchEstimate is the float32 step's time: a pass over the rows per
// tile of 32 queries at the scan rate, the radix select's reads of the
// scores, and a second a batch for the host.
func (r *checkRun) batchEstimate(rowBytes float64) float64 {
	total := 0.0
	for _, nq := range r.o.Batches {
		tiles := float64((nq + 31) / 32)
		total += 2 + tiles*rowBytes/r.rates.scan + float64(nq)*float64(r.o.Rows)*4*10/r.rates.scan
	}
	return total
}

func (r *checkRun) f32Batches(ctx context.Context) (string, error) {
	var parts []string
	for _, nq := range r.o.Batches {
		reps := 1
		if nq <= 64 {
			reps = 3
		}
		cs := r.search(ctx, r.f32, "f32", "auto", nq, r.o.K, reps)
		if err := r.record(cs); err != nil {
			return strings.Join(parts, "; "), err
		}
		if nq == 1 && cs.KernelMS > 0 {
			r.rates.scan = float64(r.o.Rows) * float64(r.o.Dim) * 4 / (cs.KernelMS / 1e3)
		}
		parts = append(parts, fmt.Sprintf("%d: %.1f ms (%d submissions, %s)", nq, cs.MS, cs.Submissions, cs.Path))
	}
	return strings.Join(parts, "; "), nil
}

// peakTable is the memory bandwidth of the cards a loan may bring, by a
// fragment of their Vulkan name: NVIDIA's data sheets.
var peakTable = []struct {
	name []string
	bps  float64
}{
	{[]string{"H200"}, 4.8e12},
	{[]string{"H100", "NVL"}, 3.9e12},
	{[]string{"H100", "PCIe"}, 2.0e12},
	{[]string{"H100"}, 3.35e12}, // SXM5
	{[]string{"A100", "80GB"}, 2.0e12},
	{[]string{"A100"}, 1.555e12},
}

// peakOf is the card's bandwidth from the table, or 0.
func peakOf(name string) float64 {
	for _, e := range peakTable {
		ok := true
		for _, f := range e.name {
			ok = ok && strings.Contains(name, f)
		}
		if ok {
			return e.bps
		}
	}
	return 0
}

// bandwidth times read.wgsl over the rows: the device's floor, as a share
// of the card's bandwidth.
func (r *checkRun) bandwidth(ctx context.Context) (string, error) {
	peak := r.o.PeakBytesPerSec
	source := "given"
	if peak == 0 {
		peak, source = peakOf(r.rep.Adapter.Name), "the table of known cards"
	}
	var best diag.Floor
	for range 3 {
		f, err := r.f32.ReadFloor(ctx)
		if err != nil {
			return "", err
		}
		if best.Bytes == 0 || f.Time < best.Time {
			best = f
		}
	}
	gbps := best.BytesPerSecond() / 1e9
	r.rep.Bandwidth["floor_gb_per_s"] = gbps
	r.rates.scan = max(r.rates.scan, best.BytesPerSecond())
	if peak == 0 {
		return fmt.Sprintf("read floor %.1f GB/s (%s clock); the card's peak is not known", gbps, best.Clock), nil
	}
	r.rep.Bandwidth["peak_gb_per_s"] = peak / 1e9
	r.rep.Bandwidth["floor_pct"] = 100 * gbps / (peak / 1e9)
	for i := range r.rep.Searches {
		if s := &r.rep.Searches[i]; s.GBps > 0 {
			s.PeakPct = 100 * s.GBps / (peak / 1e9)
		}
	}
	return fmt.Sprintf("read floor %.1f GB/s (%s clock), %.0f%% of %.0f GB/s (%s)", gbps, best.Clock,
		r.rep.Bandwidth["floor_pct"], peak/1e9, source), nil
}

// quantEstimate is a compressed step's time: compressing on the host,
// sending a quarter (int8) or half of the rows, and the searches.
func (r *checkRun) quantEstimate(rowBytes float64) float64 {
	return 3*rowBytes/r.rates.host + rowBytes/2/r.rates.upload + 10
}

// quant uploads the rows in a compressed precision and checks batches of
// one and 64 queries against the float32 reference: the exact search of
// compressed rows returns the float32 answer.
func (r *checkRun) quant(ctx context.Context, prec umbra.Precision) (string, error) {
	name := prec.String()
	ix, err := r.newIndex(ctx, prec)
	if err != nil {
		return "", r.fail("gpu "+name, "%v", err)
	}
	defer ix.Close()
	up, err := r.add(ctx, ix, name)
	if err != nil {
		return up, err
	}
	var parts []string
	for _, nq := range []int{1, min(64, slices.Max(r.o.Batches))} {
		cs := r.search(ctx, ix, name, "auto", nq, r.o.K, 1)
		if err := r.record(cs); err != nil {
			return up, err
		}
		parts = append(parts, fmt.Sprintf("%d: %.1f ms (%s)", nq, cs.MS, cs.Path))
	}
	return up + "; " + strings.Join(parts, "; "), nil
}

// kernelsEstimate is the forced kernels' time: a batch of 256 twice (tiles
// read the rows once per 8 queries) and the radix select's 64 at k 1000.
func (r *checkRun) kernelsEstimate(rowBytes float64) float64 {
	return 6 + (256/8+256/32+64/32)*rowBytes/r.rates.scan + 64*float64(r.o.Rows)*4*10/r.rates.scan
}

// f32Kernels times both batch kernels on one batch and the radix select
// at the larger k, each checked: which kernel this card runs faster.
func (r *checkRun) f32Kernels(ctx context.Context) (string, error) {
	nq := min(256, slices.Max(r.o.Batches))
	var parts []string
	for _, c := range []struct {
		kernel string
		nq, k  int
	}{{"tiles", nq, r.o.K}, {"gemm", nq, r.o.K}, {"radix", min(64, nq), min(r.o.LargeK, r.o.Rows)}} {
		cs := r.search(ctx, r.f32, "f32", c.kernel, c.nq, c.k, 1)
		if err := r.record(cs); err != nil {
			return strings.Join(parts, "; "), err
		}
		parts = append(parts, fmt.Sprintf("%s %d×k%d: %.1f ms", c.kernel, c.nq, c.k, cs.MS))
	}
	return strings.Join(parts, "; "), nil
}

// filterRows is how many of the rows the filtered step indexes: the
// first million (issue 34's size), or all of them where there are fewer.
func (r *checkRun) filterRows() int { return min(r.o.Rows, 1_000_000) }

// filterEstimate is the filtered step's time: packing those rows (and the
// tenth and more of them the subset indexes hold) with their metadata on
// the host, sending them, and about 120 searches of at most a scan each.
func (r *checkRun) filterEstimate() float64 {
	n := float64(r.filterRows())
	b := n * float64(r.o.Dim) * 4
	return 3*b/r.rates.host + 1.2*b/r.rates.upload + 120*(b/r.rates.scan+0.005) + n*1e-6 + 5
}

// filtered is cmd/bench --filter on the GPU over the check's own rows: a
// Where admitting 0.1%, 1% and 10% of them, each beside the unfiltered
// search and an index of that share alone, every filtered answer (8
// queries a share) checked against the subset index's, IDs and score
// bits, and every one run on the GPU (gather.wgsl or the scan, as the
// device's measured costs choose).
func (r *checkRun) filtered(ctx context.Context) (string, error) {
	n := r.filterRows()
	rep, err := RunFilter(ctx, FilterOptions{Device: engine.GPU, Adapter: r.sel, N: n, Dim: r.o.Dim, K: r.o.K,
		Fractions: []float64{0.001, 0.01, 0.1}, Metric: umbra.Cosine, Precision: umbra.F32, Runs: 3, Repeat: 3,
		Seed: r.o.Seed, Data: r.data[:n*r.o.Dim]})
	if err != nil {
		return "", err
	}
	r.rep.Filter = rep
	parts := []string{fmt.Sprintf("%d rows, unfiltered %.2f ms", n, *rep.Unfiltered.MedianMS)}
	var bad []string
	checked := 0
	for _, row := range rep.Rows {
		checked += row.Checked
		parts = append(parts, fmt.Sprintf("%.3g%% (%d rows): %s %.2f ms, subset-only %.2f ms, %.1f× faster than unfiltered",
			100*row.Fraction, row.Admitted, row.Path, *row.Filtered.MedianMS, *row.Subset.MedianMS, row.Speedup.Median))
		if !row.Exact {
			bad = append(bad, fmt.Sprintf("%.3g%%: a filtered answer differs from the subset index's", 100*row.Fraction))
		}
		if row.Device != "gpu" {
			bad = append(bad, fmt.Sprintf("%.3g%%: the filtered search ran on %q, not the GPU", 100*row.Fraction, row.Device))
		}
	}
	detail := strings.Join(parts, "; ")
	if len(bad) > 0 {
		return detail, r.fail("filtered on gpu", "%s", strings.Join(bad, "; "))
	}
	r.check("filtered on gpu", fmt.Sprintf("%d filtered answers, each the subset index's, on the GPU", checked))
	return detail, nil
}

// soak runs the mixed-load soak on the GPU for what time is left, up to
// Soak.
func (r *checkRun) soak(ctx context.Context) (string, error) {
	d := min(r.o.Soak, time.Until(r.deadline)-15*time.Second)
	if d <= 0 {
		return "no time left", nil
	}
	rep, err := RunSoak(ctx, SoakOptions{N: 50000, Dim: r.o.Dim, K: r.o.K, Duration: d, Device: engine.GPU, Adapter: r.sel,
		Seed: r.o.Seed, Searchers: 4, Writers: 2, SampleEach: time.Second})
	if err != nil {
		return "", err
	}
	r.rep.Soak = rep
	detail := fmt.Sprintf("%d searches, %d writes in %v, %s", rep.Searches, rep.Writes, d.Round(time.Second), rep.Info)
	if rep.Failed() {
		return detail, fmt.Errorf("%d errors, %d wrong answers: %s", rep.Errors, rep.Wrong, strings.Join(rep.FirstProblems, "; "))
	}
	return detail, nil
}

// sampleSMI samples nvidia-smi every 200 ms while the run lasts; the
// returned func stops it.
func (r *checkRun) sampleSMI(ctx context.Context) func() {
	if r.o.SMI == "" {
		return func() {}
	}
	sctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(sctx, r.o.SMI, "--query-gpu=utilization.gpu,memory.used,power.draw",
		"--format=csv,noheader,nounits", "-lms", "200")
	out, err := cmd.StdoutPipe()
	if err != nil || cmd.Start() != nil {
		cancel()
		r.rep.Asserts["gpu busy"] = "not checked: nvidia-smi did not start"
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Split(sc.Text(), ",")
			if len(f) < 3 {
				continue
			}
			num := func(s string) float64 { v, _ := strconv.ParseFloat(strings.TrimSpace(s), 64); return v }
			r.rep.mu.Lock()
			r.rep.Busy = append(r.rep.Busy, BusySample{At: time.Since(r.start).Seconds(), UtilPct: num(f[0]), MemMiB: num(f[1]), PowerW: num(f[2])})
			r.rep.mu.Unlock()
		}
	}()
	return func() {
		cancel()
		_ = cmd.Wait()
		<-done
	}
}

// assertBusy checks nvidia-smi's samples: during the float32 batches the
// GPU was busy (utilisation ≥ 30% in some sample) and its memory held the
// rows (≥ 80% of their bytes in use).
func (r *checkRun) assertBusy(status map[string]string) {
	if _, ok := r.rep.Asserts["gpu busy"]; ok {
		return
	}
	if r.o.SMI == "" {
		r.rep.Asserts["gpu busy"] = "not checked: nvidia-smi not present"
		return
	}
	var from, to float64
	for _, s := range r.rep.Steps {
		if s.Name == "f32 batches" {
			from, to = s.Start, s.End
		}
	}
	if status["f32 batches"] != "ok" {
		r.rep.Asserts["gpu busy"] = "not checked: the float32 batches did not run"
		return
	}
	var util, mem float64
	n := 0
	for _, b := range r.rep.Busy {
		if b.At >= from-0.5 && b.At <= to+0.5 {
			util, mem, n = max(util, b.UtilPct), max(mem, b.MemMiB), n+1
		}
	}
	r.rep.BusyPeak["util_pct"], r.rep.BusyPeak["mem_mib"], r.rep.BusyPeak["samples"] = util, mem, float64(n)
	rowsMiB := float64(r.o.Rows) * float64(r.o.Dim) * 4 / (1 << 20)
	switch {
	case n == 0:
		r.rep.Failures = append(r.rep.Failures, "gpu busy: no nvidia-smi sample during the float32 batches")
		r.rep.Asserts["gpu busy"] = "FAIL: no sample"
	case util < 30 || mem < 0.8*rowsMiB:
		msg := fmt.Sprintf("during the float32 batches at most %.0f%% busy and %.0f MiB in use (the rows are %.0f MiB)", util, mem, rowsMiB)
		r.rep.Failures = append(r.rep.Failures, "gpu busy: "+msg)
		r.rep.Asserts["gpu busy"] = "FAIL: " + msg
	default:
		r.rep.Asserts["gpu busy"] = fmt.Sprintf("ok: %d samples during the float32 batches, up to %.0f%% busy, %.0f MiB in use", n, util, mem)
	}
}

// assertGPU checks that every search of the run ran on the GPU (each
// search also fails on its own if one did not), and that the float32
// index never left it.
func (r *checkRun) assertGPU() {
	n := 0
	for _, s := range r.rep.Searches {
		if s.Device != "gpu" && s.Error == "" {
			r.rep.Failures = append(r.rep.Failures, fmt.Sprintf("all on gpu: a %s search of %d ran on %q", s.Precision, s.NQ, s.Device))
			r.rep.Asserts["all on gpu"] = "FAIL"
			return
		}
		n++
	}
	if r.f32 != nil {
		if info := r.f32.Info(); info.Device != engine.GPU || info.Recoveries > 0 || info.LastFailure != "" {
			msg := fmt.Sprintf("the float32 index is on the %v after %d recoveries (last failure %q)", info.Device, info.Recoveries, info.LastFailure)
			r.rep.Failures = append(r.rep.Failures, "all on gpu: "+msg)
			r.rep.Asserts["all on gpu"] = "FAIL: " + msg
			return
		}
	}
	if n == 0 {
		r.rep.Asserts["all on gpu"] = "not checked: no search ran"
		return
	}
	r.rep.Asserts["all on gpu"] = fmt.Sprintf("ok: %d searches, every one on the GPU, no fallback, no recovery", n)
}

// WriteDeviceCheck writes the report as dir/report.json and a summary,
// one line a step and each assertion, as dir/summary.txt.
func WriteDeviceCheck(dir string, rep *DeviceCheckReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	var s strings.Builder
	fmt.Fprintf(&s, "adapter: %s (vendor 0x%x, %s, %s)\n", rep.Adapter.Name, rep.Adapter.VendorID, rep.Adapter.Type, rep.Adapter.API)
	for _, st := range rep.Steps {
		fmt.Fprintf(&s, "%-12s %-7s %6.1f s  %s\n", st.Name, st.Status, st.Seconds, st.Detail)
	}
	names := make([]string, 0, len(rep.Asserts))
	for n := range rep.Asserts {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&s, "assert %-14s %s\n", n, rep.Asserts[n])
	}
	verdict := "PASS"
	if !rep.Passed {
		verdict = "FAIL: " + strings.Join(rep.Failures, "; ")
	}
	fmt.Fprintf(&s, "verdict: %s\n", verdict)
	return os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(s.String()), 0o644)
}
