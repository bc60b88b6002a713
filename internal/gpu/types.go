package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/shaders"
)

// Sentinels the backend's errors wrap; engine maps them to its own.
var (
	// ErrFailed: a GPU call failed (validation, out of memory, a lost
	// device, a panic in the binding).
	ErrFailed = gpuplan.ErrFailed
	// ErrTooLarge: the data or the request does not fit the device's
	// limits or its memory budget.
	ErrTooLarge = gpuplan.ErrTooLarge
	// ErrNotBuilt: this binary has no wgpu backend.
	ErrNotBuilt = errors.New("built without GPU support")
)

// adapterKey identifies an adapter within a process.
func adapterKey(a core.AdapterInfo) string {
	return fmt.Sprintf("%s|%s|%x|%x|%s", a.API, a.Name, a.VendorID, a.DeviceID, a.Driver)
}

// Limits are the adapter limits a device was planned against, and what
// its probe measured and proved there: `umbra probe --json` and the
// device check report it.
type Limits struct {
	MaxStorageBindingBytes uint64
	MaxBufferBytes         uint64
	MaxWorkgroupsPerDim    uint32
	MaxInvocations         uint32
	MaxWorkgroupBytes      uint32
	// MaxStorageBuffers is how many storage bindings one shader stage
	// may use (0: not known); a compressed search's device selection needs
	// seven (qbounds.wgsl).
	MaxStorageBuffers uint32
	// Subgroups is true when scores are reduced with subgroup shuffles.
	Subgroups bool
	// Timestamps is true when a traced search times its kernels with GPU
	// timestamps (KernelClock "gpu") rather than the wall clock.
	Timestamps bool
	// Team is how many invocations share one row in scores.wgsl: the
	// fastest width the probe measured on this device, capped by the row's
	// vec4 count.
	Team uint32
	// StagedQueries is true when batches stage their queries in workgroup
	// memory on this device (measured faster by the probe).
	StagedQueries bool
	// FusedK and FusedBatchK are the largest k the fused scan-and-select
	// takes for one query and for a batch (one submission, a scan per chunk
	// and a merge; larger k takes the radix select). 0: the device did not
	// pass its fused self-test, or its workgroup memory holds no plan.
	FusedK, FusedBatchK uint32
	// GemmQueries is how many queries gemm.wgsl, the register-tiled batch
	// kernel, scores per pass over the rows (0: none planned), and Gemm
	// whether batches of GemmMinBatch queries or more take it on this
	// device: it passed its self-test (the same bits as a single query's
	// scores) and the probe measured it, with the radix select, faster on
	// a batch than the tiles of BatchQueries (and the fused scan).
	GemmQueries uint32
	Gemm        bool
	// DeviceBudget is the most bytes of device memory the driver lets an
	// index's device allocate, its rows and every scratch buffer counted
	// (0: no budget; SetBudget).
	DeviceBudget uint64
}

// Report is what probing one adapter found.
type Report struct {
	Limits   Limits
	Features []string
	Works    bool
	Elapsed  time.Duration
	Error    string
	// Checks are the probe's self-tests and timings, one per variant it
	// tried: chosen, refused and why.
	Checks []VariantCheck
}

// VariantCheck is what the probe found for one variant of the kernels:
// its self-test (every score against float64, every ranking, or, for
// gemm.wgsl, every score the same bits as scores.wgsl's), then, where it
// passed, whether the timings chose it.
type VariantCheck struct {
	// Kernel is "scores", "fused" or "gemm"; Variant names the
	// configuration ("team 32, subgroup reduction, direct batches").
	Kernel, Variant string
	// Passed: its self-test passed; Error says why not.
	Passed bool
	Error  string
	// Chosen: the device uses it. Why says why it was chosen or, having
	// passed, not (timings, or the probe stopped at a first pass).
	Chosen bool
	Why    string
	// Time is what the probe timed it at (0: not timed).
	Time time.Duration
}

// SelectPath chooses how a search that selects on the device does it.
type SelectPath int32

const (
	// SelectAuto: fused where the device's self-test passed it and k is
	// within the fused limit, radix otherwise.
	SelectAuto SelectPath = iota
	// SelectRadix: always the scores pass and the radix select (the path
	// before the fused one; for comparisons).
	SelectRadix
)

type selectPathKey struct{}

// WithSelectPath returns a context under which the searches on the device
// that are given it take path p: cmd/bench times the radix select beside
// the fused one, and tests force it. Only those calls: nothing else in the
// process, no other index, no other search.
func WithSelectPath(ctx context.Context, p SelectPath) context.Context {
	return context.WithValue(ctx, selectPathKey{}, p)
}

// SelectPathOf is the path ctx asks for: SelectAuto unless WithSelectPath
// set another.
func SelectPathOf(ctx context.Context) SelectPath {
	p, _ := ctx.Value(selectPathKey{}).(SelectPath)
	return p
}

// lap adds the time since start to *d and returns now.
func lap(d *time.Duration, start time.Time) time.Time {
	now := time.Now()
	*d += now.Sub(start)
	return now
}

// BatchQueries is how many queries one pass over the slab scores in a
// batch of scores.wgsl's tiles.
const BatchQueries = 8

// GemmMinBatch is the fewest queries a submission hands gemm.wgsl under
// BatchAuto: below it the batch's last tile would leave most of a
// register tile idle.
const GemmMinBatch = 16

// GemmTile is the most queries gemm.wgsl scores per pass over the rows
// (fewer on a device whose teams are 64 wide): a batch split into pieces
// of a multiple of it reads the rows as often as one whole.
const GemmTile = shaders.GemmTile

// BatchKernel chooses the kernel that scores a batch of queries on the
// device.
type BatchKernel int32

const (
	// BatchAuto: gemm.wgsl for submissions of GemmMinBatch queries or
	// more where the probe chose it (Limits.Gemm), scores.wgsl's tiles
	// (or the fused scan) otherwise.
	BatchAuto BatchKernel = iota
	// BatchTile: scores.wgsl's tiles of BatchQueries, or the fused scan
	// where k allows, for every batch.
	BatchTile
	// BatchGemm: gemm.wgsl and the radix select for every batch of two
	// queries or more.
	BatchGemm
)

type batchKernelKey struct{}

// WithBatchKernel returns a context under which the searches on the
// device that are given it score their batches with kernel k: cmd/bench
// sets the kernels side by side, and tests force each. Only those calls:
// nothing else in the process.
func WithBatchKernel(ctx context.Context, k BatchKernel) context.Context {
	return context.WithValue(ctx, batchKernelKey{}, k)
}

// BatchKernelOf is the kernel ctx asks for: BatchAuto unless
// WithBatchKernel set another.
func BatchKernelOf(ctx context.Context) BatchKernel {
	k, _ := ctx.Value(batchKernelKey{}).(BatchKernel)
	return k
}

// CalibrationRows × CalibrationDim float32 is the slab Auto times the CPU
// and a software adapter on: 32 MiB, large enough that scan rate dominates
// latency on a CPU and small enough to cost well under a second once per
// process. A hardware adapter is timed on a larger one, past its
// last-level cache (Device.Calibrate).
const (
	CalibrationRows = 8192
	CalibrationDim  = 1024
)

// CalibrationSlab is the synthetic slab both paths are timed on, built once
// per process.
var CalibrationSlab = sync.OnceValue(func() *packed.Slab { return packed.Synthetic(CalibrationRows, CalibrationDim) })

// MedianOf runs f n times and returns the median duration.
func MedianOf(n int, f func() error) (time.Duration, error) {
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[n/2], nil
}
