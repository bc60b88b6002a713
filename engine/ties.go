package engine

import (
	"context"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/topk"
)

// Ties: every search ranks equal scores (one ordering key: -0 == +0, NaN
// worse than every number) by lower ID, topk.Worse's rule, so which
// ID a tie at rank k returns does not depend on where the rows sit. Rows
// are the device's and the slab's coordinates, IDs live on the host:
//
//   - The fallback ranks by ID itself, in its one pass (Slab.IDs, set by
//     view and hostPart).
//   - A device (one adapter, shards, an isolated child) ranks by row and
//     returns the exact top k' for any k'. deviceTopK asks it for one hit
//     more than k: when that hit's score is not the k-th's, no row tied
//     with the k-th was left out, and only the equal-score runs inside
//     the answer are put in ID order (topk.Rerank). When it is, the
//     tie crosses the boundary, and deviceTopK asks again for twice as
//     many until the last hit is strictly worse than the k-th or every
//     row came back.
//   - Merges of partial answers (overflow's device and host parts) merge
//     by score, then ID.
//
// While the IDs increase with the row (every ID Add assigned, or given in
// increasing order) the row order is the ID order: then nothing of this
// runs and every path works by row as before (rowIDs.tieIDs is nil).

// deviceTopK is gpuSearch with equal scores ranked by lower ID: each
// query's k best of the device's first rows rows, exactly. The caller
// holds ix.mu.
func (ix *Index) deviceTopK(ctx context.Context, qs [][]float32, k, rows int, mask []uint64, st *core.Stages) ([][]core.Hit, error) {
	ids := ix.rid.tieIDs()
	if ids == nil {
		return ix.gpuSearch(ctx, qs, k, rows, mask, st)
	}
	m := ix.cfg.Metric
	ask := k
	if k < rows {
		ask = k + 1
	}
	res, err := ix.gpuSearch(ctx, qs, ask, rows, mask, st)
	if err != nil {
		return nil, err
	}
	var todo []int
	for i, r := range res {
		if tiedPast(r, k, ask, rows, m) {
			todo = append(todo, i)
		}
	}
	for len(todo) > 0 {
		ask = min(2*ask, rows)
		sub := make([][]float32, len(todo))
		for j, i := range todo {
			sub[j] = qs[i]
		}
		more, err := ix.gpuSearch(ctx, sub, ask, rows, mask, st)
		if err != nil {
			return nil, err
		}
		next := todo[:0]
		for j, i := range todo {
			res[i] = more[j]
			if tiedPast(more[j], k, ask, rows, m) {
				next = append(next, i)
			}
		}
		todo = next
	}
	for i, r := range res {
		topk.Rerank(r, m, ids)
		res[i] = r[:min(k, len(r))]
	}
	return res, nil
}

// tiedPast reports whether a device's answer r to a request for ask hits
// (ranked by score, then row) may have left out rows whose score is its
// k-th's: it came back full, short of every row, and its last hit's score
// is the k-th's.
func tiedPast(r []core.Hit, k, ask, rows int, m core.Metric) bool {
	return ask > k && ask < rows && len(r) == ask && topk.Tied(r[k-1].Score, r[ask-1].Score, m)
}
