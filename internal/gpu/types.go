package gpu

import (
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
}

// Report is what probing one adapter found.
type Report struct {
	Limits   Limits
	Features []string
	Works    bool
	Elapsed  time.Duration
	Error    string
}

// Stages accumulates where one traced call spent its time on the device;
// engine adds it into its Trace.
type Stages struct {
	Upload, Kernel, Readback, Select time.Duration
	KernelClock                      string
	UploadBytes, ReadbackBytes       int64
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
