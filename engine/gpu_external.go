//go:build cgo && !nogpu

package engine

import (
	"fmt"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/shaders"
)

// NewOnDevice creates an index whose GPU side lives on a device the caller
// already owns, for example one that also draws to a window, so search
// results never leave the device they are drawn on. cfg.Device and
// cfg.Adapter are ignored. The device is self-tested like a probed one. The
// limits are the RequiredLimits the device was created with (nil: WebGPU's
// defaults). The caller keeps ownership of adapter and device and must not release them
// before the index is closed, nor use the device from another goroutine
// while the index is in use (wgpu error scopes are per device).
//
// This function exists only in builds with the wgpu backend (cgo, no nogpu
// tag).
func NewOnDevice(cfg Config, adapter *wgpu.Adapter, device *wgpu.Device, limits *wgpu.Limits) (ix *Index, err error) {
	defer func() {
		if r := recover(); r != nil {
			ix, err = nil, fmt.Errorf("%w: %v", ErrGPU, r)
		}
	}()
	cfg.Device = GPU
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if adapter == nil || device == nil {
		return nil, fmt.Errorf("%w: NewOnDevice needs a non-nil adapter and device", ErrInvalidConfig)
	}
	d := &gpuDevice{adapter: adapter, device: device}
	err = gpuCall("adopt device", func() error {
		d.info = describeAdapter(adapter)
		// The device's limits are not read back (Device.GetLimits can
		// abort the process in this binding): the caller says which it
		// requested, or only WebGPU's defaults are assumed.
		if limits != nil {
			d.lim = limitsOf(*limits)
		} else {
			d.lim = webgpuDefaultLimits
		}
		d.queue = device.GetQueue()
		d.subgroups = device.HasFeature(nativeFeatureSubgroup)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := d.verify(); err != nil {
		return nil, err
	}
	metric := uint32(shaders.MetricDot)
	if cfg.Metric == L2 {
		metric = shaders.MetricL2
	}
	g, err := newGPUIndex(d, host.StrideFor(cfg.Dim), metric, cfg.MaxChunkRows)
	if err != nil {
		return nil, err
	}
	return &Index{cfg: cfg, slab: host.NewSlab(cfg.Dim), gpu: g}, nil
}

// webgpuDefaultLimits are the limits the WebGPU specification guarantees on
// every device created without RequiredLimits. (The binding's
// DefaultLimits returns "undefined" markers, not these values.)
var webgpuDefaultLimits = DeviceLimits{
	MaxStorageBindingBytes: 128 << 20,
	MaxBufferBytes:         256 << 20,
	MaxWorkgroupsPerDim:    65535,
	MaxInvocations:         256,
	MaxWorkgroupBytes:      16384,
}

// GPUSupport reports whether this binary contains the wgpu backend.
func GPUSupport() bool { return gpuBuilt }

// DescribeAdapter returns what umbra reports about a wgpu adapter (name,
// vendor, API, type, driver), for callers that choose their own adapter
// before NewOnDevice.
func DescribeAdapter(a *wgpu.Adapter) (info AdapterInfo, err error) {
	err = gpuCall("describe adapter", func() error { info = describeAdapter(a); return nil })
	return info, err
}

// InstanceBackends returns the wgpu instance backend flags for a backend
// name as AdapterSelect.Backend takes it ("" for all). The binding names
// only the all-backends value.
func InstanceBackends(name string) wgpu.InstanceBackend { return backendMask(name) }
