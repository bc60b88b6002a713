package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/packed"
)

// validate checks a Config's precision against its dimension and device.
func (c Config) validatePrecision() error {
	switch c.Precision {
	case umbra.F32:
		return nil
	case umbra.F16, umbra.Int8:
	default:
		return fmt.Errorf("%w: unknown precision %d", umbra.ErrInvalidConfig, c.Precision)
	}
	if c.Dim > exact.MaxQuantDim {
		return fmt.Errorf("%w: precision %v takes dimensions up to %d, got %d", umbra.ErrInvalidConfig, c.Precision, exact.MaxQuantDim, c.Dim)
	}
	return nil
}

// codeWords is how many 4-byte words one compressed row of dimension dim
// takes on a device under p.
func codeWords(p umbra.Precision, dim int) int {
	s := exact.CodeStride(p, dim)
	if p == umbra.Int8 {
		return s / 4
	}
	return s / 2
}

// quantRows is an index's compressed copy of its slab (nil under F32),
// kept row for row in step with it by the hooks below. The caller of each
// holds ix.mu for writing.
type quantRows struct {
	c *exact.Compressed
}

func newQuantRows(cfg Config) quantRows {
	if cfg.Precision == umbra.F32 {
		return quantRows{}
	}
	c, err := exact.NewCompressed(cfg.Precision, cfg.Dim)
	if err != nil {
		panic(err) // validate has refused such a Config
	}
	c.Workers = cfg.Workers // a large write compresses on as many goroutines as it packs on
	return quantRows{c: c}
}

// sync compresses the slab rows the compressed copy lacks. The caller
// holds wmu and ix.mu, or has the index to itself (Open).
func (q *quantRows) sync(s *packed.Slab) {
	if q.c == nil {
		return
	}
	if q.c.Rows > s.Rows {
		q.c.Truncate(s.Rows)
	}
	if q.c.Rows < s.Rows {
		old := *q.c
		q.c.AppendSlab(fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride}, q.c.Rows)
		exact.ReleaseCodes(&old, q.c)
	}
}

// quantStage is a compressed append staged beside the published rows
// (see appended in append.go): a copy of the compressed slab's header whose
// storage is shared up to the published rows, with the new rows after
// them (or a new array when there was no room). Searches read only the
// published rows, so staging needs no lock.
type quantStage struct {
	c  exact.Compressed
	ok bool
}

// stage compresses the rows of s from row old on beside the published
// compressed rows.
func (q *quantRows) stage(s *packed.Slab, old int) quantStage {
	if q.c == nil {
		return quantStage{}
	}
	c := *q.c
	c.Truncate(old)
	c.AppendSlab(fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride}, old)
	return quantStage{c: c, ok: true}
}

// codes is the staged compressed rows (nil under F32).
func (st *quantStage) codes() *exact.Compressed {
	if !st.ok {
		return nil
	}
	return &st.c
}

// publish makes a staged append visible; the caller holds ix.mu.
func (q *quantRows) publish(st quantStage) {
	if q.c != nil && st.ok {
		old := *q.c
		*q.c = st.c
		exact.ReleaseCodes(&old, q.c) // the caller holds wmu and ix.mu: nothing reads them
	}
}

// bytesFor is what the compressed copy of rows rows takes in memory.
func (q *quantRows) bytesFor(rows int) int64 {
	if q.c == nil {
		return 0
	}
	return exact.CompressedBytes(q.c.Prec, q.c.Dim, rows)
}

// set compresses slab row i again after it was replaced.
func (q *quantRows) set(s *packed.Slab, i int) {
	if q.c != nil && i < q.c.Rows {
		q.c.Set(i, s.Row(i))
	}
}

