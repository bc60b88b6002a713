package engine

import (
	"context"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/probe"
)

// plain is the selection in internal/probe's terms.
func (s AdapterSelect) plain() probe.Select {
	return probe.Select{LowPower: s.LowPower, Name: s.Name, Backend: s.Backend}
}

func (s AdapterSelect) describe() string { return s.plain().Describe() }

// Probe probes every adapter matching sel (each at most once per process)
// and says which one Device Auto would use, and otherwise why not and what
// to do. It never panics; with no GPU stack at all, or in a build without
// the wgpu backend, it returns an empty Adapters list and a reason with a
// hint. What the probe measured on each adapter (its limits, features and
// every kernel variant's self-test) is `umbra probe --json`'s.
func Probe(ctx context.Context, sel AdapterSelect) diag.ProbeReport {
	if err := sel.validate(); err != nil && gpu.Built {
		return diag.ProbeReport{Auto: -1, Reason: err.Error(), Hint: hintFor(umbra.HintNoMatch, sel)}
	}
	return probe.Run(ctx, sel.plain(), defaultProbeTimeout).Public()
}

// GPUSupport reports whether this binary contains the wgpu backend (built
// with cgo and not with the nogpu tag). Without it every index runs on the
// CPU and Device GPU fails with ErrNoGPUSupport.
func GPUSupport() bool { return gpu.Built }
