package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine/internal/devices"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/probe"
)

// This file is the engine's policy over the wgpu backend (internal/gpu):
// which adapters to try and in what order, when to fall back and with what
// reason, and how the backend's neutral types and errors become the
// engine's. It has no build tags: in a build without the backend, gpu's
// entry points report gpu.ErrNotBuilt.

// gpuError turns a backend error into the engine's: ErrTooLarge for a
// device limit, ErrGPU for any other device failure; context errors pass
// through.
func gpuError(err error) error {
	switch {
	case err == nil, errors.Is(err, ErrGPU), errors.Is(err, umbra.ErrTooLarge),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, gpu.ErrTooLarge):
		return fmt.Errorf("%w: %w", umbra.ErrTooLarge, err)
	}
	return fmt.Errorf("%w: %w", ErrGPU, err)
}

// openDevice opens an index's device side for cfg: in this process, or
// under Isolate in a child process.
func openDevice(ctx context.Context, cfg Config, test *testHooks) (device, string, umbra.Hint, error) {
	allowSoftware := cfg.Device == GPU || test != nil && test.softwareAuto
	if len(cfg.shards()) > 0 {
		return openShards(ctx, cfg, test, allowSoftware)
	}
	if !cfg.Isolate {
		return openGPU(ctx, cfg, test.chunkRows(), allowSoftware)
	}
	if !gpu.Built {
		return nil, probe.ReasonNoCgo, probe.NoGPUSupport, &AdapterError{Reason: probe.ReasonNoCgo, Hint: probe.NoGPUSupport, kind: ErrNoGPUSupport}
	}
	c, err := startChild(ctx, childHello{Dim: cfg.Dim, Metric: int(cfg.Metric), Precision: cfg.Precision, Adapter: cfg.adapter(), AllowSoftware: allowSoftware,
		MaxChunkRows: test.chunkRows(), ProbeTimeout: cfg.ProbeTimeout, MaxDeviceBytes: cfg.Limits.MaxDeviceBytes}, childGreetingTimeout)
	if err != nil {
		var ae *AdapterError
		if errors.As(err, &ae) {
			return nil, ae.Reason, ae.Hint, err
		}
		return nil, err.Error(), hintFor(umbra.HintProbeFailed, cfg.adapter()), err
	}
	return c, "", umbra.Hint{}, nil
}

// openGPU finds the best working adapter for cfg and returns an index's
// device side on it, with at most maxChunkRows rows in a device buffer (0:
// the adapter's limit). allowSoftware admits CPU-type adapters (Device
// GPU).
func openGPU(ctx context.Context, cfg Config, maxChunkRows int, allowSoftware bool) (device, string, umbra.Hint, error) {
	if browserBuilt {
		return openBrowser(ctx, cfg, maxChunkRows, allowSoftware) // browser_js.go
	}
	if !gpu.Built {
		return nil, probe.ReasonNoCgo, probe.NoGPUSupport, &AdapterError{Reason: probe.ReasonNoCgo, Hint: probe.NoGPUSupport, kind: ErrNoGPUSupport}
	}
	timeout := cfg.ProbeTimeout
	if timeout == 0 {
		timeout = defaultProbeTimeout
	}
	as, err := probe.Candidates(cfg.adapter().plain())
	if err != nil {
		h := hintFor(umbra.HintNoAdapter, cfg.adapter())
		return nil, err.Error(), h, &AdapterError{Reason: err.Error(), Hint: h, kind: ErrNoAdapter}
	}
	var reports []probe.Adapter
	for _, a := range as {
		info := a.Info
		if info.Software() && !allowSoftware {
			reports = append(reports, probe.Adapter{Adapter: info, Works: true})
			continue
		}
		dev, r := a.Probe(ctx, timeout)
		if err := ctx.Err(); err != nil {
			return nil, "", umbra.Hint{}, fmt.Errorf("probing %s: %w", info, err)
		}
		reports = append(reports, probe.Of(a, r))
		if dev == nil {
			continue
		}
		g, err := newDeviceIndex(dev, cfg, maxChunkRows)
		if err != nil {
			err = gpuError(err)
			return nil, err.Error(), hintFor(umbra.HintProbeFailed, cfg.adapter()), err
		}
		return local{g}, "", umbra.Hint{}, nil
	}
	reason, h := probe.FallbackReason(cfg.adapter().plain(), reports, allowSoftware)
	return nil, reason, h, &AdapterError{Reason: reason, Hint: h, kind: ErrNoAdapter}
}

// newDeviceIndex returns an index's device side on d for cfg: float32
// rows, or the codes of a compressed precision (precision.go).
func newDeviceIndex(d *gpu.Device, cfg Config, maxChunkRows int) (*gpu.Index, error) {
	var g *gpu.Index
	var err error
	if cfg.Precision == umbra.F32 {
		g, err = d.NewIndex(packed.StrideFor(cfg.Dim), cfg.Metric, maxChunkRows)
	} else {
		g, err = d.NewCompressedIndex(codeWords(cfg.Precision, cfg.Dim), cfg.Precision, cfg.Metric, maxChunkRows)
	}
	if err != nil {
		return nil, err
	}
	// The device side keeps its rows within MaxDeviceBytes and its
	// scratch within its cap beside them (gpu.Index.SetBudget).
	g.SetBudget(cfg.Limits.MaxDeviceBytes)
	return g, nil
}

// newOnDevice is ondevice.New after the device was adopted: an index whose
// GPU side lives on a device the caller owns (slot.Device); slot.Visit is
// set to reach it.
func newOnDevice(ctx context.Context, cfg Config, slot *devices.Slot) (*Index, error) {
	d := slot.Device
	cfg.Device = GPU
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(cfg.shards()) > 0 {
		return nil, fmt.Errorf("%w: an index on the caller's device cannot have Shards", umbra.ErrInvalidConfig)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("creating the index: %w", err)
	}
	if cfg.Precision != umbra.F32 {
		return nil, fmt.Errorf("%w: an index on a caller's device shares float32 rows; precision %v is not one", umbra.ErrInvalidConfig, cfg.Precision)
	}
	g, err := newDeviceIndex(d, cfg, 0)
	if err != nil {
		return nil, gpuError(err)
	}
	ix := emptyIndex(cfg)
	ix.dev = local{g}
	slot.Visit = func(f devices.VisitFunc) error { return withDevice(ix, f) }
	return ix, nil
}

// withDevice runs f on ix's device side, for engine/ondevice's Resident,
// ScoreInto and RowIDs, holding ix's rows still meanwhile: searches may run,
// writers, compaction and Close wait. ids[r] is the ID of resident row r
// and dead(r) whether it was deleted (it stays resident until compaction).
func withDevice(ix *Index, f devices.VisitFunc) error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	switch {
	case ix.closed:
		return umbra.ErrClosed
	case !ix.onGPU():
		return devices.ErrNoDevice
	case ix.stale:
		return fmt.Errorf("%w: the resident rows are stale after a failed device write; the next write uploads them again", ErrGPU)
	}
	l, ok := ix.dev.(local)
	if !ok {
		return devices.ErrNoDevice // an isolated index's device is in another process
	}
	return f(l.Index, ix.rid.ids, ix.rid.isDead)
}