// forSlab returns a compressed copy of a whole new slab (compaction builds
// one beside the live index).
func (q *quantRows) forSlab(s *packed.Slab) quantRows {
	if q.c == nil {
		return quantRows{}
	}
	c, _ := exact.NewCompressed(q.c.Prec, s.Dim)
	c.Workers = q.c.Workers
	c.AppendSlab(fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride}, 0)
	return quantRows{c: c}
}

// searchQuant is searchMany for an index of a compressed precision: the
// compressed rows are scanned (on the GPU, or by the CPU kernels) and the
// candidates rescored in float32 on the host. Under Device Auto a GPU
// failure moves this and later searches to the CPU. The caller holds
// ix.mu.
func (ix *Index) searchQuant(ctx context.Context, qs [][]float32, k int, mask []uint64, approximate bool) ([][]umbra.Hit, error) {
	t := traceFrom(ctx)
	if err := ix.checkStale(); err != nil {
		return nil, err
	}
	if ix.slab.Rows > 0 && ix.onGPU() && (ix.route == nil || preferGPU(ix.route, ix.quant.c.Bytes(), len(qs))) {
		all, err := ix.searchQuantGPU(ctx, qs, k, mask, approximate)
		if err == nil {
			return all, nil
		}
		var host hostError
		if errors.As(err, &host) {
			return nil, host.err
		}
		if err := ix.afterGPUFailure(ctx, err); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	view := ix.view()
	view.Allow = mask
	res, st, err := exact.ExactSearchBatch(ctx, view, ix.quant.c, qs, k, ix.cfg.Metric, ix.cfg.Workers, approximate)
	if err != nil {
		return nil, err
	}
	addQuant(t, st, start)
	all := make([][]umbra.Hit, len(res))
	for i, r := range res {
		all[i] = ix.toHits(r)
	}
	return all, nil
}

// sumsPieceBytes bounds the device sums a compressed GPU search holds at
// once: a batch is searched sumsPieceBytes/(4·rows) queries at a time (at
// least one), so a large batch over many rows never holds 4 bytes per row
// for every query.
const sumsPieceBytes = 64 << 20

// hostError marks an error of the host's share of a GPU search (not the
// device's), which must not move the index off the GPU.
type hostError struct{ err error }

func (e hostError) Error() string { return e.err.Error() }

// searchQuantGPU is searchQuant on the device: its candidates selected on
// the device where that pays and fits (searchQuantSelect), else its sums,
// a piece of the batch at a time (searchQuantSums). The caller holds
// ix.mu.
func (ix *Index) searchQuantGPU(ctx context.Context, qs [][]float32, k int, mask []uint64, approximate bool) ([][]umbra.Hit, error) {
	if !approximate {
		if all, done, err := ix.searchQuantSelect(ctx, qs, k, mask); done {
			return all, err
		}
	}
	return ix.searchQuantSums(ctx, qs, k, mask, approximate)
}

// searchQuantSums is searchQuant on the device's sums, a piece of the batch
// at a time (sumsPieceBytes). The caller holds ix.mu.
func (ix *Index) searchQuantSums(ctx context.Context, qs [][]float32, k int, mask []uint64, approximate bool) ([][]umbra.Hit, error) {
	t := traceFrom(ctx)
	rows := ix.deviceRows(ix.slab.Rows)
	pieceBytes := sumsPieceBytes
	if ix.test != nil && ix.test.sumsPieceBytes > 0 {
		pieceBytes = ix.test.sumsPieceBytes
	}
	piece := max(1, pieceBytes/(4*max(rows, 1)))
	view := ix.view()
	view.Allow = mask
	all := make([][]umbra.Hit, 0, len(qs))
	for lo := 0; lo < len(qs); lo += piece {
		part := qs[lo:min(lo+piece, len(qs))]
		sums, scans, err := ix.deviceSums(ctx, part)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		d := exact.DeviceSums{Sums: sums, Rows: rows}
		res, st, err := exact.ExactSearchSums(ctx, view, ix.quant.c, part, d, scans, k, ix.cfg.Metric, ix.cfg.Workers, approximate)
		if err != nil {
			return nil, hostError{err}
		}
		addQuantGPU(t, st, start)
		for _, r := range res {
			all = append(all, ix.toHits(r))
		}
	}
	return all, nil
}

// deviceSums returns the device's raw sums of its compressed rows for the
// prepared queries qs, and how many passes over the codes that took. The
// caller holds ix.mu.
func (ix *Index) deviceSums(ctx context.Context, qs [][]float32) ([]float32, int, error) {
	t := traceFrom(ctx)
	dq := make([][]float32, len(qs))
	for j, q := range qs {
		dq[j] = exact.DeviceQuery(ix.quant.c, q)
	}
	var st *core.Stages
	if t != nil {
		st = &core.Stages{}
	}
	sums, scans, err := ix.dev.Sums(ctx, dq, ix.deviceRows(ix.slab.Rows), st)
	addStages(t, st)
	return sums, scans, gpuError(err)
}

// rangeQuant is SearchRange's scan for an index of a compressed precision,
// on the GPU's sums where it can (a GPU failure under Auto moves it to the
// CPU as searchQuant does). The caller holds ix.mu.
func (ix *Index) rangeQuant(ctx context.Context, q []float32, threshold float32, mask []uint64) ([]core.Hit, error) {
	t := traceFrom(ctx)
	view := ix.view()
	view.Allow = mask
	if ix.onGPU() && !ix.stale {
		found, done, err := ix.rangeQuantSelect(ctx, q, threshold, mask)
		if done && err == nil {
			return found, nil
		}
		var host hostError
		if done && errors.As(err, &host) {
			return nil, host.err
		}
		if !done {
			var sums []float32
			sums, _, err = ix.deviceSums(ctx, [][]float32{q})
			if err == nil {
				start := time.Now()
				d := exact.DeviceSums{Sums: sums, Rows: ix.deviceRows(ix.slab.Rows)}
				found, st, err := exact.ExactRangeSums(ctx, view, ix.quant.c, q, d, threshold, ix.cfg.Metric, ix.cfg.Workers)
				if err != nil {
					return nil, err
				}
				addQuantGPU(t, st, start)
				return found, nil
			}
		}
		if err := ix.afterGPUFailure(ctx, err); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	found, st, err := exact.ExactRange(ctx, view, ix.quant.c, q, threshold, ix.cfg.Metric, ix.cfg.Workers)
	if err != nil {
		return nil, err
	}
	addQuant(t, st, start)
	return found, nil
}

// addQuant records a compressed search's scan in t (nil: nothing).
func addQuant(t *diag.Trace, st exact.QuantStats, start time.Time) {
	if t == nil {
		return
	}
	lap(&t.Kernel, start)
	t.KernelClock, t.Device = "cpu", "cpu"
	t.Searches += st.Queries
	t.Rescored += st.Rescored
	t.MaxRescored = max(t.MaxRescored, st.MaxRescored)
	t.BytesRead += st.BytesRead
}

// addQuantGPU records in t (nil: nothing) the host's share of a
// compressed search on the GPU: bounding the device's sums and the float32
// rescore (as Select), and the scan's cost.
func addQuantGPU(t *diag.Trace, st exact.QuantStats, start time.Time) {
	if t == nil {
		return
	}
	lap(&t.Select, start)
	t.Device = "gpu"
	t.Searches += st.Queries
	t.Rescored += st.Rescored
	t.MaxRescored = max(t.MaxRescored, st.MaxRescored)
	t.BytesRead += st.BytesRead
}

// addScan records a float32 scan of s for nq queries in t: the slab is read
// once per block of queries.
func addScan(t *diag.Trace, nq int, s *packed.Slab) {
	qb := fallback.QueryBlock(s.Stride)
	t.Searches += nq
	t.BytesRead += int64(s.Bytes()) * int64((nq+qb-1)/qb)
}
