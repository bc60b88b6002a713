//go:build cgo && !nogpu

package gpu

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/shaders"
)

// A filtered search that admits few rows on a GPU index: the admitted
// rows' indices go up, gather.wgsl scores only those rows (each with the
// bits the scan gives it) and their scores come back, 4 bytes a row a
// query, for the host's selection. The device reads the listed rows, not
// the slab.

// gatherPipes is a device's compiled gather.wgsl, by layout, and its bind
// group layout.
type gatherPipes struct {
	bgl   *wgpu.BindGroupLayout
	pipes map[shaders.ScoresLayout]*wgpu.ComputePipeline
	// What a gather costs on the device (GatherCosts), measured once.
	once    sync.Once
	fixed   time.Duration
	perByte float64
	err     error
}

// GatherCosts is what a gather costs on this device, measured once per
// device on CalibrationSlab: a fixed cost a call (writing the list,
// submitting, reading back) and a cost a byte of listed rows, from the
// times of gathers of a sixty-fourth and of a sixteenth of its rows (the
// slope between them). With Calibrate's latency and scan rate it tells
// the engine whether a filtered search should gather or scan.
func (d *Device) GatherCosts() (fixed time.Duration, perByte float64, err error) {
	d.gather.once.Do(func() {
		d.gather.fixed, d.gather.perByte, d.gather.err = d.measureGather(CalibrationSlab())
	})
	return d.gather.fixed, d.gather.perByte, d.gather.err
}

// GatherCosts is the device's GatherCosts (see there).
func (g *Index) GatherCosts() (time.Duration, float64, error) { return g.dev.GatherCosts() }

func (d *Device) measureGather(s *packed.Slab) (time.Duration, float64, error) {
	ctx := context.Background()
	g, err := d.NewIndex(s.Stride, core.Dot, 0)
	if err != nil {
		return 0, 0, err
	}
	defer g.Release()
	if err := g.Upload(ctx, s, 0, nil, nil); err != nil {
		return 0, 0, err
	}
	q := [][]float32{s.PaddedRow(0)}
	every := func(step int) []uint32 {
		var rows []uint32
		for r := step / 2; r < s.Rows; r += step {
			rows = append(rows, uint32(r))
		}
		return rows
	}
	few, many := every(64), every(16)
	var times [2]time.Duration
	for i, rows := range [][]uint32{few, many} {
		if _, err := g.Gather(ctx, q, rows, nil); err != nil { // compiles, sizes the buffers
			return 0, 0, err
		}
		if times[i], err = MedianOf(5, func() error {
			_, err := g.Gather(ctx, q, rows, nil)
			return err
		}); err != nil {
			return 0, 0, err
		}
	}
	row := float64(g.rowBytes())
	perByte := max(0, (times[1]-times[0]).Seconds()/(float64(len(many)-len(few))*row))
	fixed := max(0, times[0]-time.Duration(perByte*float64(len(few))*row*1e9))
	return fixed, perByte, nil
}

// gatherPipeline returns gather.wgsl compiled for l, compiling it on first
// use. The caller holds d.mu.
func (d *Device) gatherPipeline(l shaders.ScoresLayout) (*wgpu.ComputePipeline, error) {
	if d.gather.bgl == nil {
		err := gpuCall("create gather bind group layout", func() error {
			bgl, err := d.device.TryCreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: "umbra gather",
				Entries: layoutEntries(shaders.GatherBindings)})
			d.gather.bgl = bgl
			return err
		})
		if err != nil {
			return nil, err
		}
		d.gather.pipes = map[shaders.ScoresLayout]*wgpu.ComputePipeline{}
	}
	if p, ok := d.gather.pipes[l]; ok {
		return p, nil
	}
	src, err := shaders.Gather(l)
	if err != nil {
		return nil, err
	}
	ps, err := d.compile("gather.wgsl", src, d.gather.bgl, shaders.ScoresEntry)
	if err != nil {
		return nil, err
	}
	d.gather.pipes[l] = ps[0]
	return ps[0], nil
}

