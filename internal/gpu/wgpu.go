//go:build cgo && !nogpu

package gpu

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpu/native"
)

// This file is the driver on wgpu-native (internal/gpu/native): the
// adapters, the probe and its verdict per adapter, a caller's own device
// (Adopt), and the index's buffers handed to that caller as wgpu's.

// Built reports whether this binary has the wgpu backend.
const Built = true

// process-wide: the probe verdict per adapter, computed once.
var (
	verdicts  = map[string]*verdict{}
	verdictMu sync.Mutex
)

// verdict is the cached probe result for one adapter.
type verdict struct {
	done   chan struct{}
	dev    *Device
	report Report
}

// BackendMask returns the wgpu instance backend flags for a backend name
// ("" for all).
func BackendMask(name string) wgpu.InstanceBackend { return native.BackendMask(name) }

// Adapter is one adapter the instance enumerated.
type Adapter struct {
	a    *native.Adapter
	Info core.AdapterInfo
}

// Adapters lists the adapters of backend ("vulkan", "metal", "dx12", "gl";
// "" for all), enumerated once per process per backend.
func Adapters(backend string) ([]*Adapter, error) {
	list, err := native.Adapters(backend)
	if err != nil {
		return nil, err
	}
	out := make([]*Adapter, len(list))
	for i, a := range list {
		out[i] = &Adapter{a: a, Info: a.Info}
	}
	return out, nil
}

func limitsOf(l wgpu.Limits) Limits {
	return Limits{
		MaxStorageBindingBytes: l.MaxStorageBufferBindingSize,
		MaxBufferBytes:         l.MaxBufferSize,
		MaxWorkgroupsPerDim:    l.MaxComputeWorkgroupsPerDimension,
		MaxInvocations:         l.MaxComputeInvocationsPerWorkgroup,
		MaxWorkgroupBytes:      l.MaxComputeWorkgroupStorageSize,
		MaxStorageBuffers:      l.MaxStorageBuffersPerShaderStage,
	}
}

// driverOf is the driver over a native device.
func driverOf(n *native.Device, info core.AdapterInfo, owned bool) *Device {
	return NewDevice(n, Caps{Info: info, Limits: limitsOf(n.Limits()), Subgroups: n.Subgroups(), Timestamps: n.Timestamps(), Owned: owned})
}

// openDevice creates a device on a with the adapter's own limits, not yet
// probed.
func openDevice(a *Adapter) (*Device, error) { return openDeviceWith(a, nil) }

// openDeviceWith is openDevice with the adapter's limits changed by edit
// (nil: none) before the device is requested: tests ask a software adapter
// for limits that look like a hardware GPU's.
func openDeviceWith(a *Adapter, edit func(*wgpu.Limits)) (*Device, error) {
	n, err := native.Open(a.a, edit)
	if err != nil {
		return nil, err
	}
	d := driverOf(n, a.Info, false)
	d.reopen = func() (*Device, error) { return reprobe(a, d) }
	return d, nil
}

// nativeOf is the native device under d (nil for another API's).
func nativeOf(d *Device) *native.Device {
	n, _ := d.api.(*native.Device)
	return n
}

// Probe opens a device on the adapter and self-tests it, at most once per
// process per adapter; later calls wait for and reuse the first verdict. A
// probe that outlives timeout, or whose ctx ends first, is reported as
// failed (the goroutine is left to finish on its own: a wgpu call cannot be
// interrupted).
func (ad *Adapter) Probe(ctx context.Context, timeout time.Duration) (*Device, Report) {
	verdictMu.Lock()
	v, ok := verdicts[adapterKey(ad.Info)]
	if !ok {
		v = &verdict{done: make(chan struct{})}
		verdicts[adapterKey(ad.Info)] = v
		go func() {
			defer close(v.done)
			v.dev, v.report = ad.probe()
		}()
	}
	verdictMu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-v.done:
		return v.dev, v.report
	case <-timer.C:
		return nil, Report{Error: fmt.Sprintf("probe did not finish within %v", timeout)}
	case <-ctx.Done():
		return nil, Report{Error: "probe cancelled: " + ctx.Err().Error()}
	}
}

// probe opens a device on the adapter and verifies it: the device (nil
// when it failed) and the report.
func (ad *Adapter) probe() (*Device, Report) {
	start := time.Now()
	var r Report
	var dev *Device
	err := func() error {
		lim, err := ad.a.Limits()
		if err != nil {
			return err
		}
		r.Limits = limitsOf(lim)
		if r.Features, err = ad.a.Features(); err != nil {
			return err
		}
		if dev, err = openDevice(ad); err != nil {
			return err
		}
		err = native.Call("probe", dev.Verify)
		r.Checks = dev.Checks()
		return err
	}()
	r.Elapsed = time.Since(start)
	if err != nil {
		r.Error = err.Error()
		return nil, r
	}
	r.Works = true
	r.Limits = dev.Limits()
	return dev, r
}

