//go:build cgo && !nogpu

package ondevice

import (
	"context"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/engine/internal/link"
)

// New creates an index whose GPU side lives on device, a device the caller
// already owns, so searches run where the caller draws. cfg.Device and
// cfg.Adapter are ignored. The device is self-tested like a probed one
// before the index is returned. limits are the RequiredLimits the device
// was created with (nil: WebGPU's defaults). The caller keeps ownership of
// adapter and device and must not release them before the index is
// closed, nor use the device from another goroutine while the index is in
// use (wgpu error scopes are per device).
func New(ctx context.Context, cfg engine.Config, adapter *wgpu.Adapter, device *wgpu.Device, limits *wgpu.Limits) (*engine.Index, error) {
	return link.NewOnDevice.(func(context.Context, engine.Config, *wgpu.Adapter, *wgpu.Device, *wgpu.Limits) (*engine.Index, error))(ctx, cfg, adapter, device, limits)
}

// DescribeAdapter returns what umbra reports about a wgpu adapter (name,
// vendor, API, type, driver), for callers that choose their own adapter
// before New.
func DescribeAdapter(a *wgpu.Adapter) (engine.AdapterInfo, error) {
	return link.DescribeAdapter.(func(*wgpu.Adapter) (engine.AdapterInfo, error))(a)
}

// Backends returns the wgpu instance backend flags for a backend name as
// engine.AdapterSelect.Backend takes it ("vulkan", "metal", "dx12", "gl";
// "" for all). The binding names only the all-backends value.
func Backends(name string) wgpu.InstanceBackend {
	return link.InstanceBackends.(func(string) wgpu.InstanceBackend)(name)
}

// Rank returns the indices of the adapters in infos that pass sel's name
// and backend filters, best first for sel.Power: the order in which the
// engine's Device Auto and Probe try them.
func Rank(infos []engine.AdapterInfo, sel engine.AdapterSelect) []int {
	return link.RankAdapters.(func([]engine.AdapterInfo, engine.AdapterSelect) []int)(infos, sel)
}
