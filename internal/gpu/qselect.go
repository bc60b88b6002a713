package gpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/shaders"
)

// quantSelect is what a compressed index keeps for SelectSums
// (shaders/qbounds.wgsl): its pipelines, the per-row bound data resident
// beside the codes (valid rows of it known to match the codes; Truncate
// and Rewrite lower that, so the next search writes them again), and its
// scratch buffers and bind groups.
type quantSelect struct {
	pipes             *qboundsPipes
	rows              growBuffer
	valid             int
	keys, coef, cands growBuffer
}

// SelectSums selects, for an index of compressed rows, each query's
// candidates on the device (shaders/qbounds.wgsl): the rows whose upper
// bound reaches the k-th best lower bound, with their raw sums. A query
// whose candidates outnumber Cap gets nil (its count is in counts): the
// caller reads its sums back whole. scans is how many passes over the
// codes it took, rowScans over the per-row bound data. ErrSelectUnfit: the
// request does not fit this device; read every sum back instead.
func (g *Index) SelectSums(ctx context.Context, r QuantSelect, st *core.Stages) (cands [][]exact.DeviceCand, counts []int, scans, rowScans int, err error) {
	if g.prec == core.F32 {
		return nil, nil, 0, 0, fmt.Errorf("%w: SelectSums needs an index of compressed rows", ErrFailed)
	}
	if err := gpuplan.QueryWords(r.Queries, int(g.queryBytes()/4), ErrFailed); err != nil {
		return nil, nil, 0, 0, err
	}
	nq := len(r.Queries)
	if len(r.Coefs) != nq || r.RowData == nil {
		return nil, nil, 0, 0, fmt.Errorf("%w: %d coefficient sets for %d queries", ErrFailed, len(r.Coefs), nq)
	}
	for j, c := range r.Coefs {
		if len(c) != exact.QCoefWords {
			return nil, nil, 0, 0, fmt.Errorf("%w: query %d has %d coefficients, want %d", ErrFailed, j, len(c), exact.QCoefWords)
		}
	}
	if r.Range {
		r.K = 1 // the state's k; no rounds run
	}
	if r.Rows <= 0 || r.K < 1 || r.Cap < r.K || r.K > r.Rows {
		return nil, nil, 0, 0, fmt.Errorf("%w: k %d, capacity %d over %d rows", ErrFailed, r.K, r.Cap, r.Rows)
	}
	if r.Mask != nil && len(r.Mask)*64 < r.Rows {
		return nil, nil, 0, 0, fmt.Errorf("%w: an allow bitmap of %d words for %d rows", ErrFailed, len(r.Mask), r.Rows)
	}
	if n := g.dev.lim.MaxStorageBuffers; n != 0 && n < uint32(len(shaders.QBoundsBindings)) {
		return nil, nil, 0, 0, ErrSelectUnfit // a downlevel adapter: too few storage bindings
	}
	if uint64(r.Rows)*16 > g.bind || uint64(r.Cap+1)*8 > g.bind || uint64(r.Cap+1)*8 > g.staging.limit {
		return nil, nil, 0, 0, ErrSelectUnfit
	}
	// Per submission: as Sums' (scores, work), the lo' keys beside the
	// scores, and the candidate lists in one binding and one readback.
	per := g.perSubmission(submission{Rows: r.Rows}, false)
	per = min(per, int(g.bind/(uint64(r.Rows)*4)), int(g.bind/(uint64(r.Cap+1)*8)), int(g.staging.limit/(uint64(r.Cap+1)*8)))
	per = gpuplan.WholeTiles(per, int(g.batch.QT))
	cands = make([][]exact.DeviceCand, 0, nq)
	counts = make([]int, 0, nq)
	for lo := 0; lo < nq; lo += per {
		hi := min(lo+per, nq)
		part, n, err := g.runSelect(ctx, r, lo, hi, st)
		if err != nil {
			return nil, nil, 0, 0, err
		}
		cands = append(cands, part...)
		counts = append(counts, n...)
		qt := int(g.single.QT)
		if hi-lo > 1 {
			qt = int(g.batch.QT)
		}
		scans += (hi - lo + qt - 1) / qt
		rowScans += 2 * (hi - lo)
	}
	return cands, counts, scans, rowScans, nil
}

