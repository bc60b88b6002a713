//go:build cgo && !nogpu

package gpu

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/internal/core"
)

// Built reports whether this binary has the wgpu backend.
const Built = true

// gpuCall runs f and turns a panic from the binding into an error, so no
// wgpu validation failure crosses the engine's API.
func gpuCall(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: %v", ErrFailed, what, r)
			flushErrorPool()
		}
	}()
	if err = f(); err != nil {
		flushErrorPool()
		var wrapped error = err
		if !errors.Is(err, ErrFailed) {
			wrapped = fmt.Errorf("%w: %s: %v", ErrFailed, what, err)
		}
		return wrapped
	}
	return nil
}

// flushErrorPool empties the binding's pool of error-capture objects. The
// binding does not clear a captured error when it recycles the object, so
// after one failed Try* call a later successful call could report the old
// error. A sync.Pool drops its contents over two garbage collections; this
// runs only after a failure.
func flushErrorPool() {
	runtime.GC()
	runtime.GC()
}

// process-wide wgpu state: one instance, the adapters per backend mask, and
// the probe verdict per adapter, each computed once.
var (
	instMu    sync.Mutex
	inst      *wgpu.Instance
	adapters  = map[wgpu.InstanceBackend][]*wgpu.Adapter{}
	verdicts  = map[string]*verdict{}
	verdictMu sync.Mutex
)

// verdict is the cached probe result for one adapter.
type verdict struct {
	done   chan struct{}
	dev    *Device
	report Report
}

// BackendMask returns the wgpu instance backend flags for a backend name ("" for
// all). The binding names only the all-backends value.
func BackendMask(name string) wgpu.InstanceBackend {
	switch strings.ToLower(name) {
	case "vulkan":
		return 1
	case "gl":
		return 2
	case "metal":
		return 4
	case "dx12":
		return 8
	}
	return wgpu.InstanceBackendAll
}

func apiName(b wgpu.BackendType) string {
	switch b {
	case wgpu.BackendTypeVulkan:
		return "vulkan"
	case wgpu.BackendTypeMetal:
		return "metal"
	case wgpu.BackendTypeD3D12:
		return "dx12"
	case wgpu.BackendTypeD3D11:
		return "dx11"
	case wgpu.BackendTypeOpenGL, wgpu.BackendTypeOpenGLES:
		return "gl"
	}
	return strings.ToLower(b.String())
}

func typeName(t wgpu.AdapterType) string {
	switch t {
	case wgpu.AdapterTypeDiscreteGPU:
		return "discrete"
	case wgpu.AdapterTypeIntegratedGPU:
		return "integrated"
	case wgpu.AdapterTypeCPU:
		return "cpu"
	}
	return "unknown"
}

func describeAdapter(a *wgpu.Adapter) core.AdapterInfo {
	i := a.GetInfo()
	return core.AdapterInfo{
		Name:     i.Device,
		Vendor:   i.Vendor,
		VendorID: i.VendorId,
		DeviceID: i.DeviceId,
		API:      apiName(i.BackendType),
		Type:     typeName(i.AdapterType),
		Driver:   i.Description,
	}
}

// listAdapters returns the adapters of the backends in mask, enumerated once
// per process.
func listAdapters(mask wgpu.InstanceBackend) (list []*wgpu.Adapter, err error) {
	instMu.Lock()
	defer instMu.Unlock()
	if l, ok := adapters[mask]; ok {
		return l, nil
	}
	err = gpuCall("enumerate adapters", func() error {
		if inst == nil {
			inst = wgpu.CreateInstance(nil)
		}
		list = inst.EnumerateAdapters(&wgpu.InstanceEnumerateAdapterOptons{Backends: mask})
		return nil
	})
	if err != nil {
		return nil, err
	}
	adapters[mask] = list
	return list, nil
}

