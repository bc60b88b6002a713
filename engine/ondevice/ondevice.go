//go:build cgo && !nogpu

package ondevice

import (
	"context"
	"fmt"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/engine/internal/link"
	"github.com/umbravec/umbra/internal/gpu"
)

// lent is what engine lends this package (engine/internal/link): borrowed
// while the package is initialised, so a mismatch of the two sides' types
// stops any program that imports it at start-up.
var lent = link.Borrow[*engine.Index, engine.Config, engine.AdapterSelect]()

// New creates an index whose GPU side lives on device, a device the caller
// already owns, so searches run where the caller draws. cfg.Device and
// cfg.Adapter are ignored. The device is self-tested like a probed one
// before the index is returned. limits are the RequiredLimits the device
// was created with (nil: WebGPU's defaults). The caller keeps ownership of
// adapter and device and must not release them before the index is
// closed, nor use the device from another goroutine while the index is in
// use (wgpu error scopes are per device).
func New(ctx context.Context, cfg engine.Config, adapter *wgpu.Adapter, device *wgpu.Device, limits *wgpu.Limits) (*engine.Index, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d, err := gpu.Adopt(adapter, device, limits)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrGPU, err)
	}
	return lent.NewOnDevice(ctx, cfg, d)
}

// DescribeAdapter returns what umbra reports about a wgpu adapter (name,
// vendor, API, type, driver), for callers that choose their own adapter
// before New.
func DescribeAdapter(a *wgpu.Adapter) (diag.AdapterInfo, error) {
	info, err := gpu.DescribeAdapter(a)
	if err != nil {
		return diag.AdapterInfo{}, fmt.Errorf("%w: %w", engine.ErrGPU, err)
	}
	return info, nil
}

// Backends returns the wgpu instance backend flags for a backend name as
// engine.AdapterSelect.Backend takes it ("vulkan", "metal", "dx12", "gl";
// "" for all). The binding names only the all-backends value.
func Backends(name string) wgpu.InstanceBackend { return gpu.BackendMask(name) }

// Rank returns the indices of the adapters in infos that pass sel's name
// and backend filters, best first for sel.Power: the order in which the
// engine's Device Auto and Probe try them.
func Rank(infos []diag.AdapterInfo, sel engine.AdapterSelect) []int {
	return lent.RankAdapters(infos, sel)
}

// DefaultLimits are the limits WebGPU guarantees on a device requested
// without RequiredLimits: what New assumes when given nil limits.
func DefaultLimits() wgpu.Limits { return gpu.WebGPUDefaults() }
