//go:build cgo && !nogpu

package gpu

import (
	"cmp"
	"context"
	"fmt"
	"math"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/packed"
)

// verify self-tests every scoring variant the device may use and tunes
// among those that pass: first with the subgroup reduction where the device
// offers it, then, if no variant of that passes, with the workgroup-memory
// tree. A variant is never timed, let alone used, before it has given the
// right answers.
func (d *Device) verify() error {
	reductions := []bool{false}
	if d.subgroups {
		reductions = []bool{true, false}
	}
	var firstErr error
	for _, sub := range reductions {
		d.subgroups = sub
		var passed []variant
		for _, v := range tuneVariants() {
			d.team, d.staged = v.Team, v.Staged
			if err := d.selfTest(); err != nil {
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			passed = append(passed, v)
		}
		if len(passed) > 0 {
			d.tune(passed)
			d.verifyFused()
			d.verifyGemm()
			return nil
		}
	}
	return firstErr
}

// verifyFused self-tests the fused scan-and-select (topk.wgsl) with the
// variant tune chose, and enables it only if every check passes; a device
// whose fused path fails keeps the radix select for every k (fusedErr says
// why). It runs after tune, whose timings use no selection.
func (d *Device) verifyFused() {
	d.fused, d.fusedErr = true, nil
	for _, dim := range selfTestDims {
		for _, metric := range []core.Metric{core.Dot, core.L2} {
			if err := d.checkFused(dim, metric); err != nil {
				d.fused = false
				d.fusedErr = fmt.Errorf("fused self-test at dimension %d, metric %v, team %d: %w", dim, metric, d.team, err)
				return
			}
		}
	}
}

// checkFused runs the ranking checks through the fused path, with k at
// each plan's limit and small, single queries and batches, masked and not,
// over more than twice the largest k in rows so the device selects. (k = 1
// is the smallest plan's case of k below its limit, which 5 covers.)
func (d *Device) checkFused(dim int, metric core.Metric) error {
	g, err := newIndex(d, (dim+3)&^3, metric, 128)
	if err != nil {
		return err
	}
	rows, ks := gpuplan.FusedChecks(g.topkSingle, g.topkBatch)
	g.Release()
	// Each 128-row chunk is scanned by two workgroups, each looping over
	// several steps of rows and cutting its lists as they fill, and the
	// merge meets two lists a chunk (as many workgroups as planned would
	// be at most eight a chunk here, on a software adapter one or two:
	// the same code, fewer loops, so one pass checks both).
	return d.checkSearches(dim, metric, rows, ks, 2)
}

// selfTestDims are the dimensions the self-test checks: a short row (a team
// of 2 lanes, one vec4 each) and the common embedding width, where a row
// is split into parts over every team width the tuning may choose.
var selfTestDims = []int{7, 768}

// selfTest checks the device's current variant (team, reduction, staged
// batches) through the same code an index uses, for every metric, single
// queries and batches, top-k selected on the device and on the host: every
// score against float64, every ranking against a float64 ranking. It is
// what makes the probe prove the GPU works rather than that it exists.
func (d *Device) selfTest() error {
	for _, dim := range selfTestDims {
		for _, metric := range []core.Metric{core.Dot, core.L2} {
			if err := d.checkVariant(dim, metric); err != nil {
				return fmt.Errorf("self-test at dimension %d, metric %v, team %d, subgroups %v, staged %v: %w",
					dim, metric, d.team, d.subgroups, d.staged, err)
			}
		}
	}
	return nil
}

func (d *Device) checkVariant(dim int, metric core.Metric) error {
	// 300 rows span several workgroups and, at 128 rows a chunk, three
	// chunks; 8 queries fill one batch tile.
	return d.checkSearches(dim, metric, 300, []int{5}, -1)
}

// checkSearches checks scores and rankings on rows synthetic rows of dim,
// selecting each k of ks on the device and every row on the host, with and
// without an allow bitmap. fusedGroups < 0 checks the radix select (the
// fused path is not enabled yet); otherwise the fused path, which must be
// the one taken, with at most fusedGroups workgroups per chunk (0: as
// many as it plans).
func (d *Device) checkSearches(dim int, metric core.Metric, rows int, ks []int, fusedGroups int) error {
	fused := fusedGroups >= 0
	slab, qs, g, err := d.selfTestIndex(dim, metric, rows, batchQT)
	if err != nil {
		return err
	}
	defer g.Release()
	g.selfTest, g.fusedGroups = true, max(fusedGroups, 0)
	ctx := context.Background()
	exact := func(q []float32, row int) float64 { return gpuplan.ExactScore(slab.Row(row), q, metric) }
	tol := gpuplan.Tol
	got, err := g.scores(ctx, qs[0], rows)
	if err != nil {
		return err
	}
	for i, s := range got {
		if w := exact(qs[0], i); math.Abs(float64(s)-w) > tol(w) {
			return fmt.Errorf("%w: test dispatch gave score %g for row %d, want %g", ErrFailed, s, i, w)
		}
	}
	// Top k selected on the device (one query, then a batch), and every row
	// ranked on the host from read-back scores (k = rows); then the same
	// with an allow bitmap admitting every third row.
	for _, c := range gpuplan.Cases(qs, ks, rows, fused) {
		var st core.Stages
		hits, err := g.Search(ctx, c.Queries, c.K, rows, c.Mask, &st)
		if err != nil {
			return err
		}
		if _, ok := g.fusedPlan(c.K, len(c.Queries), false); fused && ok && 2*c.Want < rows && st.Path != "fused" {
			return fmt.Errorf("%w: test top-%d of %d queries took the %s path, not the fused one", ErrFailed, c.K, len(c.Queries), st.Path)
		}
		if len(hits) != len(c.Queries) {
			return fmt.Errorf("%w: test search returned %d lists for %d queries", ErrFailed, len(hits), len(c.Queries))
		}
		for qi, q := range c.Queries {
			ranked := gpuplan.Ranked(rows, c.Mask != nil, metric, func(i int) float64 { return exact(q, i) })
			for _, h := range hits[qi] {
				if c.Mask != nil && h.Row%3 != 0 {
					return fmt.Errorf("%w: test search with an allow bitmap returned row %d, which it excludes", ErrFailed, h.Row)
				}
			}
			if err := gpuplan.CheckRanking(hits[qi], c.Want, ranked, func(row int) float64 { return exact(q, row) }, tol); err != nil {
				return fmt.Errorf("%w: test top-%d of query %d of %d (masked %v): %v", ErrFailed, c.K, qi, len(c.Queries), c.Mask != nil, err)
			}
		}
	}
	return nil
}

// verifyGemm self-tests gemm.wgsl, the register-tiled batch kernel, with
// the variant tune chose, and lets batches take it only if every score it
// writes is the same bits as scores.wgsl's and a batch searched faster
// with it (tuneGemm). A device whose gemm fails keeps scores.wgsl's tiles
// (gemmErr says why).
func (d *Device) verifyGemm() {
	d.gemm, d.gemmErr = false, nil
	for _, dim := range selfTestDims {
		for _, metric := range []core.Metric{core.Dot, core.L2} {
			if err := d.checkGemm(dim, metric); err != nil {
				d.gemmErr = fmt.Errorf("gemm self-test at dimension %d, metric %v, team %d: %w", dim, metric, d.team, err)
				return
			}
		}
	}
	d.gemm = d.tuneGemm()
}

// checkGemm scores gemmChecks queries (a whole tile of gemm.wgsl's and a
// part of one) against 300 synthetic rows in 128-row chunks through
// gemm.wgsl, and compares every score with scores.wgsl's, bit for bit: the
// one summation order makes them equal, so any difference is a fault.
// (scores.wgsl passed selfTest against float64 before; its tiles give a
// single query's bits, TestScoreBitsOnEveryPath.)
func (d *Device) checkGemm(dim int, metric core.Metric) error {
	const rows = 300
	_, qs, g, err := d.selfTestIndex(dim, metric, rows, gemmChecks)
	if err != nil {
		return err
	}
	defer g.Release()
	ctx := context.Background()
	_, all, err := g.run(WithBatchKernel(ctx, BatchGemm), qs, submission{Rows: rows}, nil)
	if err != nil {
		return err
	}
	_, want, err := g.run(WithBatchKernel(ctx, BatchTile), qs, submission{Rows: rows}, nil)
	if err != nil {
		return err
	}
	for i, s := range want {
		if b := all[i]; math.Float32bits(b) != math.Float32bits(s) {
			return fmt.Errorf("%w: gemm gave score %g for query %d, row %d; scores.wgsl %g", ErrFailed, b, i/rows, i%rows, s)
		}
	}
	return nil
}

// gemmChecks is how many queries checkGemm scores at once: more than one
// tile of gemm.wgsl's at every team width, the last one partly filled.
const gemmChecks = 40

// selfTestIndex uploads rows synthetic rows of dim to a new index on d in
// 128-row chunks and returns them with nq synthetic queries (padded) drawn
// past them; the caller releases the index.
func (d *Device) selfTestIndex(dim int, metric core.Metric, rows, nq int) (*packed.Slab, [][]float32, *Index, error) {
	data := packed.Synthetic(rows+nq, dim)
	slab := packed.NewSlab(dim)
	flat := make([]float32, 0, rows*dim)
	for i := 0; i < rows; i++ {
		flat = append(flat, data.Row(i)...)
	}
	slab.AppendFlat(flat, false)
	qs := make([][]float32, nq)
	for i := range qs {
		qs[i] = data.PaddedRow(rows + i)
	}
	g, err := newIndex(d, slab.Stride, metric, 128)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := g.Upload(context.Background(), slab, 0, nil, nil); err != nil {
		g.Release()
		return nil, nil, nil, err
	}
	return slab, qs, g, nil
}
