package exact

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/parallel"
	"github.com/umbravec/umbra/internal/topk"
)

// QuantStats is what a search over compressed rows cost.
type QuantStats struct {
	Queries int
	// Rescored counts the float32 rows scored again, over all queries;
	// MaxRescored is the most for one query.
	Rescored    int64
	MaxRescored int
	// BytesRead is the compressed bytes scanned (once per block of
	// queries) plus the float32 bytes of the rescored rows.
	BytesRead int64
}

// Add accumulates o into s.
func (s *QuantStats) Add(o QuantStats) {
	s.Queries += o.Queries
	s.Rescored += o.Rescored
	s.MaxRescored = max(s.MaxRescored, o.MaxRescored)
	s.BytesRead += o.BytesRead
}

// candidate is a row whose upper bound may reach the k-th best lower bound.
type candidate struct {
	row int
	hi  float32
}

// quantBlockBytes sizes a block of compressed rows: it streams through
// once per block of queries, like the float32 scan's blocks.
const quantBlockBytes = 64 << 10

func (c *Compressed) check(s fallback.Slab) error {
	if c == nil {
		return fmt.Errorf("%w: no compressed rows", ErrPrecision)
	}
	if c.Rows != s.Rows || c.Dim != s.Dim || c.Stride != CodeStride(c.Prec, c.Dim) {
		return fmt.Errorf("%w: compressed %d rows of dimension %d for a slab of %d rows of dimension %d",
			fallback.ErrSlabShape, c.Rows, c.Dim, s.Rows, s.Dim)
	}
	if len(c.Scale) < c.Rows || len(c.Err) < c.Rows || len(c.Norm) < c.Rows || len(c.HatSq) < c.Rows {
		return fmt.Errorf("%w: compressed per-row values missing", fallback.ErrSlabShape)
	}
	switch c.Prec {
	case core.Int8:
		if len(c.U8) < c.Rows*c.Stride {
			return fmt.Errorf("%w: compressed codes missing", fallback.ErrSlabShape)
		}
	case core.F16:
		if len(c.F16) < c.Rows*c.Stride {
			return fmt.Errorf("%w: compressed codes missing", fallback.ErrSlabShape)
		}
	default:
		return fmt.Errorf("%w: %v", ErrPrecision, c.Prec)
	}
	return nil
}

// quantQueries checks a compressed batch search's metric, slab and
// compressed rows, and prepares each query against c.
func quantQueries(s fallback.Slab, c *Compressed, qs [][]float32, m core.Metric) ([]*quantQuery, error) {
	if err := s.Check(m); err != nil {
		return nil, err
	}
	if err := c.check(s); err != nil {
		return nil, err
	}
	qqs := make([]*quantQuery, len(qs))
	for j, q := range qs {
		qp, err := fallback.CheckQuery(s, q, m)
		if err != nil {
			return nil, fmt.Errorf("query %d: %w", j, err)
		}
		qqs[j] = newQuantQuery(c, qp, m)
	}
	return qqs, nil
}