// selectPipes compiles qbounds.wgsl for this index once.
func (g *Index) selectPipes() (*quantSelect, error) {
	if g.qsel == nil {
		g.qsel = &quantSelect{
			rows:  growBuffer{label: "umbra qselect rows", usage: gpuplan.Storage | gpuplan.CopyDst, limit: g.bind},
			keys:  growBuffer{label: "umbra qselect keys", usage: gpuplan.Storage | gpuplan.CopySrc, limit: g.bind},
			coef:  growBuffer{label: "umbra qselect coefs", usage: gpuplan.Storage | gpuplan.CopyDst, limit: g.bind},
			cands: growBuffer{label: "umbra qselect cands", usage: gpuplan.Storage | gpuplan.CopySrc, limit: g.bind},
		}
	}
	q := g.qsel
	if q.pipes != nil {
		return q, nil
	}
	if err := g.step("compile qbounds"); err != nil {
		return nil, err
	}
	ps, err := g.dev.qboundsPipeline(g.prec, g.metric)
	if err != nil {
		return nil, err
	}
	q.pipes = ps
	return q, nil
}

// dropScratch releases the selection's scratch buffers (not the resident
// row data) after a failure, as resetScratch does.
func (q *quantSelect) dropScratch(g *Index) {
	if q == nil {
		return
	}
	for _, b := range []*growBuffer{&q.keys, &q.coef, &q.cands} {
		b.drop(g)
	}
}

// release frees everything the selection holds (Index.Release).
func (q *quantSelect) release(g *Index) {
	if q == nil {
		return
	}
	q.dropScratch(g)
	q.rows.drop(g)
	q.valid = 0
}

// qselectStale marks the resident bound data stale from row from on (the
// codes there were truncated or rewritten). The caller holds the device
// mutex.
func (g *Index) qselectStale(from int) {
	if g.qsel != nil {
		g.qsel.valid = min(g.qsel.valid, max(from, 0))
	}
}

