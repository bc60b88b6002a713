//go:build cgo && !nogpu

package gpu

import (
	"fmt"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/internal/core"
)

// Adopt wraps a device the caller created and owns, self-tested like a
// probed one. limits are the RequiredLimits the device was created with
// (nil: WebGPU's defaults). The caller must not release adapter or device
// while an index uses them.
func Adopt(adapter *wgpu.Adapter, device *wgpu.Device, limits *wgpu.Limits) (*Device, error) {
	if adapter == nil || device == nil {
		return nil, fmt.Errorf("%w: a device of the caller's needs a non-nil adapter and device", ErrFailed)
	}
	d := &Device{adapter: adapter, device: device, owned: true}
	err := gpuCall("adopt device", func() error {
		d.info = describeAdapter(adapter)
		// The device's limits are not read back (Device.GetLimits can
		// abort the process in this binding): the caller says which it
		// requested, or only WebGPU's defaults are assumed.
		if limits != nil {
			d.lim = limitsOf(*limits)
		} else {
			d.lim = limitsOf(WebGPUDefaults())
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
	return d, nil
}

// DescribeAdapter returns what umbra reports about a wgpu adapter.
func DescribeAdapter(a *wgpu.Adapter) (info core.AdapterInfo, err error) {
	err = gpuCall("describe adapter", func() error { info = describeAdapter(a); return nil })
	return info, err
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