// ExactSearchBatch returns, for every query, exactly what SearchBatch over
// the float32 slab s returns (the same rows, ties and float32 scores): it
// scans the compressed rows c (c holds s's rows), then rescores in float32
// only the rows the bounds cannot rule out (see quant_bounds.go). With
// approximate set it skips the rescore and returns the k best estimates,
// whose scores are the compressed estimates (not float32 scores) and whose
// rows may differ from the exact answer. s.Allow filters as in Search.
func ExactSearchBatch(ctx context.Context, s fallback.Slab, c *Compressed, qs [][]float32, k int, m core.Metric, workers int, approximate bool) (out [][]core.Hit, st QuantStats, err error) {
	defer parallel.Recover(&err)
	qqs, err := quantQueries(s, c, qs, m)
	if err != nil {
		return nil, st, err
	}
	nq := len(qs)
	// The panels read the queries from one packed slice.
	var packedQ []int8
	var packed16 []int16
	var packedF []float32
	ks := activeQuant.Load()
	if c.Prec == core.Int8 {
		packedQ = make([]int8, nq*c.Stride)
		for j, qq := range qqs {
			copy(packedQ[j*c.Stride:], qq.q8)
			qq.q8 = packedQ[j*c.Stride : (j+1)*c.Stride]
		}
		if ks.i8Tile16 != nil && nq > 1 {
			packed16 = widenI8(packedQ) // once a batch, for AVX2's panel
		}
	} else {
		packedF = make([]float32, nq*c.Stride)
		for j, qq := range qqs {
			copy(packedF[j*c.Stride:], qq.qf)
			qq.qf = packedF[j*c.Stride : (j+1)*c.Stride]
		}
	}
	out = make([][]core.Hit, nq)
	st.Queries = nq
	if s.Rows == 0 || k <= 0 || nq == 0 {
		for j := range out {
			out[j] = []core.Hit{}
		}
		return out, st, nil
	}
	per := c.Stride
	if c.Prec == core.F16 {
		per *= 2
	}
	blockRows := max(8, quantBlockBytes/max(per, 1)/4*4)
	nblocks := (s.Rows + blockRows - 1) / blockRows
	qb := min(nq, fallback.QueryBlock(s.Stride))
	nqb := (nq + qb - 1) / qb
	items := nqb * nblocks
	work := s.Rows * c.Stride
	if work < parallel.MinFloats {
		work *= nq
	}
	w := parallel.Workers(workers, items, work)
	tops := make([][]topk.Heap, w)
	cands := make([][][]candidate, w)
	type scratch struct {
		raw  []float64
		i32  []int32
		f32  []float32
		tile []int32
	}
	scr := make([]scratch, w)
	for i := range tops {
		scr[i] = scratch{raw: make([]float64, blockRows)}
		if c.Prec == core.Int8 {
			scr[i].i32 = make([]int32, blockRows)
			if qb > 1 {
				scr[i].tile = make([]int32, qb*blockRows)
			}
		} else {
			scr[i].f32 = make([]float32, qb*blockRows)
		}
		tops[i] = make([]topk.Heap, nq)
		cands[i] = make([][]candidate, nq)
		for j := range tops[i] {
			tops[i][j] = topk.New(k, s.Rows/w+blockRows, s.IDs)
		}
	}
	err = parallel.Run(ctx, w, items, func(wk, it int) {
		q0 := it / nblocks * qb
		nqi := min(qb, nq-q0)
		lo := it % nblocks * blockRows
		n := min(blockRows, s.Rows-lo)
		sc := &scr[wk]
		raw := sc.raw[:n]
		if c.Prec == core.Int8 {
			buf := sc.i32[:n]
			rows := c.U8[lo*c.Stride : (lo+n)*c.Stride]
			if nqi == 1 {
				ks.i8Rows(buf, qqs[q0].q8, rows, c.Stride)
			}
			var tile []int32
			var amax, hmax float64
			if nqi > 1 {
				tile = sc.tile[:nqi*n]
				if packed16 != nil {
					ks.i8Tile16(tile, packedQ[q0*c.Stride:(q0+nqi)*c.Stride], packed16[q0*c.Stride:(q0+nqi)*c.Stride], nqi, rows, n, c.Stride)
				} else {
					ks.i8Tile(tile, packedQ[q0*c.Stride:(q0+nqi)*c.Stride], nqi, rows, n, c.Stride)
				}
			}
			for j := range nqi {
				src := buf
				if tile != nil {
					src = tile[j*n : (j+1)*n]
				}
				if !approximate && m != core.L2 {
					if j == 0 {
						amax, hmax = blockMaxima(c, lo, n, qqs[q0].g32)
					}
					scanI8Dot(qqs[q0+j], c, src, lo, s.Allow, &tops[wk][q0+j], &cands[wk][q0+j], amax, hmax)
					continue
				}
				for i, v := range src {
					raw[i] = float64(v)
				}
				scanBlock(qqs[q0+j], c, raw, lo, s.Allow, &tops[wk][q0+j], &cands[wk][q0+j], approximate)
			}
			return
		}
		rows := c.F16[lo*c.Stride : (lo+n)*c.Stride]
		tile := sc.f32[:nqi*n]
		if nqi == 1 {
			ks.f16Rows(tile, qqs[q0].qf, rows, c.Stride)
		} else {
			ks.f16Tile(tile, packedF[q0*c.Stride:(q0+nqi)*c.Stride], nqi, rows, n, c.Stride)
		}
		var amax, hmax, smax float64
		for j := range nqi {
			if f16Filter && !approximate && m != core.L2 {
				if j == 0 {
					amax, hmax = blockMaxima(c, lo, n, qqs[q0].g32)
					smax = float64(slices.Max(c.Scale[lo : lo+n]))
				}
				scanF16Dot(qqs[q0+j], c, tile[j*n:(j+1)*n], lo, s.Allow, &tops[wk][q0+j], &cands[wk][q0+j], amax, hmax, smax)
				continue
			}
			for i, v := range tile[j*n : (j+1)*n] {
				raw[i] = float64(v)
			}
			scanBlock(qqs[q0+j], c, raw, lo, s.Allow, &tops[wk][q0+j], &cands[wk][q0+j], approximate)
		}
	})
	if err != nil {
		return nil, st, err
	}
	st.BytesRead = int64(nqb) * c.Bytes()
	out, err = finishQuant(ctx, s, qqs, tops, cands, k, m, workers, approximate, &st)
	return out, st, err
}

