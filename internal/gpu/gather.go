package gpu

import (
	"context"
	"fmt"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/shaders"
)

// A filtered search that admits few rows on a GPU index: the admitted
// rows' indices go up, gather.wgsl scores only those rows (each with the
// bits the scan gives it) and their scores come back, 4 bytes a row a
// query, for the host's selection. The device reads the listed rows, not
// the slab. Like every other kernel it runs through the API
// (gpuplan.API), so wgpu-native and a browser's WebGPU both gather; its
// buffers are the index's scratch (the queries' and the scores' of a
// search, and the list: gatherRows), counted in the device-memory budget
// and freed with the rest of the scratch.

// GatherCosts is what a gather costs on this device, measured once per
// device on CalibrationSlab: a fixed cost a call (writing the list,
// submitting, reading back) and a cost a byte of listed rows, from the
// times of gathers of a sixty-fourth and of a sixteenth of its rows (the
// slope between them). With Calibrate's latency and scan rate it tells
// the engine whether a filtered search should gather or scan.
func (d *Device) GatherCosts() (fixed time.Duration, perByte float64, err error) {
	d.gatherOnce.Do(func() {
		d.gatherFixed, d.gatherPerByte, d.gatherErr = d.measureGather(CalibrationSlab())
	})
	return d.gatherFixed, d.gatherPerByte, d.gatherErr
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
	g.dev.mu.Lock()
	resident := 0
	for c, ch := range g.chunks {
		if ch.rows > 0 {
			resident = c*g.plan.RowsPerChunk + ch.rows
		}
	}
	room := g.scratchRoom()
	g.dev.mu.Unlock()
	for i, r := range rows {
		if int(r) >= resident || i > 0 && r <= rows[i-1] {
			return nil, fmt.Errorf("%w: listed row %d (entry %d) is not a resident row in order", ErrFailed, r, i)
		}
	}
	// One query's scores (and the list, as long) must fit one binding and
	// the readback one buffer.
	perQuery := uint64(n) * 4
	if perQuery > g.bind || perQuery > g.staging.limit {
		return nil, fmt.Errorf("%w: the scores of %d listed rows need %d bytes, the device binds %d", ErrTooLarge, n, perQuery, g.bind)
	}
	// Each submission holds as many queries as its scores and queries
	// bindings and the readback allow, as a grid's z dimension takes, and
	// as the scratch cap (and the budget beside the rows) leaves room for:
	// each query's copy, scores and share of the read back beside the
	// list.
	per := min(g.bind/perQuery, g.staging.limit/perQuery, g.bind/g.queryBytes(), g.maxGroups())
	fixed := perQuery + 2*gpuplan.StampRoom
	per = max(min(per, (room-min(fixed, room))/(g.queryBytes()+2*perQuery)), 1)
	out := make([]float32, 0, n*len(qs))
	for lo := 0; lo < len(qs); lo += int(per) {
		part, err := g.gather(ctx, qs[lo:min(lo+int(per), len(qs))], rows, st)
		if err != nil {
			return nil, err
		}
		out = append(out, part...)
	}
	return out, nil
}

// gather is Gather for one submission's queries. Any failure resets the
// scratch state, as a search's does.
func (g *Index) gather(ctx context.Context, qs [][]float32, rows []uint32, t *core.Stages) (scores []float32, err error) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if g.lost != nil {
		return nil, g.lost
	}
	qs, scale, err := g.flushScale(qs)
	if err != nil {
		return nil, err
	}
	nq, n := len(qs), len(rows)
	layout := shaders.GatherLayout(g.single)
	c := core.Stages{Path: "gather"}
	start := time.Now()
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
	if i < n {
		// A chunk truncated between Gather's check and this submission.
		return nil, fmt.Errorf("%w: listed row %d is no longer resident", ErrFailed, rows[i])
	}
	size := uint64(nq) * uint64(n) * 4
	var raw []byte
	err = g.dev.scoped("gather", func() error {
		if err := g.step("compile gather"); err != nil {
			return err
		}
		pipe, err := g.dev.gatherPipeline(layout)
		if err != nil {
			return err
		}
		readback := size
		if g.dev.timestamps {
			readback = gpuplan.StampAt(readback) + gpuplan.StampRoom
		}
		needs := []struct {
			b    *growBuffer
			size uint64
		}{{&g.query, uint64(nq) * g.queryBytes()}, {&g.gatherRows, uint64(n) * 4}, {&g.scoresB, size}}
		wants := map[*growBuffer]uint64{&g.staging: readback}
		for _, r := range needs {
			wants[r.b] = r.size
		}
		g.makeRoom(wants)
		for _, r := range needs {
			if err := g.step("create " + r.b.label); err != nil {
				return err
			}
			if _, err := r.b.ensure(g, r.size); err != nil {
				return err
			}
		}
		flat := qs[0]
		if nq > 1 {
			flat = make([]float32, 0, nq*g.plan.Stride)
			for _, q := range qs {
				flat = append(flat, q...)
			}
		}
		if err := g.write(&c, "write queries", g.query.buf, bytesOf(flat)); err != nil {
			return err
		}
		if err := g.write(&c, "write gather rows", g.gatherRows.buf, bytesOf(local)); err != nil {
			return err
		}
		// The chunks' params are every search's: each writes its own
		// before it dispatches.
		for _, sp := range spans {
			x, _ := g.grid(sp.rows, layout)
			p := shaders.Params{Rows: uint32(sp.rows), GroupsX: x, Base: uint32(sp.base), Total: uint32(n),
				Queries: uint32(nq), ListBase: uint32(sp.base)}
			if err := g.write(&c, "write params", sp.ch.params, p.Encode()); err != nil {
				return err
			}
		}
		if t != nil {
			start = lap(&c.Upload, start)
		}
		if err := g.step("encode"); err != nil {
			return err
		}
		ps := &pass{c: &c}
		for _, sp := range spans {
			x, y := g.grid(sp.rows, layout)
			ps.dispatch(pipe, x, y, uint32(nq), sp.ch.data, g.query.buf, g.scoresB.buf, sp.ch.params, g.gatherRows.buf)
			c.BytesRead += int64(sp.rows) * int64(g.rowBytes()) * int64(nq)
		}
		raw, err = g.submitAndRead(&c, ps.list, g.scoresB.buf, size, t != nil, &start)
		return err
	})
	if err != nil {
		g.resetScratch()
		return nil, err
	}
	scores = floatsOf(raw)
	unscaleScores(scores, n, scale)
	t.Add(&c)
	return scores, nil
}
