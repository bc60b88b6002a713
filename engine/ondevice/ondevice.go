//go:build cgo && !nogpu

package ondevice

import (
	"context"
	"fmt"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/engine/internal/devices"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/probe"
)

// Index is an engine index whose GPU side lives on a device the caller
// owns: every engine.Index method (Add, Search, Info, Close, …), and
// Resident, RowIDs and ScoreInto, which reach what it keeps on the device.
type Index struct {
	*engine.Index
	visit func(devices.VisitFunc) error
}

// New creates an index whose GPU side lives on device, a device the caller
// already owns, so searches run where the caller draws. The device is
// self-tested (one real search dispatch) before the index is returned.
// limits are the RequiredLimits the device was created with (nil:
// WebGPU's defaults). The caller keeps ownership of adapter and device
// and must not release them before the index is closed, nor use the
// device from another goroutine while the index is in use (wgpu error
// scopes are per device).
//
// cfg is an engine.Config for this device: Device Auto or GPU (both mean
// the caller's device), float32 rows, in this process. What cannot apply
// is refused with umbra.ErrInvalidConfig naming it: Device CPU, Adapters
// (the caller chose the adapter), Isolate (the device lives in this
// process), Limits.Overflow (the device holds every row: Resident and
// ScoreInto cover them all), a Precision other than F32, and ProbeTimeout
// (no probe runs: the self-test is one dispatch).
func New(ctx context.Context, cfg engine.Config, adapter *wgpu.Adapter, device *wgpu.Device, limits *wgpu.Limits) (*Index, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var refused string
	switch {
	case cfg.Device == engine.CPU:
		refused = "Device CPU: an index on the caller's device computes there"
	case len(cfg.Adapters) > 0:
		refused = "Adapters: the caller's device is the adapter"
	case cfg.Isolate:
		refused = "Isolate: the caller's device lives in this process"
	case cfg.Limits.Overflow:
		refused = "Limits.Overflow: the caller's device holds every row (Resident and ScoreInto cover them all)"
	case cfg.ProbeTimeout != 0:
		refused = "ProbeTimeout: no adapter is probed; the caller's device is self-tested by one dispatch"
	}
	if refused != "" {
		return nil, fmt.Errorf("%w: ondevice.New: %s", umbra.ErrInvalidConfig, refused)
	}
	d, err := gpu.Adopt(adapter, device, limits)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrGPU, err)
	}
	slot := &devices.Slot{Device: d}
	ix, err := engine.New(devices.With(ctx, slot), cfg)
	if err != nil {
		return nil, err
	}
	return &Index{Index: ix, visit: slot.Visit}, nil
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
// and backend filters, best first for sel.LowPower: the order in which the
// engine's Device Auto and Probe try them.
func Rank(infos []diag.AdapterInfo, sel engine.AdapterSelect) []int {
	return probe.Rank(infos, probe.Select{LowPower: sel.LowPower, Name: sel.Name, Backend: sel.Backend})
}

// DefaultLimits are the limits WebGPU guarantees on a device requested
// without RequiredLimits: what New assumes when given nil limits.
func DefaultLimits() wgpu.Limits { return gpu.WebGPUDefaults() }