// finishQuant ends a scan of compressed rows: it merges the workers' top
// lists, and then returns them (approximate) or rescores every candidate
// whose upper bound reaches the k-th best lower bound τ in float32 and
// returns the k best of those. st gains the rescore's counts.
func finishQuant(ctx context.Context, s fallback.Slab, qqs []*quantQuery, tops [][]topk.Heap, cands [][][]candidate, k int, m core.Metric, workers int, approximate bool, st *QuantStats) ([][]core.Hit, error) {
	nq, w := len(qqs), len(tops)
	out := make([][]core.Hit, nq)
	for j := range out {
		for i := 1; i < w; i++ {
			tops[0][j].Merge(&tops[i][j])
		}
	}
	if approximate {
		for j := range out {
			out[j] = tops[0][j].Result(m)
		}
		return out, nil
	}
	// τ per query, and the rows to rescore: every candidate whose upper
	// bound reaches τ, in row order.
	todo := make([][]int, nq)
	for j := range out {
		t := &tops[0][j]
		tau := -inf32
		if t.Len() >= k {
			tau = t.Worst()
		}
		var rows []int
		for i := range w {
			for _, cd := range cands[i][j] {
				if cd.hi >= tau {
					rows = append(rows, cd.row)
				}
			}
		}
		slices.Sort(rows)
		todo[j] = rows
		st.Rescored += int64(len(rows))
		st.MaxRescored = max(st.MaxRescored, len(rows))
	}
	st.BytesRead += st.Rescored * int64(s.Stride) * 4
	return rescore(ctx, s, qqs, todo, k, m, workers)
}

// scanBlock turns one block's raw sums for one query into key bounds:
// offers each allowed row's lower bound (or, approximate, its estimate) to
// t, and keeps as candidates the rows whose upper bound reaches t's worst
// kept lower bound so far (the final k-th best can only be higher).
//
// Most rows of a large scan cannot reach the k-th best: once t is full, a
// row whose upper bound is below t's worst kept bound is dropped after a
// few multiplications (dotUpper), without rounding or heap work.
func scanBlock(qq *quantQuery, c *Compressed, raw []float64, base int, allow []uint64, t *topk.Heap, cands *[]candidate, approximate bool) {
	fast := !approximate && qq.metric != core.L2
	for i, r := range raw {
		row := base + i
		if !topk.Allows(allow, row) {
			continue
		}
		if approximate {
			t.Offer(row, qq.estKey(c, row, r))
			continue
		}
		if fast && t.Full() && qq.dotUpper(c, row, r) < float64(t.Worst()) {
			continue
		}
		offerBounded(qq, c, row, r, t, cands)
	}
}

