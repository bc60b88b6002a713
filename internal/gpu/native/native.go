//go:build cgo && !nogpu

package native

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/shaders"
)

var errFailed = gpuplan.ErrFailed

// call runs f and turns a panic from the binding into an error, so no
// wgpu validation failure crosses the driver.
func call(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: %v", errFailed, what, r)
			flushErrorPool()
		}
	}()
	if err = f(); err != nil {
		flushErrorPool()
		if !errors.Is(err, errFailed) && !errors.Is(err, gpuplan.ErrTooLarge) {
			err = fmt.Errorf("%w: %s: %v", errFailed, what, err)
		}
		return err
	}
	return nil
}

// Call is call for the driver's own uses of the binding (an adopted
// device's description).
func Call(what string, f func() error) error { return call(what, f) }

// flushErrorPool empties the binding's pool of error-capture objects. The
// binding does not clear a captured error when it recycles the object, so
// after one failed Try* call a later successful call could report the old
// error. A sync.Pool drops its contents over two garbage collections; this
// runs only after a failure.
func flushErrorPool() {
	runtime.GC()
	runtime.GC()
}

// process-wide wgpu state: one instance and the adapters per backend
// mask, each enumerated once.
var (
	instMu   sync.Mutex
	inst     *wgpu.Instance
	adapters = map[wgpu.InstanceBackend][]*wgpu.Adapter{}
)

// BackendMask returns the wgpu instance backend flags for a backend name
// ("" for all). The binding names only the all-backends value.
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

