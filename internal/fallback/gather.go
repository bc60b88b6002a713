package fallback

import (
	"context"
	"fmt"

	"github.com/umbravec/umbra/internal/parallel"
	"github.com/umbravec/umbra/internal/topk"
)

// A filtered search that admits few rows need not read the others. The
// gather searches below take the admitted rows as a list and score only
// them, with the kernels Search scores them with (a gather kernel runs the
// one-row kernel's loop and tree on each listed row), so every score is the
// bits Search gives that row, and select with the same heap and tie rule:
// their answer is Search's with s.Allow holding exactly the listed rows.

// gatherBytes sizes a block of listed rows: a unit of work small enough to
// balance two workers over a few hundred rows and to check ctx often.
const gatherBytes = 64 << 10

// ErrRows reports a row list a gather search cannot take: not strictly
// increasing, or naming a row the slab does not hold.
var ErrRows = fmt.Errorf("fallback: row list is not strictly increasing within the slab")

// CheckRows checks that rows is strictly increasing and below s.Rows.
func CheckRows(s Slab, rows []uint32) error {
	for i, r := range rows {
		if int(r) >= s.Rows || i > 0 && r <= rows[i-1] {
			return fmt.Errorf("%w: entry %d is row %d (of %d rows)", ErrRows, i, r, s.Rows)
		}
	}
	return nil
}

// SearchRows returns the k best of the listed rows of s for q, best
// first, equal scores broken by the lower ID as in Search: exactly what
// Search returns when s.Allow admits these rows and no others, at the cost
// of reading only them. rows is strictly increasing (CheckRows); s.Allow
// is not consulted.
func SearchRows(ctx context.Context, s Slab, rows []uint32, q []float32, k int, m Metric, workers int) (hits []Hit, err error) {
	defer parallel.Recover(&err)
	qq, err := CheckQuery(s, q, m)
	if err != nil {
		return nil, err
	}
	if err := CheckRows(s, rows); err != nil {
		return nil, err
	}
	return searchRows(ctx, s, rows, qq, k, m, workers)
}

func searchRows(ctx context.Context, s Slab, rows []uint32, qq []float32, k int, m Metric, workers int) ([]Hit, error) {
	if len(rows) == 0 || k <= 0 {
		return []Hit{}, nil
	}
	var tops []topk.Heap
	err := gatherKeys(ctx, s, rows, qq, m, workers, func(w, expect int) {
		tops = make([]topk.Heap, w)
		for i := range tops {
			tops[i] = topk.New(min(k, len(rows)), expect, s.IDs)
		}
	}, func(wk int, part []uint32, keys []float32) {
		t := &tops[wk]
		for i, key := range keys {
			t.Offer(int(part[i]), key)
		}
	})
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(tops); i++ {
		tops[0].Merge(&tops[i])
	}
	return tops[0].Result(m), nil
}

// SearchRowsBatch is SearchRows for every query of qs: the listed rows
// are few, so each query gathers them again (from cache, after the first).
func SearchRowsBatch(ctx context.Context, s Slab, rows []uint32, qs [][]float32, k int, m Metric, workers int) (out [][]Hit, err error) {
	defer parallel.Recover(&err)
	if err := s.Check(m); err != nil {
		return nil, err
	}
	if err := CheckRows(s, rows); err != nil {
		return nil, err
	}
	out = make([][]Hit, len(qs))
	for j, q := range qs {
		qq, err := s.query(q)
		if err != nil {
			return nil, fmt.Errorf("query %d: %w", j, err)
		}
		if out[j], err = searchRows(ctx, s, rows, qq, k, m, workers); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RangeRows is Range over the listed rows only: every listed row whose
// score for q is within threshold, best first, ties by the lower ID.
func RangeRows(ctx context.Context, s Slab, rows []uint32, q []float32, threshold float32, m Metric, workers int) (hits []Hit, err error) {
	defer parallel.Recover(&err)
	qq, err := CheckQuery(s, q, m)
	if err != nil {
		return nil, err
	}
	if err := CheckRows(s, rows); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return []Hit{}, nil
	}
	var found [][]Hit
	limit := topk.Key(m, threshold)
	err = gatherKeys(ctx, s, rows, qq, m, workers, func(w, _ int) { found = make([][]Hit, w) }, func(wk int, part []uint32, keys []float32) {
		for i, key := range keys {
			if key >= limit { // false for NaN
				found[wk] = append(found[wk], Hit{Row: int(part[i]), Score: key})
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

// ScoreRows writes the scores of the listed rows of s for the Stride-long
// query q (CheckQuery's) into dst, len(dst) == len(rows), with the gather
// kernel: the bits Search and ScoreRun give those rows. rows is strictly
// increasing and below s.Rows.
func ScoreRows(dst []float32, s Slab, rows []uint32, q []float32, m Metric) {
	rows = rows[:len(dst)]
	if n := len(rows); n > 0 && lacksPadding(s) && int(rows[n-1]) == s.Rows-1 {
		ScoreRun(dst[n-1:], s, q, s.Rows-1, m)
		dst, rows = dst[:n-1], rows[:n-1]
	}
	if len(rows) > 0 {
		active.gather(m)(dst, q, s.Data, rows, s.Stride)
	}
}

// lacksPadding reports whether the slab's last row omits its padding.
func lacksPadding(s Slab) bool { return s.Stride > 0 && s.Rows > len(s.Data)/s.Stride }

// gatherKeys scores the listed rows of s for the Stride-long query qq, a
// block of them at a time on parallel workers, and hands each block's rows
// and keys (larger is better) to use with the worker's number. setup runs
// first with the number of workers and the rows each can expect.
func gatherKeys(ctx context.Context, s Slab, rows []uint32, qq []float32, m Metric, workers int, setup func(w, expect int), use func(wk int, part []uint32, keys []float32)) error {
	per := max(16, gatherBytes/(4*max(s.Stride, 1)))
	nblocks := (len(rows) + per - 1) / per
	w := parallel.Workers(workers, nblocks, len(rows)*s.Stride)
	bufs := make([][]float32, w)
	for i := range bufs {
		bufs[i] = make([]float32, per)
	}
	setup(w, len(rows)/w+per)
	return parallel.RunShares(ctx, w, nblocks, func(wk, b int) {
		part := rows[b*per : min((b+1)*per, len(rows))]
		buf := bufs[wk][:len(part)]
		ScoreRows(buf, s, part, qq, m)
		topk.ToKeys(m, buf)
		use(wk, part, buf)
	})
}