// scanI8Dot is scanBlock for int8 rows under Dot, on the kernel's int32
// sums, built for a batch, where it runs for every (query, row) pair. Two
// filters before scanBlock's path:
//
//  1. With the block's largest query-independent bound terms (amax ≥
//     e + γ·‖x‖ + 2^-40·‖x̂‖ and hmax ≥ ‖x̂‖, both widened) every row's
//     half-width is at most bmax, so a row whose s_x·Σc_q c_x is below
//     θ = (τ − bmax)/s_q, less a 2^-40 margin for the float64 rounding
//     of these few steps, has its upper bound below τ: one conversion,
//     one multiplication and one comparison.
//  2. The row's own upper bound (dotUpper's formula, inline).
func scanI8Dot(qq *quantQuery, c *Compressed, raw []int32, base int, allow []uint64, t *topk.Heap, cands *[]candidate, amax, hmax float64) {
	n := len(raw)
	scale, errs, norms := c.Scale[base:base+n], c.Err[base:base+n], c.Norm[base:base+n]
	sq, off, qn, eq := qq.sq, int32(qq.off), qq.qn, qq.eq
	gq, abs, wide, tiny := qq.g32*qq.qn, qq.abs32, qq.wide, 0x1p-40*qq.qn
	// No row can overflow when the largest cannot; else every row takes
	// the checked path.
	safe := qn*c.MaxHat < 0x1p100 && sq > 0
	bmax := qn*amax + eq*hmax + abs*wide
	tau, theta := math.Inf(-1), math.Inf(-1)
	setTau := func() {
		tau = float64(t.Worst())
		theta = (tau - bmax) / sq
		theta -= math.Abs(theta) * 0x1p-40
	}
	if t.Full() && safe {
		setTau()
	}
	for i := 0; i < n; i++ {
		if safe {
			// Most rows fail the first test: skip them, eight at a time
			// where the CPU can (the same products, so the same rows).
			if i = i8Pass(scale, raw, i, off, theta); i >= n {
				break
			}
		}
		r := raw[i]
		if safe {
			u := float64(r - off) // exact: |Σ c_q c_x| < 2^31
			if float64(scale[i])*u < theta {
				continue
			}
			xn, e := float64(norms[i]), float64(errs[i])
			hn := xn + e
			hi := sq*float64(scale[i])*u + (qn*e+eq*hn+gq*xn+abs)*wide + tiny*hn
			if hi < tau {
				continue
			}
		}
		row := base + i
		if allow != nil && !topk.Allows(allow, row) {
			continue
		}
		offerBounded(qq, c, row, float64(r), t, cands)
		if t.Full() && safe {
			setTau()
		}
	}
}

// offerBounded offers row, whose raw sum is r, to t by its lower bound and
// keeps it as a candidate while its upper bound can still reach t's k-th
// best lower bound.
func offerBounded(qq *quantQuery, c *Compressed, row int, r float64, t *topk.Heap, cands *[]candidate) {
	lo, hi, _ := qq.keyBounds(c, row, r)
	t.Offer(row, lo)
	if !t.Full() || hi >= t.Worst() {
		*cands = append(*cands, candidate{row, hi})
	}
}

// f16Filter turns scanF16Dot on (benchmarks compare it with scanBlock).
var f16Filter = true

