package fallback

import (
	"context"
	"fmt"

	"github.com/umbravec/umbra/internal/parallel"
	"github.com/umbravec/umbra/internal/topk"
)

// Cache budgets. A block of rows for one query only streams through, so it
// is sized for cheap cancellation checks and load balance; the blocks are
// handed out in contiguous shares (parallel.RunShares), so each worker's
// reads stay in order whatever the block size. A batch walks
// tiles of rows; the kernels keep four rows in L1 while the whole block of
// queries streams past them from L2, so the query block must leave L2 room
// (384 KiB of a typical 1-2 MiB) and each row is read from memory once per
// query block.
const (
	blockBytes      = 64 << 10
	tileBytes       = 256 << 10
	queryBlockBytes = 384 << 10
)

// plan splits a slab into blocks of rows whose strides are all present in
// memory. A slab may omit the last row's padding; that row gets a padded
// copy of its own and a block of its own, so kernels never read past Data.
type plan struct {
	data      []float32
	stride    int
	nFull     int       // rows whose whole stride lies in data
	tail      []float32 // padded copy of row nFull, or nil
	blockRows int
	nblocks   int
}

func newPlan(s Slab, blockRows int) plan {
	p := plan{data: s.Data, stride: s.Stride, nFull: s.Rows, blockRows: blockRows}
	if s.Stride > 0 && s.Rows > len(s.Data)/s.Stride {
		p.nFull = s.Rows - 1
		p.tail = make([]float32, s.Stride)
		copy(p.tail, s.Data[p.nFull*s.Stride:p.nFull*s.Stride+s.Dim])
	}
	p.nblocks = (p.nFull + blockRows - 1) / blockRows
	if p.tail != nil {
		p.nblocks++
	}
	return p
}

// block returns the first row of block b, its packed strides and its
// number of rows.
func (p *plan) block(b int) (lo int, rows []float32, n int) {
	lo = b * p.blockRows
	if lo >= p.nFull {
		return p.nFull, p.tail, 1
	}
	n = min(p.blockRows, p.nFull-lo)
	return lo, p.data[lo*p.stride : (lo+n)*p.stride], n
}

// rowsFor returns how many rows of the given stride fit in budget bytes,
// rounded down to a multiple of unit and at least unit.
func rowsFor(budget, stride, unit int) int {
	n := budget / (4 * max(stride, 1))
	return max(unit, n/unit*unit)
}

// Search returns the k best rows of s for q, best first, equal scores
// broken by the lower ID (s.IDs; nil: the lower row); k >= s.Rows returns
// every row. len(q) is Dim or Stride (with zero padding). workers <= 0
// means GOMAXPROCS. ctx is checked between blocks of rows; on cancellation
// Search returns ctx.Err().
func Search(ctx context.Context, s Slab, q []float32, k int, m Metric, workers int) (hits []Hit, err error) {
	defer parallel.Recover(&err)
	qq, err := CheckQuery(s, q, m)
	if err != nil {
		return nil, err
	}
	if s.Rows == 0 || k <= 0 {
		return []Hit{}, nil
	}
	var tops []topk.Heap
	err = scanKeys(ctx, s, qq, m, workers, func(w, expect int) {
		tops = make([]topk.Heap, w)
		for i := range tops {
			tops[i] = topk.New(k, expect, s.IDs)
		}
	}, func(wk, lo int, keys []float32) { tops[wk].OfferAllowed(keys, lo, s.Allow) })
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(tops); i++ {
		tops[0].Merge(&tops[i])
	}
	return tops[0].Result(m), nil
}

// CheckQuery checks the metric, the slab's shape and the query's length as
// Search does, and returns the query as a Stride-long vector (a copy only
// when q lacks the padding): what ScoreRun takes.
func CheckQuery(s Slab, q []float32, m Metric) ([]float32, error) {
	if err := s.Check(m); err != nil {
		return nil, err
	}
	return s.query(q)
}

// ScoreRun writes the scores of rows [first, first+len(dst)) of s for the
// Stride-long query q (CheckQuery's) into dst, with the kernel Search
// scores them with, so they are the very bits Search reports: the exact
// search of compressed rows (internal/exact) rescores its candidates with
// it. The last row may lack its padding (Slab's rule).
func ScoreRun(dst []float32, s Slab, q []float32, first int, m Metric) {
	n := len(dst)
	if n == 0 {
		return
	}
	kern := active.rows(m)
	if last := first + n - 1; last == s.Rows-1 && s.Stride > 0 && s.Rows > len(s.Data)/s.Stride {
		if n > 1 {
			kern(dst[:n-1], q, s.Data[first*s.Stride:last*s.Stride], s.Stride)
		}
		tail := make([]float32, s.Stride)
		copy(tail, s.Data[last*s.Stride:last*s.Stride+s.Dim])
		kern(dst[n-1:], q, tail, s.Stride)
		return
	}
	kern(dst, q, s.Data[first*s.Stride:(first+n)*s.Stride], s.Stride)
}