// reprobe drops the verdict cached for old's adapter (when it is old's,
// or failed) and probes the adapter again: a device opened anew, for
// Renew after old was lost.
func reprobe(ad *Adapter, old *Device) (*Device, error) {
	key := adapterKey(ad.Info)
	verdictMu.Lock()
	if v, ok := verdicts[key]; ok {
		select {
		case <-v.done:
			if v.dev == old || v.dev == nil {
				delete(verdicts, key)
			}
		default: // a probe is running: wait for its verdict below
		}
	}
	verdictMu.Unlock()
	dev, r := ad.Probe(context.Background(), time.Hour)
	if dev == nil {
		return nil, fmt.Errorf("%w: %s", ErrFailed, r.Error)
	}
	return dev, nil
}

// Adopt wraps a device the caller created and owns, self-tested like a
// probed one. limits are the RequiredLimits the device was created with
// (nil: WebGPU's defaults). The caller must not release adapter or device
// while an index uses them.
func Adopt(adapter *wgpu.Adapter, device *wgpu.Device, limits *wgpu.Limits) (*Device, error) {
	if adapter == nil || device == nil {
		return nil, fmt.Errorf("%w: a device of the caller's needs a non-nil adapter and device", ErrFailed)
	}
	info, err := native.Describe(adapter)
	if err != nil {
		return nil, err
	}
	n, err := native.Wrap(adapter, device, limits)
	if err != nil {
		return nil, err
	}
	d := driverOf(n, info, true)
	if err := native.Call("self-test", d.Verify); err != nil {
		return nil, err
	}
	return d, nil
}

// DescribeAdapter returns what umbra reports about a wgpu adapter.
func DescribeAdapter(a *wgpu.Adapter) (core.AdapterInfo, error) { return native.Describe(a) }

// WebGPUDefaults are the limits the WebGPU specification guarantees on
// every device created without RequiredLimits, for the fields umbra plans
// with.
func WebGPUDefaults() wgpu.Limits { return native.WebGPUDefaults() }

// ResidentChunk is one device buffer of an index's resident rows: rows
// [First, First+Rows) of the index, Stride float32 values each (the
// dimension zero padded to a multiple of 4), row First at offset 0. The
// buffer has Storage, CopySrc and CopyDst usage and may be longer than the
// rows it holds. It belongs to the index: the caller may bind and read it,
// never write or release it. engine/ondevice's Chunk is this type.
type ResidentChunk struct {
	Buffer *wgpu.Buffer
	First  int
	Rows   int
	Stride int
}

// Scores is one float32 per resident row in a device buffer, row r at byte
// 4r. The buffer has Storage, Vertex and CopySrc usage, holds at least
// 4·Rows bytes, and belongs to the index. Buffer is nil when Rows is 0.
// engine/ondevice's Scores is this type.
type Scores struct {
	Buffer *wgpu.Buffer
	Rows   int
}

// Resident lists the buffers that hold the index's rows, in row order. They
// stay valid until the next Upload (which may move a chunk to a larger
// buffer) or Release. The device must not be used from another goroutine
// while the index is in use.
func (g *Index) Resident() ([]ResidentChunk, error) {
	list, err := g.residentChunks()
	if err != nil {
		return nil, err
	}
	out := make([]ResidentChunk, len(list))
	for i, c := range list {
		out[i] = ResidentChunk{Buffer: native.RawBuffer(c.Buffer), First: c.First, Rows: c.Rows, Stride: c.Stride}
	}
	return out, nil
}

// ScoreInto scores every resident row against q (Stride values, prepared as
// a search query is: normalised for cosine, zero padded) with the pass a
// search runs, and leaves the scores on the device: nothing is read back
// and the work is submitted without waiting, so a draw the caller submits
// next sees them. The buffer and its contents stay valid until the next
// ScoreInto or Release; searches and uploads do not touch it. Any failure
// drops the index's scratch state, as a failed search does.
func (g *Index) ScoreInto(ctx context.Context, q []float32) (Scores, error) {
	b, rows, err := g.scoreInto(ctx, q)
	if err != nil || rows == 0 {
		return Scores{}, err
	}
	return Scores{Buffer: native.RawBuffer(b), Rows: rows}, nil
}
