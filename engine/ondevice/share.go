//go:build cgo && !nogpu

package ondevice

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/oliverbestmann/webgpu/wgpu"
	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/engine/internal/devices"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/packed"
)

// ErrNotOnDevice: the index made by New no longer runs on the caller's
// device (a GPU failure moved it to the CPU), or is nil.
var ErrNotOnDevice = errors.New("index not on the caller's device")

// Chunk is one device buffer of an index's rows: rows [First, First+Rows)
// of the index (see RowIDs for their IDs), Stride float32 values each, row
// First at offset 0, in Buffer. The values are the rows as
// the index stores them: unit vectors under Cosine, zero padded from Dim to
// Stride (a multiple of 4, so a row is Stride/4 vec4<f32> in WGSL). The
// buffer has Storage, CopySrc and CopyDst usage and may be longer than its
// rows.
type Chunk struct {
	Buffer *wgpu.Buffer
	First  int
	Rows   int
	Stride int
}

// Scores is every resident row's score for one query in a device buffer
// (Buffer): row r at byte 4r as a float32, the score
// Search reports for the row's ID (see RowIDs). The buffer has Storage,
// Vertex and CopySrc usage and at least 4·Rows bytes; Buffer is nil when
// Rows is 0.
type Scores struct {
	Buffer *wgpu.Buffer
	Rows   int
}

// withDevice runs f on the index's device side with its rows held still,
// or says why the caller cannot use it.
func withDevice(ix *Index, f devices.VisitFunc) error {
	if ix == nil || ix.visit == nil {
		return fmt.Errorf("%w: the index is nil", ErrNotOnDevice)
	}
	err := ix.visit(f)
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, umbra.ErrClosed), errors.Is(err, engine.ErrGPU), errors.Is(err, umbra.ErrTooLarge):
		return err
	case errors.Is(err, devices.ErrNoDevice):
		return fmt.Errorf("%w: the index runs on the CPU", ErrNotOnDevice)
	case errors.Is(err, gpu.ErrReleased):
		return umbra.ErrClosed
	case errors.Is(err, gpu.ErrNotOwned):
		return fmt.Errorf("%w: %w", ErrNotOnDevice, err)
	case errors.Is(err, gpu.ErrTooLarge):
		return fmt.Errorf("%w: %w", umbra.ErrTooLarge, err)
	}
	return fmt.Errorf("%w: %w", engine.ErrGPU, err)
}

// Resident returns the device buffers that hold ix's rows, in row order,
// so the device's owner can read them in its own passes (bind them, copy
// from them) instead of keeping a second copy. They belong to the index:
// never write or release them. They stay valid until the next write to ix
// (Add and Upsert may move rows to a larger buffer or change them; a
// Delete may compact, which moves every row) or Close. A large index has
// several chunks; an empty one has none. The caller must not use the
// device from another goroutine while it calls into the index (wgpu error
// scopes are per device).
func (ix *Index) Resident() ([]Chunk, error) {
	var out []Chunk
	err := withDevice(ix, func(g *gpu.Index, _ []uint64, _ func(int) bool) error {
		chunks, err := g.Resident()
		for _, c := range chunks {
			out = append(out, Chunk(c))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RowIDs returns the ID of every resident row, row r at index r, and
// whether it is live: a deleted row keeps its place (and a score) until a
// compaction renumbers the rows. An index filled only by Add with assigned
// IDs and never deleted from has ID r in row r.
func (ix *Index) RowIDs() (ids []uint64, live []bool, err error) {
	err = withDevice(ix, func(_ *gpu.Index, all []uint64, dead func(int) bool) error {
		ids = append([]uint64(nil), all...)
		live = make([]bool, len(all))
		for r := range live {
			live[r] = !dead(r)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return ids, live, nil
}

// ScoreInto scores every resident row of ix against query with the
// index's own scoring pass — query normalised under Cosine, as Search does
// — and leaves the scores on the device, for example as a vertex buffer
// for a draw. Nothing is read back and nothing waits: the work is
// submitted to the device's queue, so whatever the caller submits
// afterwards sees the scores. The buffer and its contents stay valid
// until the next ScoreInto on ix, a compaction (Compact, or a Delete that
// starts one) or Close; searches and other writes do not touch them. The
// query is checked as Search checks it (ErrDimMismatch, ErrNonFinite,
// ErrZeroVector). The caller must not use the device from another
// goroutine meanwhile.
func (ix *Index) ScoreInto(ctx context.Context, query []float32) (Scores, error) {
	if ix == nil {
		return Scores{}, fmt.Errorf("%w: the index is nil", ErrNotOnDevice)
	}
	dim := ix.Dim()
	if len(query) != dim {
		return Scores{}, fmt.Errorf("%w: query has %d components, index dimension is %d", umbra.ErrDimMismatch, len(query), dim)
	}
	zero := true
	for j, x := range query {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return Scores{}, fmt.Errorf("%w: query, component %d is %v", umbra.ErrNonFinite, j, x)
		}
		zero = zero && x == 0
	}
	var q []float32
	if ix.Metric() == umbra.Cosine {
		if zero {
			return Scores{}, fmt.Errorf("%w: query has norm 0, which has no direction", umbra.ErrZeroVector)
		}
		q = packed.Normalized(query, packed.StrideFor(dim))
	} else {
		q = packed.Padded(query, packed.StrideFor(dim))
	}
	var out Scores
	err := withDevice(ix, func(g *gpu.Index, _ []uint64, _ func(int) bool) error {
		s, err := g.ScoreInto(ctx, q)
		out = Scores(s)
		return err
	})
	if err != nil {
		return Scores{}, err
	}
	return out, nil
}
