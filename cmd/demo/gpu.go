//go:build cgo && !nogpu

package main

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/engine/ondevice"
)

// guard runs f and turns a panic from the binding into an error: the
// binding panics on some failures, and the demo should exit with a message,
// not a stack trace.
func guard(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: %v", what, r)
		}
	}()
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// session is one wgpu device on the chosen adapter, shared by the demo's
// drawing and the umbra index. All of it is used from one goroutine.
type session struct {
	instance *wgpu.Instance
	adapter  *wgpu.Adapter
	device   *wgpu.Device
	queue    *wgpu.Queue
	limits   wgpu.Limits // what the device was created with (Device.GetLimits can abort)
	info     diag.AdapterInfo
}

func newInstance(backend string) (inst *wgpu.Instance, err error) {
	err = guard("create wgpu instance", func() error {
		inst = wgpu.CreateInstance(&wgpu.InstanceDescriptor{Backends: ondevice.Backends(backend)})
		return nil
	})
	return inst, err
}

// openSession picks the best adapter matching o (and able to present to
// surface, when there is one) and opens a device on it with the adapter's
// own limits.
func openSession(inst *wgpu.Instance, o options, surface *wgpu.Surface) (*session, error) {
	s := &session{instance: inst}
	err := guard("choose adapter", func() error {
		list := inst.EnumerateAdapters(&wgpu.InstanceEnumerateAdapterOptons{Backends: ondevice.Backends(o.backend)})
		var found []string
		var keep []*wgpu.Adapter
		var infos []diag.AdapterInfo
		glCannotPresent := false
		for _, a := range list {
			info, err := ondevice.DescribeAdapter(a)
			if err != nil {
				continue
			}
			found = append(found, info.String())
			if surface != nil && len(surface.GetCapabilities(a).Formats) == 0 {
				glCannotPresent = glCannotPresent || info.API == "gl"
				continue
			}
			keep = append(keep, a)
			infos = append(infos, info)
		}
		// The same filter and order as the engine's Auto and probe.
		order := ondevice.Rank(infos, engine.AdapterSelect{Name: o.adapter, LowPower: o.lowPower})
		if len(order) == 0 {
			what := "no adapter"
			if o.backend != "" {
				what += " on backend " + o.backend
			}
			if o.adapter != "" {
				what += fmt.Sprintf(" with a name containing %q", o.adapter)
			}
			if surface != nil {
				what += " that can present to the window"
			}
			if len(found) == 0 {
				return fmt.Errorf("%s: no Vulkan, Metal, DX12 or GL adapter answered (install a GPU driver, or mesa-vulkan-drivers for the lavapipe software adapter; `umbra probe` says more)", what)
			}
			hint := ""
			if glCannotPresent {
				// wgpu-native v29 takes no display handle at instance
				// creation, so on Linux its GL backend starts surfaceless
				// and cannot draw to an X11 or Wayland window.
				hint = "; GL adapters cannot present to a window with this wgpu-native on Linux: use --backend vulkan for the window, or --png with --backend gl"
			}
			return fmt.Errorf("%s; found: %s%s", what, strings.Join(found, ", "), hint)
		}
		s.adapter, s.info = keep[order[0]], infos[order[0]]
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = guard("request device", func() error {
		// No RequiredLimits: binding v1.33.4 drops maxColorAttachmentBytesPerSample
		// and maxBindGroupsPlusVertexBuffers when it passes them on, so a
		// device with raised limits has 0 for both and cannot render
		// (TestRequiredLimitsBreakRendering). The device gets WebGPU's
		// defaults, whose values webGPUDefaults spells out for the index.
		s.limits = webGPUDefaults()
		dev, err := s.adapter.RequestDevice(&wgpu.DeviceDescriptor{Label: "umbra demo"})
		if err != nil {
			return err
		}
		s.device, s.queue = dev, dev.GetQueue()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// webGPUDefaults returns the WebGPU default limits that a device requested
// without RequiredLimits has: the engine's table, plus the texture size the
// scene plans with.
func webGPUDefaults() wgpu.Limits {
	l := ondevice.DefaultLimits()
	l.MaxTextureDimension2D = 8192
	return l
}

func (s *session) release() {
	_ = guard("release device", func() error {
		if s.device != nil {
			s.device.Release()
		}
		return nil
	})
}

//go:embed project.wgsl
var projectWGSL string

//go:embed bounds.wgsl
var boundsWGSL string

//go:embed draw.wgsl
var drawWGSL string

//go:embed blit.wgsl
var blitWGSL string

func (s *session) module(label, src string) (*wgpu.ShaderModule, error) {
	return s.device.TryCreateShaderModule(&wgpu.ShaderModuleDescriptor{Label: label, WGSLSource: &wgpu.ShaderSourceWGSL{Code: src}})
}

func (s *session) buffer(label string, size uint64, usage wgpu.BufferUsage) (*wgpu.Buffer, error) {
	return s.device.TryCreateBuffer(&wgpu.BufferDescriptor{Label: label, Size: (size + 3) &^ 3, Usage: usage})
}

// readBuffer copies size bytes of src into a fresh mappable buffer, waits
// and returns them.
func (s *session) readBuffer(src *wgpu.Buffer, size uint64) ([]byte, error) {
	staging, err := s.buffer("demo readback", size, wgpu.BufferUsageMapRead|wgpu.BufferUsageCopyDst)
	if err != nil {
		return nil, err
	}
	defer staging.Release()
	enc, err := s.device.TryCreateCommandEncoder(nil)
	if err != nil {
		return nil, err
	}
	defer enc.Release()
	if err := enc.TryCopyBufferToBuffer(src, 0, staging, 0, size); err != nil {
		return nil, err
	}
	if err := s.submit(enc); err != nil {
		return nil, err
	}
	return s.mapRead(staging, size)
}

// mapRead maps a MapRead buffer, copies size bytes out and unmaps it.
func (s *session) mapRead(b *wgpu.Buffer, size uint64) ([]byte, error) {
	status := wgpu.MapAsyncStatus(0)
	if err := b.TryMapAsync(wgpu.MapModeRead, 0, size, func(st wgpu.MapAsyncStatus) { status = st }); err != nil {
		return nil, err
	}
	s.device.Poll(true, nil)
	if status != wgpu.MapAsyncStatusSuccess {
		return nil, fmt.Errorf("mapping a readback buffer failed: %v", status)
	}
	out := slices.Clone(b.GetMappedRange(0, uint(size)))
	return out, b.TryUnmap()
}

func (s *session) submit(enc *wgpu.CommandEncoder) error {
	cmd, err := enc.TryFinish(nil)
	if err != nil {
		return err
	}
	s.queue.Submit(cmd)
	cmd.Release()
	return nil
}

// grid spreads groups workgroups over x and y within the per-dimension cap.
func grid(groups int, maxPerDim uint32) (uint32, uint32) {
	m := int(maxPerDim)
	if m == 0 {
		m = 65535
	}
	gx := min(groups, m)
	gx = max(gx, 1)
	return uint32(gx), uint32((groups + gx - 1) / gx)
}

func putF32(b []byte, off int, v float32) {
	binary.LittleEndian.PutUint32(b[off:], math.Float32bits(v))
}
func putU32(b []byte, off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