func describe(a *wgpu.Adapter) core.AdapterInfo {
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

// Describe is what umbra reports about a wgpu adapter.
func Describe(a *wgpu.Adapter) (info core.AdapterInfo, err error) {
	err = call("describe adapter", func() error { info = describe(a); return nil })
	return info, err
}

// Adapter is one adapter the instance enumerated.
type Adapter struct {
	Raw  *wgpu.Adapter
	Info core.AdapterInfo
}

// Adapters lists the adapters of backend ("vulkan", "metal", "dx12",
// "gl"; "" for all), enumerated once per process per backend.
func Adapters(backend string) ([]*Adapter, error) {
	mask := BackendMask(backend)
	instMu.Lock()
	list, ok := adapters[mask]
	if !ok {
		err := call("enumerate adapters", func() error {
			if inst == nil {
				inst = wgpu.CreateInstance(nil)
			}
			list = inst.EnumerateAdapters(&wgpu.InstanceEnumerateAdapterOptons{Backends: mask})
			return nil
		})
		if err != nil {
			instMu.Unlock()
			return nil, err
		}
		adapters[mask] = list
	}
	instMu.Unlock()
	out := make([]*Adapter, 0, len(list))
	for _, a := range list {
		info, err := Describe(a)
		if err != nil {
			continue
		}
		out = append(out, &Adapter{Raw: a, Info: info})
	}
	return out, nil
}

// Features lists the adapter's features by name.
func (a *Adapter) Features() (out []string, err error) {
	err = call("adapter features", func() error {
		for _, f := range a.Raw.GetFeatures() {
			out = append(out, f.String())
		}
		return nil
	})
	return out, err
}

// Limits are the adapter's own limits.
func (a *Adapter) Limits() (l wgpu.Limits, err error) {
	err = call("adapter limits", func() error { l = a.Raw.GetLimits(); return nil })
	return l, err
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

// Device is one wgpu device and its queue as a gpuplan.API, with the
// layouts, pipelines and bind groups it built.
type Device struct {
	adapter *wgpu.Adapter
	device  *wgpu.Device
	queue   *wgpu.Queue
	limits  wgpu.Limits
	// subgroups: the device has wgpu's native subgroup feature;
	// timestamps: it can write timestamps inside a compute pass.
	subgroups, timestamps bool
	layouts               map[string]*wgpu.BindGroupLayout
	pipes                 map[string]*pipe
	binds                 map[bindKey]*wgpu.BindGroup
	// stamps and resolved time a pass on the GPU clock; stampRead maps
	// them when the work reads nothing back itself.
	stamps    *wgpu.QuerySet
	resolved  *wgpu.Buffer
	stampRead *wgpu.Buffer
}

// buffer is a wgpu buffer as a gpuplan.Buffer.
type buffer struct {
	b    *wgpu.Buffer
	size uint64
}

func (b *buffer) Bytes() uint64 { return b.size }

// pipe is a compiled pipeline with its layout.
type pipe struct {
	p      *wgpu.ComputePipeline
	layout *wgpu.BindGroupLayout
	label  string
}

func (p *pipe) Label() string { return p.label }

// bindKey is a bind group: a layout and the buffers at its bindings.
type bindKey struct {
	layout *wgpu.BindGroupLayout
	bufs   [8]*wgpu.Buffer
}

// Open creates a device on a with the adapter's own limits (the defaults
// would cap maxBufferSize at 256 MiB), changed by edit (nil: none) before
// the device is requested: tests ask a software adapter for limits like a
// hardware GPU's. (Device.GetLimits is not called: in this binding it can
// abort the process.)
func Open(a *Adapter, edit func(*wgpu.Limits)) (*Device, error) {
	d := newDevice(a.Raw)
	err := call("request device", func() error {
		lim := a.Raw.GetLimits()
		if edit != nil {
			edit(&lim)
		}
		d.limits = lim
		var features []wgpu.FeatureName
		if a.Raw.HasFeature(nativeFeatureSubgroup) {
			features = append(features, nativeFeatureSubgroup)
			d.subgroups = true
		}
		if a.Raw.HasFeature(wgpu.FeatureNameTimestampQuery) && a.Raw.HasFeature(nativeFeatureTimestampInsidePasses) {
			features = append(features, wgpu.FeatureNameTimestampQuery, nativeFeatureTimestampInsidePasses)
			d.timestamps = true
		}
		dev, err := a.Raw.RequestDevice(&wgpu.DeviceDescriptor{Label: "umbra", RequiredLimits: &lim, RequiredFeatures: features})
		if err != nil {
			return err
		}
		d.device, d.queue = dev, dev.GetQueue()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Wrap is a device the caller created and owns, with the limits it was
// created with (nil: WebGPU's defaults, the fields umbra plans with). The
// device's limits are not read back: Device.GetLimits can abort the
// process in this binding.
func Wrap(adapter *wgpu.Adapter, device *wgpu.Device, limits *wgpu.Limits) (*Device, error) {
	d := newDevice(adapter)
	d.device = device
	err := call("adopt device", func() error {
		if limits != nil {
			d.limits = *limits
		} else {
			d.limits = WebGPUDefaults()
		}
		d.queue = device.GetQueue()
		d.subgroups = device.HasFeature(nativeFeatureSubgroup)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

func newDevice(a *wgpu.Adapter) *Device {
	return &Device{adapter: a, layouts: map[string]*wgpu.BindGroupLayout{}, pipes: map[string]*pipe{},
		binds: map[bindKey]*wgpu.BindGroup{}}
}

// WebGPUDefaults are the limits the WebGPU specification guarantees on
// every device created without RequiredLimits, for the fields umbra plans
// with. (The binding's DefaultLimits holds "undefined" markers, not these
// values.)
func WebGPUDefaults() wgpu.Limits {
	return wgpu.Limits{
		MaxStorageBufferBindingSize:       128 << 20,
		MaxBufferSize:                     256 << 20,
		MaxComputeWorkgroupsPerDimension:  65535,
		MaxComputeInvocationsPerWorkgroup: 256,
		MaxComputeWorkgroupStorageSize:    16384,
	}
}

// Limits are the limits the device was created with.
func (d *Device) Limits() wgpu.Limits { return d.limits }

// Subgroups reports the native subgroup feature; Timestamps, timestamps
// inside a compute pass.
func (d *Device) Subgroups() bool  { return d.subgroups }
func (d *Device) Timestamps() bool { return d.timestamps }

// Adapter and Raw are the binding's adapter and device.
func (d *Device) Adapter() *wgpu.Adapter { return d.adapter }
func (d *Device) Raw() *wgpu.Device      { return d.device }

// RawBuffer is the binding's buffer behind b (nil for nil).
func RawBuffer(b gpuplan.Buffer) *wgpu.Buffer {
	if nb, ok := b.(*buffer); ok && nb != nil {
		return nb.b
	}
	return nil
}

func raw(b gpuplan.Buffer) *wgpu.Buffer { return RawBuffer(b) }

// NewBuffer creates a buffer.
func (d *Device) NewBuffer(label string, size uint64, usage gpuplan.Usage) (gpuplan.Buffer, error) {
	var nb *buffer
	err := call("create "+label, func() error {
		b, err := d.device.TryCreateBuffer(&wgpu.BufferDescriptor{Label: label, Size: size, Usage: wgpu.BufferUsage(usage)})
		if err != nil {
			return err
		}
		nb = &buffer{b: b, size: size}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return nb, nil
}

// Free releases b and the bind groups that name it.
func (d *Device) Free(b gpuplan.Buffer) {
	wb := raw(b)
	if wb == nil {
		return
	}
	_ = call("release buffer", func() error {
		for k, bg := range d.binds {
			for _, x := range k.bufs {
				if x == wb {
					bg.Release()
					delete(d.binds, k)
					break
				}
			}
		}
		wb.Release()
		return nil
	})
}

// Write queues data into b at offset.
func (d *Device) Write(b gpuplan.Buffer, offset uint64, data []byte) error {
	return call("write buffer", func() error { return d.queue.TryWriteBuffer(raw(b), offset, data) })
}

// layoutEntries turns a shader's bindings (package shaders, shared with
// the browser backend) into wgpu's layout entries.
func layoutEntries(bs []shaders.Binding) []wgpu.BindGroupLayoutEntry {
	out := make([]wgpu.BindGroupLayoutEntry, len(bs))
	for i, b := range bs {
		t := wgpu.BufferBindingTypeStorage
		switch b.Kind {
		case shaders.ReadOnlyStorage:
			t = wgpu.BufferBindingTypeReadOnlyStorage
		case shaders.Uniform:
			t = wgpu.BufferBindingTypeUniform
		}
		out[i] = wgpu.BindGroupLayoutEntry{Binding: b.Binding, Visibility: wgpu.ShaderStageCompute, Buffer: wgpu.BufferBindingLayout{Type: t}}
	}
	return out
}

// Pipelines compiles each spec's pipeline once, with an explicit layout
// per layout name: explicit, not derived from each pipeline, so one bind
// group serves every pipeline of a layout (WebGPU's derived layouts are
// never compatible between pipelines).
func (d *Device) Pipelines(specs ...gpuplan.PipeSpec) ([]gpuplan.Pipeline, error) {
	out := make([]gpuplan.Pipeline, len(specs))
	err := call("compile shaders", func() error {
		mods := map[string]*wgpu.ShaderModule{}
		defer func() {
			for _, m := range mods {
				m.Release()
			}
		}()
		for i, sp := range specs {
			if p, ok := d.pipes[sp.Key()]; ok {
				out[i] = p
				continue
			}
			bgl, ok := d.layouts[sp.Layout]
			if !ok {
				var err error
				bgl, err = d.device.TryCreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: "umbra " + sp.Layout, Entries: layoutEntries(sp.Bindings)})
				if err != nil {
					return fmt.Errorf("%w: layout %s: %v", errFailed, sp.Layout, err)
				}
				d.layouts[sp.Layout] = bgl
			}
			mod, ok := mods[sp.Source]
			if !ok {
				var err error
				mod, err = d.device.TryCreateShaderModule(&wgpu.ShaderModuleDescriptor{Label: sp.Label, WGSLSource: &wgpu.ShaderSourceWGSL{Code: sp.Source}})
				if err != nil {
					return fmt.Errorf("%w: compile %s: %v", errFailed, sp.Label, err)
				}
				mods[sp.Source] = mod
			}
			pl, err := d.device.TryCreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{Label: sp.Label, BindGroupLayouts: []*wgpu.BindGroupLayout{bgl}})
			if err != nil {
				return fmt.Errorf("%w: compile %s: %v", errFailed, sp.Label, err)
			}
			cp, err := d.device.TryCreateComputePipeline(&wgpu.ComputePipelineDescriptor{
				Label:   sp.Label + ":" + sp.Entry,
				Layout:  pl,
				Compute: wgpu.ProgrammableStageDescriptor{Module: mod, EntryPoint: sp.Entry},
			})
			pl.Release()
			if err != nil {
				return fmt.Errorf("%w: compile %s: %v", errFailed, sp.Label, err)
			}
			p := &pipe{p: cp, layout: bgl, label: sp.Label + ":" + sp.Entry}
			d.pipes[sp.Key()] = p
			out[i] = p
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// bind returns the bind group of p's layout over bufs, made once per set
// of buffers (Free drops those that name a freed buffer).
func (d *Device) bind(p *pipe, bufs []gpuplan.Buffer) (*wgpu.BindGroup, error) {
	k := bindKey{layout: p.layout}
	if len(bufs) > len(k.bufs) {
		return nil, fmt.Errorf("%w: %s binds %d buffers", errFailed, p.label, len(bufs))
	}
	for i, b := range bufs {
		k.bufs[i] = raw(b)
	}
	if bg, ok := d.binds[k]; ok {
		return bg, nil
	}
	entries := make([]wgpu.BindGroupEntry, len(bufs))
	for i := range bufs {
		entries[i] = wgpu.BindGroupEntry{Binding: uint32(i), Buffer: k.bufs[i], Size: wgpu.WholeSize}
	}
	bg, err := d.device.TryCreateBindGroup(&wgpu.BindGroupDescriptor{Label: p.label, Layout: p.layout, Entries: entries})
	if err != nil {
		return nil, err
	}
	d.binds[k] = bg
	return bg, nil
}

// ensureStamps creates the two-entry timestamp query set, the buffer it
// resolves into and a small one to map it from.
func (d *Device) ensureStamps() error {
	if d.stamps != nil {
		return nil
	}
	qs, err := d.device.TryCreateQuerySet(&wgpu.QuerySetDescriptor{Label: "umbra kernel time", Type: wgpu.QueryTypeTimestamp, Count: 2})
	if err != nil {
		return err
	}
	res, err := d.device.TryCreateBuffer(&wgpu.BufferDescriptor{Label: "umbra kernel time", Size: gpuplan.StampRoom,
		Usage: wgpu.BufferUsageQueryResolve | wgpu.BufferUsageCopySrc})
	if err != nil {
		qs.Release()
		return err
	}
	rd, err := d.device.TryCreateBuffer(&wgpu.BufferDescriptor{Label: "umbra kernel time read", Size: gpuplan.StampRoom,
		Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst})
	if err != nil {
		qs.Release()
		res.Release()
		return err
	}
	d.stamps, d.resolved, d.stampRead = qs, res, rd
	return nil
}

// Submit encodes w, submits it and reads back what it asks.
func (d *Device) Submit(w gpuplan.Work, traced bool) (done gpuplan.Done, err error) {
	err = call("submit", func() error {
		timed := w.Time && len(w.Pass) > 0 && d.timestamps && d.ensureStamps() == nil
		enc, err := d.device.TryCreateCommandEncoder(nil)
		if err != nil {
			return err
		}
		defer enc.Release()
		if len(w.Pass) > 0 {
			pass := enc.BeginComputePass(nil)
			if timed {
				writeTimestamp(pass, d.stamps, 0)
			}
			for _, x := range w.Pass {
				p, ok := x.Pipe.(*pipe)
				if !ok || p == nil {
					pass.Release()
					return fmt.Errorf("%w: a dispatch without a pipeline of this device", errFailed)
				}
				bg, err := d.bind(p, x.Buffers)
				if err != nil {
					pass.Release()
					return err
				}
				pass.SetPipeline(p.p)
				pass.SetBindGroup(0, bg, nil)
				pass.DispatchWorkgroups(x.X, x.Y, x.Z)
			}
			if timed {
				writeTimestamp(pass, d.stamps, 1)
			}
			err := pass.TryEnd()
			pass.Release()
			if err != nil {
				return err
			}
		}
		for _, c := range w.Copies {
			if err := enc.TryCopyBufferToBuffer(raw(c.Src), c.SrcOffset, raw(c.Dst), c.DstOffset, c.Size); err != nil {
				return err
			}
		}
		stampsIn := raw(w.Map)
		stampAt := gpuplan.StampAt(w.MapBytes)
		if timed {
			if err := enc.TryResolveQuerySet(d.stamps, 0, 2, d.resolved, 0); err != nil {
				return err
			}
			if stampsIn == nil || w.Map.Bytes() < stampAt+gpuplan.StampRoom {
				stampsIn, stampAt = d.stampRead, 0
			}
			if err := enc.TryCopyBufferToBuffer(d.resolved, 0, stampsIn, stampAt, gpuplan.StampRoom); err != nil {
				return err
			}
		}
		cmd, err := enc.TryFinish(nil)
		if err != nil {
			return err
		}
		start := time.Now()
		d.queue.Submit(cmd)
		cmd.Release()
		if traced || w.Map == nil && (w.Wait || timed) {
			d.device.Poll(true, nil)
		}
		if traced {
			done.Kernel = time.Since(start)
			start = time.Now()
		}
		if w.Map != nil {
			n := w.MapBytes
			if timed && stampsIn == raw(w.Map) {
				n = stampAt + gpuplan.StampRoom
			}
			data, err := d.mapRead(raw(w.Map), n)
			if err != nil {
				return err
			}
			done.Data = data[:w.MapBytes]
			if timed && stampsIn == raw(w.Map) {
				done.GPU = d.stampTime(data[stampAt:])
			}
		}
		if timed && stampsIn == d.stampRead {
			data, err := d.mapRead(d.stampRead, gpuplan.StampRoom)
			if err != nil {
				return err
			}
			done.GPU = d.stampTime(data)
		}
		if traced {
			done.Readback = time.Since(start)
		}
		return nil
	})
	return done, err
}

// stampTime is the time between the two timestamps in b.
func (d *Device) stampTime(b []byte) time.Duration {
	t0 := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	b = b[8:]
	t1 := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	if t1 < t0 {
		return 0
	}
	return time.Duration(float64(t1-t0) * timestampPeriod(d.queue))
}

// mapRead maps the first n bytes of b, which the work just submitted
// wrote, and returns a copy of them.
func (d *Device) mapRead(b *wgpu.Buffer, n uint64) ([]byte, error) {
	status := wgpu.MapAsyncStatus(0)
	if err := b.TryMapAsync(wgpu.MapModeRead, 0, n, func(s wgpu.MapAsyncStatus) { status = s }); err != nil {
		return nil, err
	}
	d.device.Poll(true, nil)
	if status != wgpu.MapAsyncStatusSuccess {
		return nil, fmt.Errorf("%w: mapping the readback buffer failed: %v", errFailed, status)
	}
	out := make([]byte, n)
	copy(out, b.GetMappedRange(0, uint(n)))
	return out, b.TryUnmap()
}

var _ gpuplan.API = (*Device)(nil)
