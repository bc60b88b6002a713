package gpu

import (
	"context"
	"errors"
	"fmt"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/shaders"
)

// This file lets the owner of an adopted device (Adopt) use what an index
// keeps there: the resident rows, and every row's score for one query left
// in a device buffer, computed by the engine's own scores.wgsl. A program
// that draws the index (cmd/demo) then needs no second copy of the rows and
// no second scoring shader.

// ErrReleased: the index was released; its device buffers are gone.
var ErrReleased = errors.New("index released")

// ErrNotOwned: the index lives on a device umbra opened itself, whose
// buffers no caller can use.
var ErrNotOwned = errors.New("device not the caller's")

// residentChunk is one device buffer of an index's resident rows: rows
// [First, First+Rows) of the index, Stride float32 values each, row First
// at offset 0 (the API's buffer; ResidentChunk is wgpu's).
type residentChunk struct {
	Buffer      gpuplan.Buffer
	First, Rows int
	Stride      int
}

// sharedScores is what ScoreInto keeps between calls: its own query and
// scores buffers, so searches neither see nor disturb them.
type sharedScores struct {
	released bool
	query    growBuffer
	scores   growBuffer
}

// usable says why the caller may not use the index's buffers, if it may
// not. The caller holds the device mutex.
func (g *Index) usable() error {
	if g.shared.released {
		return ErrReleased
	}
	if !g.dev.owned {
		return fmt.Errorf("%w: the index was not built on an adopted device, so its buffers belong to umbra's own", ErrNotOwned)
	}
	return nil
}

// residentChunks lists the buffers that hold the index's rows, in row
// order (Resident).
func (g *Index) residentChunks() ([]residentChunk, error) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if err := g.usable(); err != nil {
		return nil, err
	}
	var out []residentChunk
	for c, ch := range g.chunks {
		if ch.rows > 0 {
			out = append(out, residentChunk{Buffer: ch.data, First: c * g.plan.RowsPerChunk, Rows: ch.rows, Stride: g.plan.Stride})
		}
	}
	return out, nil
}

// scoreInto is ScoreInto's work: the scores buffer and its rows.
func (g *Index) scoreInto(ctx context.Context, q []float32) (gpuplan.Buffer, int, error) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if err := g.usable(); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if g.lost != nil {
		return nil, 0, g.lost
	}
	if len(q) != g.plan.Stride {
		return nil, 0, fmt.Errorf("query has %d values, the index's rows have stride %d", len(q), g.plan.Stride)
	}
	rows := 0
	for _, ch := range g.resident() {
		rows += ch.rows
	}
	if rows == 0 {
		return nil, 0, nil
	}
	sh := &g.shared
	if sh.scores.label == "" {
		sh.query = growBuffer{label: "umbra shared query", usage: gpuplan.Storage | gpuplan.CopyDst, limit: g.bind}
		sh.scores = growBuffer{label: "umbra shared scores",
			usage: gpuplan.Storage | gpuplan.Vertex | gpuplan.CopySrc, limit: g.bind}
	}
	err := g.dev.scoped("score into", func() error {
		for _, b := range []struct {
			b    *growBuffer
			size uint64
		}{{&sh.query, g.rowBytes()}, {&sh.scores, uint64(rows) * 4}} {
			if err := g.step("create " + b.b.label); err != nil {
				return err
			}
			if _, err := b.b.ensure(g, b.size); err != nil {
				return err
			}
		}
		if err := g.step("write queries"); err != nil {
			return err
		}
		if err := g.api().Write(sh.query.buf, 0, bytesOf(q)); err != nil {
			return err
		}
		// The chunks' params are the search's too; each search writes
		// its own before it dispatches, and queue writes land in order.
		for c, ch := range g.chunks {
			if ch.rows == 0 {
				continue
			}
			x, _ := g.grid(ch.rows, g.single)
			params := shaders.Params{Rows: uint32(ch.rows), GroupsX: x, Base: uint32(c * g.plan.RowsPerChunk),
				Total: uint32(rows), Queries: 1}.Encode()
			if err := g.step("write params"); err != nil {
				return err
			}
			if err := g.api().Write(ch.params, 0, params); err != nil {
				return err
			}
		}
		if err := g.step("encode"); err != nil {
			return err
		}
		ps := &pass{c: &core.Stages{}}
		g.encodeScores(ps, g.single, 1, sh.query.buf, sh.scores.buf)
		if err := g.step("submit"); err != nil {
			return err
		}
		return g.dev.submit(nil, gpuplan.Work{Pass: ps.list})
	})
	if err != nil {
		g.dropShared()
		g.resetScratch()
		return nil, 0, err
	}
	return sh.scores.buf, rows, nil
}

// dropShared frees ScoreInto's buffers and bind groups; the next call
// makes them again. The caller holds the device mutex.
func (g *Index) dropShared() {
	g.shared.query.drop(g)
	g.shared.scores.drop(g)
}

// releaseShared is Release's part for this file: the buffers go, and later
// calls say the index was released. The caller holds the device mutex.
func (g *Index) releaseShared() {
	g.dropShared()
	g.shared.released = true
}