// gatherScratch is an index's buffers for gathers: the queries, the
// listed rows and their scores, and each chunk's bind group naming them.
type gatherScratch struct {
	query, list, scores growBuffer
	binds               map[*gpuChunk]gatherBind
}

// gatherBind is a chunk's gather bind group and the chunk's buffers it
// names: a chunk that grew has new ones, and its old group is not used.
type gatherBind struct {
	bg           *wgpu.BindGroup
	data, params *wgpu.Buffer
}

func (g *Index) gatherState() *gatherScratch {
	if g.gth == nil {
		storage := wgpu.BufferUsageStorage | wgpu.BufferUsageCopyDst
		g.gth = &gatherScratch{
			query:  growBuffer{label: "umbra gather queries", usage: storage, limit: g.bind},
			list:   growBuffer{label: "umbra gather rows", usage: storage, limit: g.bind},
			scores: growBuffer{label: "umbra gather scores", usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopySrc, limit: g.bind},
			binds:  map[*gpuChunk]gatherBind{},
		}
	}
	return g.gth
}

// release frees the gather buffers and bind groups. The caller holds the
// device mutex.
func (s *gatherScratch) release() {
	if s == nil {
		return
	}
	for _, b := range s.binds {
		b.bg.Release()
	}
	clear(s.binds)
	for _, b := range []*growBuffer{&s.query, &s.list, &s.scores} {
		b.buf.Release()
		b.buf, b.size = nil, 0
	}
}

// Gather returns the scores of the listed rows (strictly increasing,
// each below the rows resident) for every query: query j's score of
// rows[i] at j*len(rows)+i, each the bits a scan of the whole index gives
// that row. st (may be nil) records what it issued and where the time
// went. It refuses with ErrSubnormal, as Search does, a query whose scores
// a device that flushes subnormals could change.
func (g *Index) Gather(ctx context.Context, qs [][]float32, rows []uint32, st *core.Stages) ([]float32, error) {
	if g.prec != core.F32 {
		return nil, fmt.Errorf("%w: an index of compressed rows is searched through Sums", ErrFailed)
	}
	n := len(rows)
	if n == 0 || len(qs) == 0 {
		return []float32{}, nil
	}
	resident := 0
	for c, ch := range g.chunks {
		if ch.rows > 0 {
			resident = c*g.plan.RowsPerChunk + ch.rows
		}
	}
	for i, r := range rows {
		if int(r) >= resident || i > 0 && r <= rows[i-1] {
			return nil, fmt.Errorf("%w: listed row %d (entry %d) is not a resident row in order", ErrFailed, r, i)
		}
	}
	// Each submission holds as many queries as its scores buffer and the
	// readback allow, and as a grid's z dimension takes.
	perQuery := uint64(n) * 4
	per := int(max(min(g.bind/perQuery, g.staging.limit/perQuery, g.maxGroups()), 1))
	if perQuery > g.bind || perQuery > g.staging.limit {
		return nil, fmt.Errorf("%w: the scores of %d listed rows need %d bytes, the device binds %d", ErrTooLarge, n, perQuery, g.bind)
	}
	out := make([]float32, 0, n*len(qs))
	for lo := 0; lo < len(qs); lo += per {
		part, err := g.gather(ctx, qs[lo:min(lo+per, len(qs))], rows, st)
		if err != nil {
			return nil, err
		}
		out = append(out, part...)
	}
	return out, nil
}

