//go:build cgo && !nogpu

package engine

import (
	"context"
	"fmt"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/engine/internal/link"
	"github.com/umbravec/umbra/internal/packed"
)

func init() {
	link.NewOnDevice = newOnDevice
	link.DescribeAdapter = func(a *wgpu.Adapter) (info AdapterInfo, err error) {
		err = gpuCall("describe adapter", func() error { info = describeAdapter(a); return nil })
		return info, err
	}
	link.InstanceBackends = backendMask
	link.RankAdapters = rankAdapters
}

// newOnDevice is ondevice.New: an index whose GPU side lives on a device
// the caller owns (see its documentation).
func newOnDevice(ctx context.Context, cfg Config, adapter *wgpu.Adapter, device *wgpu.Device, limits *wgpu.Limits) (ix *Index, err error) {
	defer func() {
		if r := recover(); r != nil {
			ix, err = nil, fmt.Errorf("%w: %v", ErrGPU, r)
		}
	}()
	cfg.Device = GPU
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("umbra: creating the index: %w", err)
	}
	if adapter == nil || device == nil {
		return nil, fmt.Errorf("%w: NewOnDevice ondevice.New needs a non-nil adapter and device", ErrInvalidConfig)
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
	g, err := newGPUIndex(d, packed.StrideFor(cfg.Dim), cfg.Metric.shaderCode(), 0)
	if err != nil {
		return nil, err
	}
	return &Index{cfg: cfg, slab: packed.NewSlab(cfg.Dim), gpu: g}, nil
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