// scanKeys scores every row of s for the Stride-long query qq, a block of
// rows at a time on parallel workers, and hands each block's keys (larger
// is better) to use with the worker's number and the block's first row.
// setup runs first with the number of workers and the rows each can expect.
func scanKeys(ctx context.Context, s Slab, qq []float32, m Metric, workers int, setup func(w, expect int), use func(wk, lo int, keys []float32)) error {
	kern := active.rows(m)
	p := newPlan(s, rowsFor(blockBytes, s.Stride, 8))
	w := parallel.Workers(workers, p.nblocks, s.Rows*s.Stride)
	bufs := make([][]float32, w)
	for i := range bufs {
		bufs[i] = make([]float32, p.blockRows)
	}
	setup(w, s.Rows/w+p.blockRows)
	return parallel.RunShares(ctx, w, p.nblocks, func(wk, b int) {
		lo, rows, n := p.block(b)
		buf := bufs[wk][:n]
		kern(buf, qq, rows, p.stride)
		topk.ToKeys(m, buf)
		use(wk, lo, buf)
	})
}

// QueryBlock is how many queries SearchBatch scores together at a row
// stride of stride floats: each row is read from memory once per block of
// this many queries (128 at stride 768, 96 at 1024, never fewer than 8).
func QueryBlock(stride int) int { return rowsFor(queryBlockBytes, stride, 8) }

// SearchBatch is Search for many queries at once, with the same results.
// It scores a whole block of queries against each few rows before moving
// on, so a row is read from memory once per query block rather than once
// per query.
func SearchBatch(ctx context.Context, s Slab, qs [][]float32, k int, m Metric, workers int) (out [][]Hit, err error) {
	defer parallel.Recover(&err)
	if err := s.Check(m); err != nil {
		return nil, err
	}
	nq := len(qs)
	stride := s.Stride
	packed := make([]float32, nq*stride)
	for j, q := range qs {
		if len(q) != s.Dim && len(q) != stride {
			return nil, fmt.Errorf("query %d: %w: len %d, dim %d, stride %d", j, ErrQueryLen, len(q), s.Dim, stride)
		}
		copy(packed[j*stride:(j+1)*stride], q)
	}
	out = make([][]Hit, nq)
	if s.Rows == 0 || k <= 0 || nq == 0 {
		for j := range out {
			out[j] = []Hit{}
		}
		return out, nil
	}
	ks := active
	kern := ks.tile(m)
	p := newPlan(s, rowsFor(tileBytes, stride, 8))
	qb := min(nq, QueryBlock(stride))
	nqb := (nq + qb - 1) / qb
	items := nqb * p.nblocks
	work := s.Rows * stride
	if work < parallel.MinFloats {
		work *= nq // only small products; a big one could overflow
	}
	w := parallel.Workers(workers, items, work)
	tops := make([][]topk.Heap, w)
	bufs := make([][]float32, w)
	for i := range tops {
		tops[i] = make([]topk.Heap, nq)
		for j := range tops[i] {
			tops[i][j] = topk.New(k, s.Rows/w+p.blockRows, s.IDs)
		}
		bufs[i] = make([]float32, qb*p.blockRows)
	}
	// Items run query block by query block, so the workers share one block
	// of queries in cache while they sweep the slab.
	err = parallel.Run(ctx, w, items, func(wk, it int) {
		q0 := it / p.nblocks * qb
		nqi := min(qb, nq-q0)
		lo, rows, n := p.block(it % p.nblocks)
		buf := bufs[wk][:nqi*n]
		kern(buf, packed[q0*stride:(q0+nqi)*stride], nqi, rows, n, stride)
		topk.ToKeys(m, buf)
		for j := range nqi {
			tops[wk][q0+j].OfferAllowed(buf[j*n:(j+1)*n], lo, s.Allow)
		}
	})
	if err != nil {
		return nil, err
	}
	for j := range out {
		for i := 1; i < w; i++ {
			tops[0][j].Merge(&tops[i][j])
		}
		out[j] = tops[0][j].Result(m)
	}
	return out, nil
}

// Range returns every row of s whose score for q is within threshold —
// at least threshold under Dot, at most threshold under L2 — best first,
// equal scores broken by the lower ID as in Search; rows Allow excludes are skipped. A
// NaN score is never within any threshold. There is no cap on how many.
func Range(ctx context.Context, s Slab, q []float32, threshold float32, m Metric, workers int) (hits []Hit, err error) {
	defer parallel.Recover(&err)
	qq, err := CheckQuery(s, q, m)
	if err != nil {
		return nil, err
	}
	if s.Rows == 0 {
		return []Hit{}, nil
	}
	var found [][]Hit
	limit := topk.Key(m, threshold)
	err = scanKeys(ctx, s, qq, m, workers, func(w, _ int) { found = make([][]Hit, w) }, func(wk, lo int, keys []float32) {
		for i, k := range keys {
			if k >= limit && topk.Allows(s.Allow, lo+i) { // false for NaN
				found[wk] = append(found[wk], Hit{Row: lo + i, Score: k})
			}
		}
	})
	if err != nil {
		return nil, err
	}
	hits = []Hit{}
	for _, f := range found {
		hits = append(hits, f...)
	}
	return topk.RankAll(hits, m, s.IDs), nil
}