// gather is Gather for one submission's queries.
func (g *Index) gather(ctx context.Context, qs [][]float32, rows []uint32, t *core.Stages) (scores []float32, err error) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	qs, scale, err := g.flushScale(qs)
	if err != nil {
		return nil, err
	}
	nq, n := len(qs), len(rows)
	layout := shaders.GatherLayout(g.single)
	c := core.Stages{Path: "gather"}
	dev := g.device()
	start := time.Now()
	s := g.gatherState()
	// The listed rows, chunk-local, chunk by chunk: each resident chunk's
	// share of the list starts where the previous one's ends.
	type span struct {
		ch         *gpuChunk
		base, rows int
	}
	local := make([]uint32, n)
	var spans []span
	i := 0
	for c, ch := range g.chunks {
		first := c * g.plan.RowsPerChunk
		lo := i
		for i < n && int(rows[i]) < first+ch.rows {
			local[i] = rows[i] - uint32(first)
			i++
		}
		if i > lo {
			spans = append(spans, span{ch, lo, i - lo})
		}
	}
	size := uint64(nq) * uint64(n) * 4
	var raw []byte
	err = scoped(dev, "gather", func() error {
		pipe, err := g.dev.gatherPipeline(layout)
		if err != nil {
			return err
		}
		for _, r := range []struct {
			b    *growBuffer
			size uint64
		}{{&s.query, uint64(nq) * g.queryBytes()}, {&s.list, uint64(n) * 4}, {&s.scores, size}} {
			if err := g.step("create " + r.b.label); err != nil {
				return err
			}
			replaced, err := r.b.ensure(dev, r.size)
			if err != nil {
				return err
			}
			if replaced {
				for _, b := range s.binds {
					b.bg.Release()
				}
				clear(s.binds)
			}
		}
		flat := qs[0]
		if nq > 1 {
			flat = make([]float32, 0, nq*g.plan.Stride)
			for _, q := range qs {
				flat = append(flat, q...)
			}
		}
		if err := g.write(&c, "write queries", s.query.buf, wgpu.ToBytes(flat)); err != nil {
			return err
		}
		if err := g.write(&c, "write gather rows", s.list.buf, wgpu.ToBytes(local)); err != nil {
			return err
		}
		for _, sp := range spans {
			x, _ := g.grid(sp.rows, layout)
			p := shaders.Params{Rows: uint32(sp.rows), GroupsX: x, Base: uint32(sp.base), Total: uint32(n),
				Queries: uint32(nq), ListBase: uint32(sp.base)}
			if err := g.write(&c, "write params", sp.ch.params, p.Encode()); err != nil {
				return err
			}
			if b, ok := s.binds[sp.ch]; !ok || b.data != sp.ch.data || b.params != sp.ch.params {
				b.bg.Release()
				delete(s.binds, sp.ch)
				if err := g.step("bind gather"); err != nil {
					return err
				}
				bg, err := dev.TryCreateBindGroup(&wgpu.BindGroupDescriptor{
					Label:  "umbra gather",
					Layout: g.dev.gather.bgl,
					Entries: []wgpu.BindGroupEntry{
						{Binding: 0, Buffer: sp.ch.data, Size: wgpu.WholeSize},
						{Binding: 1, Buffer: s.query.buf, Size: wgpu.WholeSize},
						{Binding: 2, Buffer: s.scores.buf, Size: wgpu.WholeSize},
						{Binding: 3, Buffer: sp.ch.params, Size: wgpu.WholeSize},
						{Binding: 4, Buffer: s.list.buf, Size: wgpu.WholeSize},
					},
				})
				if err != nil {
					return err
				}
				s.binds[sp.ch] = gatherBind{bg, sp.ch.data, sp.ch.params}
			}
		}
		if t != nil {
			start = lap(&c.Upload, start)
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
		pass.SetPipeline(pipe)
		for _, sp := range spans {
			x, y := g.grid(sp.rows, layout)
			pass.SetBindGroup(0, s.binds[sp.ch].bg, nil)
			dispatch(pass, &c, x, y, uint32(nq))
			c.BytesRead += int64(sp.rows) * int64(g.rowBytes()) * int64(nq)
		}
		err = pass.TryEnd()
		pass.Release()
		if err != nil {
			return err
		}
		if err := g.step("create " + g.staging.label); err != nil {
			return err
		}
		if _, err := g.staging.ensure(dev, size); err != nil {
			return err
		}
		if err := g.step("copy to readback"); err != nil {
			return err
		}
		if err := enc.TryCopyBufferToBuffer(s.scores.buf, 0, g.staging.buf, 0, size); err != nil {
			return err
		}
		raw, err = g.submitAndRead(&c, enc, size, t != nil, &start)
		return err
	})
	if err != nil {
		g.resetScratch()
		return nil, err
	}
	scores = wgpu.FromBytes[float32](raw)
	unscaleScores(scores, n, scale)
	t.Add(&c)
	return scores, nil
}
