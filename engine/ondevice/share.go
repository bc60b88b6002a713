//go:build cgo && !nogpu

package ondevice

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/engine/internal/link"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/packed"
)

// ErrNotOnDevice: Resident and ScoreInto need an index made by New; any
// other keeps its rows on the CPU, or on a device umbra opened itself
// whose buffers no caller can use.
var ErrNotOnDevice = errors.New("umbra: index not built on the caller's device (use ondevice.New)")

// Chunk is one device buffer of an index's rows: rows [First, First+Rows)
// in the order Add assigned their IDs, Stride float32 values each, row
// First at offset 0. The values are the rows as the index stores them:
// unit vectors under Cosine, zero padded from Dim to Stride (a multiple of
// 4, so a row is Stride/4 vec4<f32> in WGSL). The buffer has Storage,
// CopySrc and CopyDst usage and may be longer than its rows.
type Chunk struct {
	Buffer *wgpu.Buffer
	First  int
	Rows   int
	Stride int
}

// Scores is every row's score for one query in a device buffer: row r
// (ID r) at byte 4r as a float32, the score Search reports for it. The
// buffer has Storage, Vertex and CopySrc usage and at least 4·Rows bytes;
// Buffer is nil when Rows is 0.
type Scores struct {
	Buffer *wgpu.Buffer
	Rows   int
}

// device returns the index's device side, or why it has none the caller
// could use.
func device(ix *engine.Index) (*gpu.Index, error) {
	if ix == nil {
		return nil, fmt.Errorf("%w: the index is nil", ErrNotOnDevice)
	}
	g := link.Device.(func(*engine.Index) *gpu.Index)(ix)
	if g == nil {
		return nil, fmt.Errorf("%w: the index runs on the CPU", ErrNotOnDevice)
	}
	return g, nil
}

// shareError turns the backend's answer into the engine's errors.
func shareError(err error) error {
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, gpu.ErrReleased):
		return engine.ErrClosed
	case errors.Is(err, gpu.ErrNotOwned):
		return fmt.Errorf("%w: %w", ErrNotOnDevice, err)
	case errors.Is(err, gpu.ErrTooLarge):
		return fmt.Errorf("%w: %w", engine.ErrTooLarge, err)
	}
	return fmt.Errorf("%w: %w", engine.ErrGPU, err)
}

// Resident returns the device buffers that hold ix's rows, in row order,
// so the device's owner can read them in its own passes (bind them, copy
// from them) instead of keeping a second copy. They belong to the index:
// never write or release them. They stay valid until the next Add (which
// may move rows to a larger buffer) or Close. A large index has several
// chunks; an empty one has none. The caller must not use the device from
// another goroutine while it calls into the index (wgpu error scopes are
// per device).
func Resident(ix *engine.Index) ([]Chunk, error) {
	g, err := device(ix)
	if err != nil {
		return nil, err
	}
	rc, err := g.Resident()
	if err != nil {
		return nil, shareError(err)
	}
	out := make([]Chunk, len(rc))
	for i, c := range rc {
		out[i] = Chunk(c)
	}
	return out, nil
}

// ScoreInto scores every row of ix against query with the index's own
// scoring pass — query normalised under Cosine, as Search does — and
// leaves the scores on the device, for example as a vertex buffer for a
// draw. Nothing is read back and nothing waits: the work is submitted to
// the device's queue, so whatever the caller submits afterwards sees the
// scores. The buffer and its contents stay valid until the next ScoreInto
// on ix or Close; Search and Add do not touch them. The query is checked
// as Search checks it (ErrDimMismatch, ErrNonFinite, ErrZeroVector). The
// caller must not use the device from another goroutine meanwhile.
func ScoreInto(ctx context.Context, ix *engine.Index, query []float32) (Scores, error) {
	g, err := device(ix)
	if err != nil {
		return Scores{}, err
	}
	dim := ix.Dim()
	if len(query) != dim {
		return Scores{}, fmt.Errorf("%w: query has %d components, index dimension is %d", engine.ErrDimMismatch, len(query), dim)
	}
	zero := true
	for j, x := range query {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return Scores{}, fmt.Errorf("%w: query, component %d is %v", engine.ErrNonFinite, j, x)
		}
		zero = zero && x == 0
	}
	var q []float32
	if ix.Metric() == engine.Cosine {
		if zero {
			return Scores{}, fmt.Errorf("%w: query has norm 0, which has no direction", engine.ErrZeroVector)
		}
		q = packed.Normalized(query, packed.StrideFor(dim))
	} else {
		q = packed.Padded(query, packed.StrideFor(dim))
	}
	s, err := g.ScoreInto(ctx, q)
	if err != nil {
		return Scores{}, shareError(err)
	}
	return Scores(s), nil
}
