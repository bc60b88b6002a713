package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/umbravec/umbra/internal/packed"
)

// Sentinels the backend's errors wrap; engine maps them to its own.
var (
	// ErrFailed: a wgpu call failed (validation, out of memory, a lost
	// device, a panic in the binding).
	ErrFailed = errors.New("wgpu")
	// ErrTooLarge: the data or the request does not fit the device's
	// limits.
	ErrTooLarge = errors.New("device limits")
	// ErrNotBuilt: this binary has no wgpu backend.
	ErrNotBuilt = errors.New("built without GPU support")
)

// AdapterInfo describes one adapter; engine.AdapterInfo has the same
// fields.
type AdapterInfo struct {
	Name     string
	Vendor   string
	VendorID uint32
	DeviceID uint32
	API      string // "vulkan", "metal", "dx12", "gl"
	Type     string // "discrete", "integrated", "cpu" or "unknown"
	Driver   string
}

// Software reports whether the adapter runs on the CPU.
func (a AdapterInfo) Software() bool { return a.Type == "cpu" }

// String names the adapter with its API and type.
func (a AdapterInfo) String() string { return a.Name + " (" + a.API + ", " + a.Type + ")" }

// Key identifies the adapter within a process.
func (a AdapterInfo) Key() string {
	return fmt.Sprintf("%s|%s|%x|%x|%s", a.API, a.Name, a.VendorID, a.DeviceID, a.Driver)
}

// Limits are what a device was planned against; engine.DeviceLimits has
// the same fields.
type Limits struct {
	MaxStorageBindingBytes uint64
	MaxBufferBytes         uint64
	MaxWorkgroupsPerDim    uint32
	MaxInvocations         uint32
	MaxWorkgroupBytes      uint32
	Subgroups              bool
	Timestamps             bool
	Team                   uint32
	StagedQueries          bool
	// FusedK and FusedBatchK are the largest k the fused scan-and-select
	// takes for one query and for a batch (0: the device did not pass its
	// fused self-test, or its workgroup memory holds no plan).
	FusedK, FusedBatchK uint32
}

// Report is what probing one adapter found.
type Report struct {
	Limits   Limits
	Features []string
	Works    bool
	Elapsed  time.Duration
	Error    string
}

// Stages accumulates where one traced call spent its time on the device,
// and what it issued; engine adds it into its Trace.
type Stages struct {
	Upload, Kernel, Readback, Select time.Duration
	KernelClock                      string
	UploadBytes, ReadbackBytes       int64
	// What the calls issued, counted where the wgpu calls are made:
	// compute dispatches, queue submissions, buffer maps (each a round
	// trip that waits for the device), bytes written to the device by
	// queue writes, and bytes read back through maps.
	Dispatches, Submissions, Maps int64
	BytesUp, BytesDown            int64
	// Path is the selection the last search used: "fused" (scan and
	// select in one pass, topk.wgsl), "radix" (scores, then select.wgsl),
	// "host" (every score read back, selected on the host) or "scores".
	Path string
}

// Add adds o's durations and counts into s.
func (s *Stages) Add(o *Stages) {
	if s == nil || o == nil {
		return
	}
	s.Upload += o.Upload
	s.Kernel += o.Kernel
	s.Readback += o.Readback
	s.Select += o.Select
	s.UploadBytes += o.UploadBytes
	s.ReadbackBytes += o.ReadbackBytes
	s.Dispatches += o.Dispatches
	s.Submissions += o.Submissions
	s.Maps += o.Maps
	s.BytesUp += o.BytesUp
	s.BytesDown += o.BytesDown
	if o.KernelClock != "" {
		s.KernelClock = o.KernelClock
	}
	if o.Path != "" {
		s.Path = o.Path
	}
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
// batch.
const BatchQueries = 8

// CalibrationRows × CalibrationDim float32 is the slab Auto times both
// paths on: 32 MiB, large enough that scan rate dominates latency on a CPU
// and small enough to cost well under a second once per process.
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
