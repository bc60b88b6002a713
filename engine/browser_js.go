//go:build js && wasm

package engine

import (
	"context"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
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
	var g *webgpu.Index
	var err error
	if cfg.Precision == umbra.F32 {
		g, err = d.NewIndex(packed.StrideFor(cfg.Dim), cfg.Metric, maxChunkRows)
	} else {
		g, err = d.NewCompressedIndex(codeWords(cfg.Precision, cfg.Dim), cfg.Precision, cfg.Metric, maxChunkRows)
	}
	if err != nil {
		err = gpuError(err)
		return nil, err.Error(), hintFor(umbra.HintProbeFailed, cfg.adapter()), err
	}
	return browser{g}, "", umbra.Hint{}, nil
}

// browser is the WebGPU backend's index as the engine's device.
type browser struct{ *webgpu.Index }

func (b browser) Stage(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) (func(), error) {
	staged, err := b.Index.Stage(ctx, s, from, st, progress)
	if err != nil {
		return nil, err
	}
	return func() { b.Index.Publish(staged) }, nil
}

func (b browser) Sibling() (device, error) {
	g, err := b.Index.Sibling()
	if err != nil {
		return nil, err
	}
	return browser{g}, nil
}

func (b browser) Renew(ctx context.Context, timeout time.Duration) (device, error) {
	g, err := b.Index.Renew(ctx, timeout)
	if err != nil {
		return nil, err
	}
	return browser{g}, nil
}
