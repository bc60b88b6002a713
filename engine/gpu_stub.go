//go:build !cgo || nogpu

package engine

import (
	"context"
)

const gpuBuilt = false

// openGPU in a build without the wgpu backend always fails: Auto falls back
// to the CPU and Device GPU returns ErrNoGPUSupport.
func openGPU(ctx context.Context, cfg Config, opt options, allowSoftware bool) (gpuIndex, string, string, error) {
	const reason = "built without GPU support (no cgo, or the nogpu tag)"
	return nil, reason, hintNoCgo, &AdapterError{Reason: reason, Hint: hintNoCgo, kind: ErrNoGPUSupport}
}

// probe in a build without the wgpu backend reports no adapters.
func probe(ctx context.Context, sel AdapterSelect) ProbeReport {
	return ProbeReport{Auto: -1, Reason: "built without GPU support (no cgo, or the nogpu tag)", Hint: hintNoCgo}
}
