//go:build js && wasm

package engine

import (
	"context"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/webgpu"
)

// In a browser (GOOS=js GOARCH=wasm) the device is the page's WebGPU
// (internal/webgpu) instead of wgpu: openGPU asks openBrowser.
const browserBuilt = true

// openBrowser opens an index's device side on the browser's WebGPU
// adapter, probed (and its variant self-tested) once per page. A software
// adapter (SwiftShader) is used only where allowSoftware (Device GPU).
func openBrowser(ctx context.Context, cfg Config, maxChunkRows int, allowSoftware bool) (device, string, umbra.Hint, error) {
	d, rep := webgpu.Probe(ctx)
	if d == nil {
		reason := "WebGPU: " + rep.Error
		h := hintFor(umbra.HintProbeFailed, cfg.adapter())
		if !webgpu.Supported() {
			h = hintFor(umbra.HintNoAdapter, cfg.adapter())
		}
		return nil, reason, h, &AdapterError{Reason: reason, Hint: h, kind: ErrNoAdapter}
	}
	if d.Info().Software() && !allowSoftware {
		reason := "only a software WebGPU adapter: " + d.Info().String()
		h := hintFor(umbra.HintSoftwareOnly, cfg.adapter())
		return nil, reason, h, &AdapterError{Reason: reason, Hint: h, kind: ErrNoAdapter}
	}
	g, err := newDeviceIndex(d, cfg, maxChunkRows)
	if err != nil {
		err = gpuError(err)
		return nil, err.Error(), hintFor(umbra.HintProbeFailed, cfg.adapter()), err
	}
	// The browser's device runs internal/gpu's driver over WebGPU: its
	// index is the one a wgpu device gives.
	return local{g}, "", umbra.Hint{}, nil
}