// scanF16Dot is scanI8Dot's filter for float16 rows under Dot, on the
// kernel's float32 sums: with the block's largest query-independent terms
// (amax, hmax as blockMaxima gives them, smax the largest scale) every
// row's half-width is at most
//
//	bmax = ‖q‖·amax + (γ16·‖q‖·hmax + (abs16·smax + abs32)·wide),
//
// so a row whose estimate s_x·raw (an exact float64 product of two
// float32s) is below θ = τ − bmax, less a 2^-40 margin for the float64
// rounding of these steps, has its upper bound below τ; the bound's own
// widening (wide, 2^-20) covers the rounding of bmax. Then the row's own
// upper bound (dotUpper), then scanBlock's path.
func scanF16Dot(qq *quantQuery, c *Compressed, raw []float32, base int, allow []uint64, t *topk.Heap, cands *[]candidate, amax, hmax, smax float64) {
	n := len(raw)
	scale := c.Scale[base : base+n]
	qn := qq.qn
	safe := qn*c.MaxHat < 0x1p100
	bmax := qn*amax + (qq.g16*qn*hmax + (qq.abs16*smax+qq.abs32)*qq.wide)
	tau, theta := math.Inf(-1), math.Inf(-1)
	setTau := func() {
		tau = float64(t.Worst())
		theta = tau - bmax
		theta -= math.Abs(theta) * 0x1p-40
	}
	if t.Full() && safe {
		setTau()
	}
	for i, r := range raw {
		row := base + i
		if safe {
			if float64(scale[i])*float64(r) < theta {
				continue
			}
			if t.Full() && qq.dotUpper(c, row, float64(r)) < tau {
				continue
			}
		}
		if allow != nil && !topk.Allows(allow, row) {
			continue
		}
		offerBounded(qq, c, row, float64(r), t, cands)
		if t.Full() && safe {
			setTau()
		}
	}
}

// blockMaxima returns, over rows [lo, lo+n), the largest
// (e + γ·‖x‖)·wide + 2^-40·‖x̂‖ and ‖x̂‖·wide (‖x̂‖ ≤ ‖x‖ + e): the query-
// independent factors of every row's half-width under Dot.
func blockMaxima(c *Compressed, lo, n int, g32 float64) (amax, hmax float64) {
	wide := 1 + 0x1p-20
	for i := lo; i < lo+n; i++ {
		xn, e := float64(c.Norm[i]), float64(c.Err[i])
		hn := xn + e
		amax = max(amax, (e+g32*xn)*wide+0x1p-40*hn)
		hmax = max(hmax, hn*wide)
	}
	return amax, hmax
}

