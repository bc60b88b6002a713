//go:build cgo && !nogpu

package gpu

import (
	"context"
	"errors"
	"fmt"

	"github.com/oliverbestmann/webgpu/wgpu"

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

// ResidentChunk is one device buffer of an index's resident rows: rows
// [First, First+Rows) of the index, Stride float32 values each (the
// dimension zero padded to a multiple of 4), row First at offset 0. The
// buffer has Storage, CopySrc and CopyDst usage and may be longer than the
// rows it holds. It belongs to the index: the caller may bind and read it,
// never write or release it. engine/ondevice's Chunk is this type.
type ResidentChunk struct {
	Buffer *wgpu.Buffer
	First  int
	Rows   int
	Stride int
}

// Scores is one float32 per resident row in a device buffer, row r at byte
// 4r. The buffer has Storage, Vertex and CopySrc usage, holds at least
// 4·Rows bytes, and belongs to the index. Buffer is nil when Rows is 0.
// engine/ondevice's Scores is this type.
type Scores struct {
	Buffer *wgpu.Buffer
	Rows   int
}

// sharedScores is what ScoreInto keeps between calls: its own query and
// scores buffers, so searches neither see nor disturb them, and a bind
// group per chunk naming them.
type sharedScores struct {
	released bool
	query    growBuffer
	scores   growBuffer
	binds    []sharedBind
}

// sharedBind is the scores bind group of one chunk and the buffers it was
// made for: a chunk that grew, or a scores buffer that was replaced, needs a
// new one.
type sharedBind struct {
	data, scores *wgpu.Buffer
	bind         *wgpu.BindGroup
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

// Resident lists the buffers that hold the index's rows, in row order. They
// stay valid until the next Upload (which may move a chunk to a larger
// buffer) or Release. The device must not be used from another goroutine
// while the index is in use.
func (g *Index) Resident() ([]ResidentChunk, error) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if err := g.usable(); err != nil {
		return nil, err
	}
	var out []ResidentChunk
	for c, ch := range g.chunks {
		if ch.rows > 0 {
			out = append(out, ResidentChunk{Buffer: ch.data, First: c * g.plan.RowsPerChunk, Rows: ch.rows, Stride: g.plan.Stride})
		}
	}
	return out, nil
}

// ScoreInto scores every resident row against q (Stride values, prepared as
// a search query is: normalised for cosine, zero padded) with the pass a
// search runs, and leaves the scores on the device: nothing is read back
// and the work is submitted without waiting, so a draw the caller submits
// next sees them. The buffer and its contents stay valid until the next
// ScoreInto or Release; searches and uploads do not touch it. Any failure
// drops the index's scratch state, as a failed search does.
func (g *Index) ScoreInto(ctx context.Context, q []float32) (Scores, error) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if err := g.usable(); err != nil {
		return Scores{}, err
	}
	if err := ctx.Err(); err != nil {
		return Scores{}, err
	}
	if len(q) != g.plan.Stride {
		return Scores{}, fmt.Errorf("query has %d values, the index's rows have stride %d", len(q), g.plan.Stride)
	}
	rows := 0
	for _, ch := range g.resident() {
		rows += ch.rows
	}
	if rows == 0 {
		return Scores{}, nil
	}
	sh := &g.shared
	if sh.scores.label == "" {
		sh.query = growBuffer{label: "umbra shared query", usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopyDst, limit: g.bind}
		sh.scores = growBuffer{label: "umbra shared scores",
			usage: wgpu.BufferUsageStorage | wgpu.BufferUsageVertex | wgpu.BufferUsageCopySrc, limit: g.bind}
	}
	dev := g.device()
	err := scoped(dev, "score into", func() error {
		for _, b := range []struct {
			b    *growBuffer
			size uint64
		}{{&sh.query, g.rowBytes()}, {&sh.scores, uint64(rows) * 4}} {
			if err := g.step("create " + b.b.label); err != nil {
				return err
			}
			if _, err := b.b.ensure(dev, b.size); err != nil {
				return err
			}
		}
		for len(sh.binds) < len(g.chunks) {
			sh.binds = append(sh.binds, sharedBind{})
		}
		for c, ch := range g.chunks {
			sb := &sh.binds[c]
			if ch.rows == 0 || sb.bind != nil && sb.data == ch.data && sb.scores == sh.scores.buf {
				continue
			}
			if err := g.step("bind shared scores"); err != nil {
				return err
			}
			bg, err := g.scoresBindGroup(fmt.Sprintf("umbra shared scores %d", c), ch, sh.query.buf, sh.scores.buf)
			if err != nil {
				return err
			}
			sb.bind.Release()
			*sb = sharedBind{data: ch.data, scores: sh.scores.buf, bind: bg}
		}
		if err := g.step("write queries"); err != nil {
			return err
		}
		if err := g.queue().TryWriteBuffer(sh.query.buf, 0, wgpu.ToBytes(q)); err != nil {
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
			if err := g.queue().TryWriteBuffer(ch.params, 0, params); err != nil {
				return err
			}
		}
		if err := g.step("encode"); err != nil {
			return err
		}
		enc, err := dev.TryCreateCommandEncoder(nil)
		if err != nil {
			return err
		}
		defer enc.Release()
		pass := enc.BeginComputePass(nil)
		pass.SetPipeline(g.dev.pipelines.scores[g.single])
		for c, ch := range g.chunks {
			if ch.rows == 0 {
				continue
			}
			x, y := g.grid(ch.rows, g.single)
			pass.SetBindGroup(0, sh.binds[c].bind, nil)
			pass.DispatchWorkgroups(x, y, 1)
		}
		err = pass.TryEnd()
		pass.Release()
		if err != nil {
			return err
		}
		if err := g.step("submit"); err != nil {
			return err
		}
		return g.dev.submit(enc, false)
	})
	if err != nil {
		g.dropShared()
		g.resetScratch()
		return Scores{}, err
	}
	return Scores{Buffer: sh.scores.buf, Rows: rows}, nil
}

// dropShared frees ScoreInto's buffers and bind groups; the next call
// makes them again. The caller holds the device mutex.
func (g *Index) dropShared() {
	sh := &g.shared
	_ = gpuCall("drop shared scores", func() error {
		for i := range sh.binds {
			sh.binds[i].bind.Release()
		}
		sh.binds = nil
		for _, b := range []*growBuffer{&sh.query, &sh.scores} {
			b.buf.Release()
			b.buf, b.size = nil, 0
		}
		return nil
	})
}

// releaseShared is Release's part for this file: the buffers go, and later
// calls say the index was released. The caller holds the device mutex.
func (g *Index) releaseShared() {
	g.dropShared()
	g.shared.released = true
}
