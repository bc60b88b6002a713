package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/packed"
)

// Search returns the k stored vectors most similar to query, best first;
// equal scores are ordered by lower ID. k larger than Len returns every
// vector (there is no other cap on k); an empty index returns no hits.
// Allow and AllowFunc restrict it to a subset, exactly. Searches from many
// goroutines at once are coalesced into batches (see Config.Coalesce);
// each still gets exactly its own answer, and its ctx cancels only it.
func (ix *Index) Search(ctx context.Context, query []float32, k int, opts ...umbra.SearchOption) (hits []umbra.Hit, err error) {
	o, err := collect("Search", opts)
	if err != nil {
		return nil, err
	}
	if ix.coalesce(ctx, &o) {
		return ix.searchCoalesced(ctx, query, k)
	}
	all, err := ix.searchBatch(ctx, [][]float32{query}, k, true, opts)
	if err != nil {
		return nil, err
	}
	return all[0], nil
}

// SearchBatch runs Search for every query. All queries are validated before
// any is searched.
func (ix *Index) SearchBatch(ctx context.Context, queries [][]float32, k int, opts ...umbra.SearchOption) (all [][]umbra.Hit, err error) {
	return ix.searchBatch(ctx, queries, k, false, opts)
}

// searchBatch is SearchBatch; single names the query "query" in errors,
// as Search's only one.
func (ix *Index) searchBatch(ctx context.Context, queries [][]float32, k int, single bool, opts []umbra.SearchOption) (all [][]umbra.Hit, err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	verb := "SearchBatch"
	if single {
		verb = "Search"
	}
	o, err := collect(verb, opts)
	if err != nil {
		return nil, err
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if k <= 0 {
		return nil, fmt.Errorf("%w: got k=%d", umbra.ErrInvalidK, k)
	}
	qs := make([][]float32, len(queries))
	for i, query := range queries {
		what := input{"query", i}
		if single {
			what.index = -1
		}
		if qs[i], err = ix.prepare(ctx, query, what); err != nil {
			return nil, err
		}
	}
	if err := ix.mapped.check(); err != nil {
		return nil, err
	}
	filterStart := time.Now()
	rm, err := ix.mask(&o)
	if err != nil {
		return nil, err
	}
	defer rm.release()
	mask := rm.bits
	rows, at := ix.subsetRows(ctx, rm, o.filtered(), len(qs))
	if t := traceFrom(ctx); t != nil && o.filtered() {
		lap(&t.Filter, filterStart)
	}
	if at != scanAll {
		all, err = ix.searchGather(ctx, qs, k, rows, at, o.approximate)
	} else if ix.quant.c != nil {
		all, err = ix.searchQuant(ctx, qs, k, mask, o.approximate)
	} else {
		all, err = ix.searchMany(ctx, qs, k, mask, o.filtered())
	}
	if err == nil && o.payload {
		ix.withPayloads(all)
	}
	return ix.mappedAnswer(all, err)
}

// prepare validates a query and returns it normalised (for Cosine) and
// padded to the slab stride. The caller holds ix.mu.
func (ix *Index) prepare(ctx context.Context, query []float32, what input) ([]float32, error) {
	if ix.closed {
		return nil, umbra.ErrClosed
	}
	if err := ix.checkVector(query, what); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ix.cfg.Metric == umbra.Cosine {
		return packed.Normalized(query, ix.slab.Stride), nil
	}
	return packed.Padded(query, ix.slab.Stride), nil
}

// searchMany runs prepared queries on the GPU (top-k selected on the
// device) or on the fallback (rows read once per block of queries). Under
// Device Auto a GPU failure moves this and later searches to the fallback.
// mask (nil: every row) says which rows may be returned. The caller holds
// ix.mu.
//
// filtered says mask holds a caller's filter; without one, a GPU search
// leaves out deleted rows by the device's resident tombstones and sends no
// bitmap.
func (ix *Index) searchMany(ctx context.Context, qs [][]float32, k int, mask []uint64, filtered bool) ([][]umbra.Hit, error) {
	if ix.quant.c != nil {
		return ix.searchQuant(ctx, qs, k, mask, false)
	}
	all := make([][]umbra.Hit, len(qs))
	t := traceFrom(ctx)
	if ix.slab.Rows == 0 {
		for i := range all {
			all[i] = []umbra.Hit{}
		}
		return all, nil
	}
	if len(qs) > progressQueries {
		if p, ok := ctx.Value(progressKey{}).(progress); ok && p != nil {
			return ix.searchInPieces(ctx, qs, k, mask, filtered)
		}
	}
	if err := ix.checkStale(); err != nil {
		return nil, err
	}
	if ix.onGPU() && (ix.route == nil || preferGPU(ix.route, int64(ix.slab.Bytes()), len(qs))) {
		var st *core.Stages
		if t != nil {
			st = &core.Stages{}
		}
		var res [][]core.Hit
		var err error
		if ix.overflowing() {
			res, err = ix.searchSplit(ctx, qs, k, mask, st)
		} else {
			devMask := mask
			if !filtered {
				devMask = nil // the device's tombstones leave out deleted rows
			}
			res, err = ix.deviceTopK(ctx, qs, k, ix.slab.Rows, devMask, st)
		}
		addStages(t, st)
		err = gpuError(err)
		if err == nil {
			if t != nil {
				// The device's passes over the rows, as addScan counts the
				// CPU's (a compressed index's are in its QuantStats, so
				// addStages leaves BytesRead out).
				t.Device = "gpu"
				t.Searches += len(qs)
				t.BytesRead += st.BytesRead
			}
			for i, r := range res {
				all[i] = ix.toHits(r)
			}
			return all, nil
		}
		if !errors.Is(err, gpu.ErrSubnormal) {
			if err := ix.afterGPUFailure(ctx, err); err != nil {
				return nil, err
			}
		}
		// A search whose scores a device that flushes subnormals could
		// change (gpu.ErrSubnormal, nothing failed) is scored on the CPU.
	}
	start := time.Now()
	view := ix.view()
	view.Allow = mask
	var res [][]core.Hit
	var err error
	if len(qs) == 1 {
		var one []core.Hit
		one, err = fallback.Search(ctx, view, qs[0], k, ix.cfg.Metric, ix.cfg.Workers)
		res = [][]core.Hit{one}
	} else {
		res, err = fallback.SearchBatch(ctx, view, qs, k, ix.cfg.Metric, ix.cfg.Workers)
	}
	if err != nil {
		return nil, err
	}
	if t != nil {
		lap(&t.Kernel, start)
		t.KernelClock, t.Device = "cpu", "cpu"
		addScan(t, len(qs), ix.slab)
	}
	for i, r := range res {
		all[i] = ix.toHits(r)
	}
	return all, nil
}

// searchInPieces runs a large batch progressQueries at a time so a
// Progress can be told how far it has got. Each piece still reads a row once
// per tile of queries, so the split costs one pass over the slab per piece.
// The caller holds ix.mu.
func (ix *Index) searchInPieces(ctx context.Context, qs [][]float32, k int, mask []uint64, filtered bool) ([][]umbra.Hit, error) {
	report := progressFrom(ctx)
	quiet := context.WithValue(ctx, progressKey{}, progress(nil))
	all := make([][]umbra.Hit, 0, len(qs))
	for lo := 0; lo < len(qs); lo += progressQueries {
		part, err := ix.searchMany(quiet, qs[lo:min(lo+progressQueries, len(qs))], k, mask, filtered)
		if err != nil {
			return nil, err
		}
		all = append(all, part...)
		report("search", len(all), len(qs))
	}
	return all, nil
}

// view is the fallback's view of the slab, naming the rows' IDs when they
// do not increase with the row (ties go to the lower ID; ties.go). The
// caller holds ix.mu.
func (ix *Index) view() fallback.Slab {
	s := ix.slab
	return fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride, IDs: ix.rid.tieIDs()}
}