// rescore scores rows todo[j] for query j with the float32 rows kernel —
// the one fallback.Search uses (fallback.ScoreRun), so the scores are the
// same bits — and selects the k best of them.
func rescore(ctx context.Context, s fallback.Slab, qqs []*quantQuery, todo [][]int, k int, m core.Metric, workers int) ([][]core.Hit, error) {
	const chunk = 4096
	type item struct{ q, from int }
	var items []item
	total := 0
	for j, rows := range todo {
		for from := 0; from < len(rows); from += chunk {
			items = append(items, item{j, from})
		}
		total += len(rows)
	}
	w := parallel.Workers(workers, len(items), total*s.Stride)
	tops := make([][]topk.Heap, w)
	for i := range tops {
		tops[i] = make([]topk.Heap, len(qqs))
		for j := range tops[i] {
			tops[i][j] = topk.New(k, min(len(todo[j]), chunk), s.IDs)
		}
	}
	err := parallel.Run(ctx, w, len(items), func(wk, it int) {
		qi := items[it]
		rows := todo[qi.q][qi.from:min(qi.from+chunk, len(todo[qi.q]))]
		q := qqs[qi.q].q
		buf := make([]float32, 64)
		t := &tops[wk][qi.q]
		for a := 0; a < len(rows); {
			// A run of consecutive rows is one kernel call.
			b := a + 1
			for b < len(rows) && rows[b] == rows[b-1]+1 && b-a < len(buf) {
				b++
			}
			r0, n := rows[a], b-a
			fallback.ScoreRun(buf[:n], s, q, r0, m)
			topk.ToKeys(m, buf[:n])
			for i := range n {
				t.Offer(r0+i, buf[i])
			}
			a = b
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([][]core.Hit, len(qqs))
	for j := range out {
		for i := 1; i < w; i++ {
			tops[0][j].Merge(&tops[i][j])
		}
		out[j] = tops[0][j].Result(m)
	}
	return out, nil
}

// ExactRange is Range over compressed rows: every row whose float32 score
// is within threshold, with its float32 score, as Range returns them. Rows
// whose upper bound cannot reach the threshold are skipped; the others are
// rescored (the result needs their float32 scores).
func ExactRange(ctx context.Context, s fallback.Slab, c *Compressed, q []float32, threshold float32, m core.Metric, workers int) (hits []core.Hit, st QuantStats, err error) {
	defer parallel.Recover(&err)
	qp, err := fallback.CheckQuery(s, q, m)
	if err != nil {
		return nil, st, err
	}
	if err := c.check(s); err != nil {
		return nil, st, err
	}
	st.Queries = 1
	if s.Rows == 0 {
		return []core.Hit{}, st, nil
	}
	qq := newQuantQuery(c, qp, m)
	limit := topk.Key(m, threshold)
	per := c.Stride
	if c.Prec == core.F16 {
		per *= 2
	}
	blockRows := max(8, quantBlockBytes/max(per, 1)/4*4)
	nblocks := (s.Rows + blockRows - 1) / blockRows
	w := parallel.Workers(workers, nblocks, s.Rows*c.Stride)
	found := make([][]int, w)
	ks := activeQuant.Load()
	err = parallel.Run(ctx, w, nblocks, func(wk, b int) {
		lo := b * blockRows
		n := min(blockRows, s.Rows-lo)
		raw := make([]float64, n)
		if c.Prec == core.Int8 {
			buf := make([]int32, n)
			ks.i8Rows(buf, qq.q8, c.U8[lo*c.Stride:(lo+n)*c.Stride], c.Stride)
			for i, v := range buf {
				raw[i] = float64(v)
			}
		} else {
			buf := make([]float32, n)
			ks.f16Rows(buf, qq.qf, c.F16[lo*c.Stride:(lo+n)*c.Stride], c.Stride)
			for i, v := range buf {
				raw[i] = float64(v)
			}
		}
		found[wk] = rangeCandidates(qq, c, raw, lo, s.Allow, limit, found[wk])
	})
	if err != nil {
		return nil, st, err
	}
	var rows []int
	for _, f := range found {
		rows = append(rows, f...)
	}
	slices.Sort(rows)
	hits, err = rescoreWithin(ctx, s, c, qq, rows, limit, m, workers, &st)
	return hits, st, err
}

// rangeCandidates appends to dst the allowed rows base+i whose upper bound
// on raw sum raw[i] can reach limit (a key): a range search's rows to
// rescore.
func rangeCandidates(qq *quantQuery, c *Compressed, raw []float64, base int, allow []uint64, limit float32, dst []int) []int {
	for i, r := range raw {
		if !topk.Allows(allow, base+i) {
			continue
		}
		if _, hi, _ := qq.keyBounds(c, base+i, r); hi >= limit {
			dst = append(dst, base+i)
		}
	}
	return dst
}

// rescoreWithin rescores a range search's candidate rows (in order) in
// float32 and keeps those whose key reaches limit, counting the rescore
// in st.
func rescoreWithin(ctx context.Context, s fallback.Slab, c *Compressed, qq *quantQuery, rows []int, limit float32, m core.Metric, workers int, st *QuantStats) ([]core.Hit, error) {
	st.Rescored, st.MaxRescored = int64(len(rows)), len(rows)
	st.BytesRead = c.Bytes() + int64(len(rows))*int64(s.Stride)*4
	// Rescore them all (k = every candidate), then keep those within.
	res, err := rescore(ctx, s, []*quantQuery{qq}, [][]int{rows}, len(rows), m, workers)
	if err != nil {
		return nil, err
	}
	hits := []core.Hit{}
	for _, h := range res[0] {
		if topk.Key(m, h.Score) >= limit {
			hits = append(hits, h)
		}
	}
	return hits, nil
}