// runSelect is one submission of SelectSums: queries [lo, hi) of r.
func (g *Index) runSelect(ctx context.Context, r QuantSelect, lo, hi int, t *core.Stages) (cands [][]exact.DeviceCand, counts []int, err error) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if g.lost != nil {
		return nil, nil, g.lost
	}
	qs := r.Queries[lo:hi]
	nq := len(qs)
	sub := submission{NQ: nq, Rows: r.Rows, K: r.K, DeviceSelect: true, Mask: r.Mask}
	layout := g.single
	if nq > 1 {
		layout = g.batch
	}
	c := core.Stages{Path: "qselect"}
	start := time.Now()
	var raw []byte
	size := uint64(nq+nq*r.Cap) * 8
	err = g.dev.scoped("qselect", func() error {
		q, err := g.selectPipes()
		if err != nil {
			return err
		}
		sp, err := g.dev.selectPipeline(false)
		if err != nil {
			return err
		}
		if err := g.prepare(sub); err != nil {
			return err
		}
		if err := g.prepareSelect(q, r, nq, &c); err != nil {
			return err
		}
		if err := g.writeInputs(qs, sub, layout, &c); err != nil {
			return err
		}
		coefs := make([]float32, 0, nq*exact.QCoefWords)
		for _, w := range r.Coefs[lo:hi] {
			coefs = append(coefs, w[:exact.QCoefWords-2]...)
			coefs = append(coefs, math.Float32frombits(uint32(r.Cap)), math.Float32frombits(uint32(nq)))
		}
		if err := g.write(&c, "write qselect coefs", q.coef.buf, bytesOf(coefs)); err != nil {
			return err
		}
		if r.Range {
			// The threshold is the key itself: each query's state starts
			// with its prefix set and its rounds done.
			state := make([]byte, nq*shaders.StateBytes)
			for j := range nq {
				binary.LittleEndian.PutUint32(state[j*shaders.StateBytes:], orderKey(r.Limit))
				binary.LittleEndian.PutUint32(state[j*shaders.StateBytes+12:], 8)
				binary.LittleEndian.PutUint32(state[j*shaders.StateBytes+20:], uint32(r.Rows))
				binary.LittleEndian.PutUint32(state[j*shaders.StateBytes+24:], 1)
				binary.LittleEndian.PutUint32(state[j*shaders.StateBytes+32:], shaders.MaskedWith(r.Mask != nil, 0))
			}
			if err := g.write(&c, "write qselect range", g.state.buf, state); err != nil {
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
		g.encodeScores(ps, layout, nq, g.query.buf, g.scoresB.buf)
		gx := gpuplan.SelectGroups(r.Rows)
		bounds := []gpuplan.Buffer{g.scoresB.buf, q.rows.buf, q.coef.buf, q.keys.buf, g.state.buf, q.cands.buf, g.allow.buf}
		// select.wgsl's rounds over the lo' keys: its out binding is
		// never written by hist and scan.
		keys := []gpuplan.Buffer{q.keys.buf, g.state.buf, q.cands.buf, g.allow.buf}
		ps.dispatch(q.pipes.bounds, gx, uint32(nq), 1, bounds...)
		// τ' is the high word of the k-th best key (the lo' key; the low
		// word only orders rows within it), settled by the first four
		// rounds: the last four are not run.
		for round := 0; round < 4 && !r.Range; round++ {
			ps.dispatch(sp.hist, gx, uint32(nq), 1, keys...)
			ps.dispatch(sp.scan, uint32(nq), 1, 1, keys...)
		}
		ps.dispatch(q.pipes.compact, gx, uint32(nq), 1, bounds...)
		ps.dispatch(q.pipes.count, uint32((nq+63)/64), 1, 1, bounds...)
		raw, err = g.submitAndRead(&c, ps.list, q.cands.buf, size, t != nil, &start)
		return err
	})
	if err != nil {
		g.resetScratch()
		g.qsel.dropScratch(g)
		return nil, nil, err
	}
	cands, counts, err = decodeCands(raw, nq, r.Cap, r.Rows)
	if err != nil {
		return nil, nil, err
	}
	if t != nil {
		lap(&c.Select, start)
	}
	t.Add(&c)
	return cands, counts, nil
}

// decodeCands splits a readback of the candidate lists: each query's count,
// then its slots. A query whose count passes capacity gets nil; a row past
// rows is the device's error.
func decodeCands(raw []byte, nq, capacity, rows int) ([][]exact.DeviceCand, []int, error) {
	cands := make([][]exact.DeviceCand, nq)
	counts := make([]int, nq)
	for j := range nq {
		n := int(binary.LittleEndian.Uint32(raw[8*j:]))
		counts[j] = n
		if n > capacity {
			continue
		}
		list := make([]exact.DeviceCand, n)
		at := 8 * (nq + j*capacity)
		for i := range list {
			row := binary.LittleEndian.Uint32(raw[at+8*i:])
			if int(row) >= rows {
				return nil, nil, fmt.Errorf("%w: the device selected row %d of %d", ErrFailed, row, rows)
			}
			list[i] = exact.DeviceCand{Row: row, Raw: binary.LittleEndian.Uint32(raw[at+8*i+4:])}
		}
		cands[j] = list
	}
	return cands, counts, nil
}

// prepareSelect sizes the selection's buffers for nq queries, writes the
// per-row bound data the device lacks, and builds the bind groups that
// name a buffer replaced since.
func (g *Index) prepareSelect(q *quantSelect, r QuantSelect, nq int, c *core.Stages) error {
	// The resident bound data: grown (and then written again whole) or
	// extended to r.Rows.
	if err := g.step("create " + q.rows.label); err != nil {
		return err
	}
	replaced, err := q.rows.ensure(g, uint64(r.Rows)*16)
	if replaced {
		q.valid = 0
	}
	if err != nil {
		return err
	}
	if q.valid < r.Rows {
		data := r.RowData(q.valid, r.Rows)
		if len(data) != exact.QRowWords*(r.Rows-q.valid) {
			return fmt.Errorf("%w: %d words of row data for rows %d to %d", ErrFailed, len(data), q.valid, r.Rows)
		}
		if err := g.writeAt(c, "write qselect rows", q.rows.buf, uint64(q.valid)*16, bytesOf(data)); err != nil {
			return err
		}
		q.valid = r.Rows
	}
	for _, n := range []struct {
		b    *growBuffer
		size uint64
	}{{&q.keys, uint64(nq) * uint64(r.Rows) * 4}, {&q.coef, uint64(nq) * exact.QCoefWords * 4},
		{&q.cands, uint64(nq+nq*r.Cap) * 8}} {
		if err := g.step("create " + n.b.label); err != nil {
			return err
		}
		if _, err := n.b.ensure(g, n.size); err != nil {
			return err
		}
	}
	return nil
}