// toHits turns rows into the caller's IDs, with their keys. The caller
// holds ix.mu.
func (ix *Index) toHits(r []core.Hit) []umbra.Hit {
	hits := make([]umbra.Hit, len(r))
	for i, h := range r {
		id := ix.rid.ids[h.Row]
		hits[i] = umbra.Hit{ID: id, Score: h.Score, Key: ix.keys.key[id]}
	}
	return hits
}

// SearchRange returns every stored vector whose score for query is within
// threshold — at least threshold under Cosine and Dot, at most threshold
// (a squared distance) under L2 — best first, equal scores by lower ID.
// There is no cap on how many unless MaxHits gives one; Allow and
// AllowFunc restrict it to a subset.
func (ix *Index) SearchRange(ctx context.Context, query []float32, threshold float32, opts ...umbra.SearchOption) (hits []umbra.Hit, err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	o, err := collect("SearchRange", opts)
	if err != nil {
		return nil, err
	}
	if math.IsNaN(float64(threshold)) {
		return nil, fmt.Errorf("%w: the threshold is NaN", umbra.ErrNonFinite)
	}
	if o.maxHits < 0 {
		return nil, fmt.Errorf("%w: MaxHits(%d)", umbra.ErrInvalidK, o.maxHits)
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	q, err := ix.prepare(ctx, query, input{"query", -1})
	if err != nil {
		return nil, err
	}
	if err := ix.mapped.check(); err != nil {
		return nil, err
	}
	filterStart := time.Now()
	rm, err := ix.mask(&o)
	if err != nil {
		return nil, err
	}
	defer rm.release()
	mask, allowed := rm.bits, rm.n
	if t := traceFrom(ctx); t != nil && o.filtered() {
		lap(&t.Filter, filterStart)
	}
	if ix.slab.Rows == 0 || allowed == 0 {
		return []umbra.Hit{}, nil
	}
	var found []core.Hit
	if err := ix.checkStale(); err != nil {
		return nil, err
	}
	if ix.quant.c != nil {
		if found, err = ix.rangeQuant(ctx, q, threshold, mask); err != nil {
			return nil, err
		}
	}
	if found == nil && ix.onGPU() && !ix.stale {
		// The device scores every row; the host keeps those within the
		// threshold (4 bytes a row come back, as for a k = Len search).
		found, err = ix.rangeSplit(ctx, q, threshold, mask)
		if err = gpuError(err); err != nil {
			found = nil
			if errors.Is(err, gpu.ErrSubnormal) {
				err = nil // the CPU scores it, below
			} else if err := ix.afterGPUFailure(ctx, err); err != nil {
				return nil, err
			}
		}
	}
	if found == nil {
		view := ix.view()
		view.Allow = mask
		if rows, at := ix.subsetRows(ctx, rm, o.filtered(), 1); at != scanAll {
			// (On the CPU even for a GPU index: its device did not serve
			// this range search.)
			found, err = fallback.RangeRows(ctx, view, rows, q, threshold, ix.cfg.Metric, ix.cfg.Workers)
		} else {
			found, err = fallback.Range(ctx, view, q, threshold, ix.cfg.Metric, ix.cfg.Workers)
		}
		if err != nil {
			return nil, err
		}
	}
	if o.maxHits > 0 && len(found) > o.maxHits {
		found = found[:o.maxHits]
	}
	if err := ix.mapped.check(); err != nil {
		return nil, err
	}
	hits = ix.toHits(found)
	if o.payload {
		ix.withPayloads([][]umbra.Hit{hits})
	}
	return hits, nil
}

// gpuSearch is the device's Search of prepared queries, in pieces (see
// gpuPiece). The caller holds ix.mu.
func (ix *Index) gpuSearch(ctx context.Context, qs [][]float32, k, rows int, mask []uint64, st *core.Stages) ([][]core.Hit, error) {
	if len(qs) <= gpuFirstPiece {
		return ix.dev.Search(ctx, qs, k, rows, mask, st)
	}
	out := make([][]core.Hit, 0, len(qs))
	for lo, n := 0, gpuFirstPiece; lo < len(qs); {
		hi := min(lo+n, len(qs))
		start := time.Now()
		part, err := ix.dev.Search(ctx, qs[lo:hi], k, rows, mask, st)
		if err != nil {
			return nil, err
		}
		out, lo = append(out, part...), hi
		if err := ctx.Err(); err != nil && lo < len(qs) {
			return nil, err
		}
		if time.Since(start) < gpuPiece/2 {
			n *= 2
		}
	}
	return out, nil
}

// gpuPiece bounds how long one device submission of a batch runs: a
// submitted pass cannot be interrupted, so a batch is sent in pieces,
// starting at gpuFirstPiece queries and doubling while a piece takes less
// than half of gpuPiece, and ctx is checked between them. A cancelled batch
// returns within about one piece; on a fast GPU the pieces soon hold the
// whole batch. The first piece is a whole tile of gemm.wgsl's (and so of
// scores.wgsl's), so every piece but the last fills its tiles and reads
// the rows no more often than one submission of the batch would.
const (
	gpuPiece      = 50 * time.Millisecond
	gpuFirstPiece = gpu.GemmTile
)