// Device is one wgpu device with its queue, shared by every index on that
// adapter. Its mutex serialises all wgpu calls on the device: error scopes
// are per device, so concurrent Try* calls could see each other's errors.
type Device struct {
	mu        sync.Mutex
	adapter   *wgpu.Adapter
	device    *wgpu.Device
	queue     *wgpu.Queue
	info      core.AdapterInfo
	lim       Limits
	pipelines pipelineCache
	gather    gatherPipes           // gather.wgsl, compiled on first use (gather.go)
	readPipe  *wgpu.ComputePipeline // read.wgsl, compiled on first ReadFloor
	// owned is set when the caller created the device (Adopt), so it may
	// use an index's buffers on it (share.go).
	owned bool
	// subgroups is set when the device has wgpu's native subgroup feature
	// and the shuffle-reduction variant of scores.wgsl passed the self-test.
	subgroups bool
	// timestamps is set when the device can write timestamps inside a
	// compute pass.
	timestamps bool
	// fused is set once the fused scan-and-select (topk.wgsl) has passed
	// the self-test on this device with its chosen variant; fusedErr says
	// why not when it failed (searches then take the radix select).
	fused    bool
	fusedErr error
	// team is the widest team (invocations per row) scores.wgsl uses on
	// this device, measured by tuneTeam; 0 until then (64).
	team uint32
	// staged is set when batches score faster with their queries staged
	// in workgroup memory, also measured by tuneTeam.
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
	// timingBytes, when not 0, replaces hardwareTimingBytes (tests time a
	// hardware-sized slab on a software adapter in seconds); failTiming,
	// set by tests only, fails the timing of a slab of that many rows, as
	// a device without the memory for it would.
	timingBytes uint64
	failTiming  func(rows int) bool
	// editScores, set by tests only, rewrites scores.wgsl before it is
	// compiled (to reach a branch no software adapter takes).
	editScores func(string) string
	// Calibrate's measurements, taken on first use.
	routeOnce   sync.Once
	latency     time.Duration
	bytesPerSec float64
	routeErr    error
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

// openDevice creates a device on a with the adapter's own limits: the
// defaults would cap maxBufferSize at 256 MiB. (Device.GetLimits is not
// called: in this binding it can abort the process.)
func openDevice(a *wgpu.Adapter) (*Device, error) { return openDeviceWith(a, nil) }

// openDeviceWith is openDevice with the adapter's limits changed by edit
// (nil: none) before the device is requested: tests ask a software adapter
// for limits that look like a hardware GPU's.
func openDeviceWith(a *wgpu.Adapter, edit func(*wgpu.Limits)) (*Device, error) {
	d := &Device{adapter: a, info: describeAdapter(a)}
	err := gpuCall("request device", func() error {
		lim := a.GetLimits()
		if edit != nil {
			edit(&lim)
		}
		d.lim = limitsOf(lim)
		var features []wgpu.FeatureName
		if a.HasFeature(nativeFeatureSubgroup) {
			features = append(features, nativeFeatureSubgroup)
			d.subgroups = true
		}
		if a.HasFeature(wgpu.FeatureNameTimestampQuery) && a.HasFeature(nativeFeatureTimestampInsidePasses) {
			features = append(features, wgpu.FeatureNameTimestampQuery, nativeFeatureTimestampInsidePasses)
			d.timestamps = true
		}
		dev, err := a.RequestDevice(&wgpu.DeviceDescriptor{Label: "umbra", RequiredLimits: &lim, RequiredFeatures: features})
		if err != nil {
			return err
		}
		d.device = dev
		d.queue = dev.GetQueue()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// submit finishes enc (nil submits only the queued writes) and submits it;
// with wait it blocks until the device is idle. The caller holds d.mu and
// still releases enc.
func (d *Device) submit(enc *wgpu.CommandEncoder, wait bool) error {
	if enc != nil {
		cmd, err := enc.TryFinish(nil)
		if err != nil {
			return err
		}
		d.queue.Submit(cmd)
		cmd.Release()
	} else {
		d.queue.Submit()
	}
	if wait {
		d.device.Poll(true, nil)
	}
	return nil
}

// nativeFeatureSubgroup is wgpu-native's WGPUNativeFeature_Subgroup, which
// this binding does not name: it enables the subgroup built-ins without an
// `enable` directive in the shader.
const nativeFeatureSubgroup wgpu.FeatureName = 0x00030021

// nativeFeatureTimestampInsidePasses is WGPUNativeFeature_
// TimestampQueryInsidePasses: timestamps written between dispatches of one
// compute pass, which is how a traced search times its kernels on the GPU's
// own clock.
const nativeFeatureTimestampInsidePasses wgpu.FeatureName = 0x00030025

// Adapter is one adapter the instance enumerated.
type Adapter struct {
	a    *wgpu.Adapter
	Info core.AdapterInfo
}

// Adapters lists the adapters of backend ("vulkan", "metal", "dx12", "gl";
// "" for all), enumerated once per process per backend.
func Adapters(backend string) ([]*Adapter, error) {
	list, err := listAdapters(BackendMask(backend))
	if err != nil {
		return nil, err
	}
	out := make([]*Adapter, 0, len(list))
	for _, a := range list {
		var info core.AdapterInfo
		if err := gpuCall("adapter info", func() error { info = describeAdapter(a); return nil }); err != nil {
			continue
		}
		out = append(out, &Adapter{a: a, Info: info})
	}
	return out, nil
}

// Probe opens a device on the adapter and self-tests it, at most once per
// process per adapter; later calls wait for and reuse the first verdict. A
// probe that outlives timeout, or whose ctx ends first, is reported as
// failed (the goroutine is left to finish on its own: a wgpu call cannot be
// interrupted).
func (ad *Adapter) Probe(ctx context.Context, timeout time.Duration) (*Device, Report) {
	a := ad.a
	verdictMu.Lock()
	v, ok := verdicts[adapterKey(ad.Info)]
	if !ok {
		v = &verdict{done: make(chan struct{})}
		verdicts[adapterKey(ad.Info)] = v
		go func() {
			defer close(v.done)
			start := time.Now()
			var r Report
			var dev *Device
			err := gpuCall("probe", func() error {
				r.Limits = limitsOf(a.GetLimits())
				for _, f := range a.GetFeatures() {
					r.Features = append(r.Features, f.String())
				}
				var err error
				if dev, err = openDevice(a); err != nil {
					return err
				}
				return dev.verify()
			})
			r.Elapsed = time.Since(start)
			if err != nil {
				r.Error = err.Error()
			} else {
				r.Works = true
				v.dev = dev
			}
			v.report = r
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
