//go:build js && wasm

package webgpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/packed"
)

// The checks here are what makes the probe prove the device works — the
// native backend's self-test (internal/gpu/selftest.go), run through this
// backend — and what the second-judge test runs for every variant on
// random data (Check*).

// selfTestDims are the dimensions checked: a short row and the common
// embedding width.
var selfTestDims = []int{7, 768}

// SelfTest checks the device's current variant on synthetic rows: every
// score against float64, every ranking (radix select, host selection,
// with and without an allow bitmap, single queries and batches), at the
// probe's dimensions and metrics (ProbeScope).
func (d *Device) SelfTest() error {
	for _, dim := range d.testDims() {
		for _, m := range d.testMetrics() {
			if err := d.CheckVariant(nil, dim, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// SelfTestFused checks the fused top-k with the current variant.
func (d *Device) SelfTestFused() error {
	for _, dim := range d.testDims() {
		for _, m := range d.testMetrics() {
			if err := d.CheckFused(nil, dim, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// rowsFor returns n rows of dim: random in [-1, 1) from r, or
// packed.Synthetic's when r is nil.
func rowsFor(r *rand.Rand, n, dim int) *packed.Slab {
	if r == nil {
		return packed.Synthetic(n, dim)
	}
	s := packed.NewSlab(dim)
	flat := make([]float32, n*dim)
	for i := range flat {
		flat[i] = 2*r.Float32() - 1
	}
	s.AppendFlat(flat, false)
	return s
}

// CheckVariant checks the current variant's scores and radix and host
// selections at dimension dim under metric m, on rows from r (nil:
// synthetic ones), across three 128-row chunks.
func (d *Device) CheckVariant(r *rand.Rand, dim int, m core.Metric) error {
	fused := d.fused
	d.fused = false
	defer func() { d.fused = fused }()
	if err := d.checkSearches(r, dim, m, 300, []int{5}, -1); err != nil {
		return fmt.Errorf("self-test at dimension %d, metric %v, %v: %w", dim, m, d.Variant(), err)
	}
	return nil
}

// CheckFused checks the fused scan-and-select with the current variant,
// k small and at each plan's limit, the scan looping over many steps (two
// workgroups a chunk).
func (d *Device) CheckFused(r *rand.Rand, dim int, m core.Metric) error {
	fused := d.fused
	d.fused = true
	defer func() { d.fused = fused }()
	g, err := d.NewIndex((dim+3)&^3, m, 128)
	if err != nil {
		return err
	}
	rows, ks := gpuplan.FusedChecks(g.topkSingle, g.topkBatch)
	g.Release()
	if err := d.checkSearches(r, dim, m, rows, ks, 2); err != nil {
		return fmt.Errorf("fused self-test at dimension %d, metric %v, %v: %w", dim, m, d.Variant(), err)
	}
	return nil
}

// checkSearches is internal/gpu's checkSearches: scores and rankings of
// rows rows, each k of ks selected on the device and every row on the
// host, with and without an allow bitmap; fusedGroups >= 0 requires the
// fused path, with at most that many workgroups a chunk.
func (d *Device) checkSearches(r *rand.Rand, dim int, metric core.Metric, rows int, ks []int, fusedGroups int) error {
	fused := fusedGroups >= 0
	const nq = batchQT
	data := rowsFor(r, rows+nq, dim)
	slab := data.Part(0, rows)
	qs := make([][]float32, nq)
	for i := range qs {
		qs[i] = data.PaddedRow(rows + i)
	}
	g, err := d.NewIndex(slab.Stride, metric, 128)
	if err != nil {
		return err
	}
	defer g.Release()
	g.fusedGroups = max(fusedGroups, 0)
	ctx := context.Background()
	if err := g.Upload(ctx, slab, 0, nil, nil); err != nil {
		return err
	}
	exactScore := func(q []float32, row int) float64 { return gpuplan.ExactScore(slab.Row(row), q, metric) }
	// Every query's exact scores, once: the cases below rank prefixes of
	// qs, so a case's query qi is qs[qi].
	exactOf := make([][]float64, nq)
	for qi, q := range qs {
		exactOf[qi] = make([]float64, rows)
		for i := range exactOf[qi] {
			exactOf[qi][i] = exactScore(q, i)
		}
	}
	tol := gpuplan.Tol
	got, err := g.Scores(ctx, qs[0], rows)
	if err != nil {
		return err
	}
	for i, s := range got {
		if w := exactOf[0][i]; math.Abs(float64(s)-w) > tol(w) {
			return fmt.Errorf("%w: score %g for row %d, want %g", gpu.ErrFailed, s, i, w)
		}
	}
	view := fallback.Slab{Data: slab.Data, Rows: slab.Rows, Dim: slab.Dim, Stride: slab.Stride}
	for _, c := range gpuplan.Cases(qs, ks, rows, fused) {
		var st core.Stages
		hits, err := g.Search(ctx, c.Queries, c.K, rows, c.Mask, &st)
		if err != nil {
			return err
		}
		_, covered := gpuplan.FusedPlan(g.topkSingle, g.topkBatch, c.K, len(c.Queries))
		if fused && covered && 2*c.Want < rows && st.Path != "fused" {
			return fmt.Errorf("%w: top-%d of %d queries took the %s path, not the fused one", gpu.ErrFailed, c.K, len(c.Queries), st.Path)
		}
		if len(hits) != len(c.Queries) {
			return fmt.Errorf("%w: %d lists for %d queries", gpu.ErrFailed, len(hits), len(c.Queries))
		}
		for qi, q := range c.Queries {
			ex := exactOf[qi]
			exact := func(row int) float64 { return ex[row] }
			ranked := gpuplan.Ranked(rows, c.Mask != nil, metric, exact)
			for _, h := range hits[qi] {
				if h.Row < 0 || h.Row >= rows {
					return fmt.Errorf("%w: top-%d of query %d returned row %d of %d", gpu.ErrFailed, c.K, qi, h.Row, rows)
				}
				if c.Mask != nil && h.Row%3 != 0 {
					return fmt.Errorf("%w: a search with an allow bitmap returned row %d, which it excludes", gpu.ErrFailed, h.Row)
				}
			}
			if err := gpuplan.CheckRanking(hits[qi], c.Want, ranked, exact, tol); err != nil {
				return fmt.Errorf("%w: top-%d of query %d of %d (masked %v, path %s): %v", gpu.ErrFailed, c.K, qi, len(c.Queries), c.Mask != nil, st.Path, err)
			}
			// The CPU fallback's answer, rank by rank: the same rows
			// unless two scores tie within the tolerance.
			v := view
			v.Allow = c.Mask
			want, err := fallback.Search(ctx, v, q, c.K, metric, 1)
			if err != nil {
				return err
			}
			if len(want) != len(hits[qi]) {
				return fmt.Errorf("%w: %d hits, the fallback %d", gpu.ErrFailed, len(hits[qi]), len(want))
			}
			for i, h := range hits[qi] {
				w := want[i]
				if math.Abs(float64(h.Score)-float64(w.Score)) > 2*tol(float64(w.Score)) ||
					h.Row != w.Row && math.Abs(ex[h.Row]-ex[w.Row]) > 2*tol(float64(w.Score)) {
					return fmt.Errorf("%w: top-%d of query %d (path %s) rank %d: row %d score %g, the fallback's row %d score %g",
						gpu.ErrFailed, c.K, qi, st.Path, i, h.Row, h.Score, w.Row, w.Score)
				}
			}
		}
	}
	return nil
}

// CheckCompressed checks quant.wgsl for prec (F16 or Int8) with the
// current team: the device's raw sums of random rows' codes against the
// CPU's (Int8: the same integers; F16: within float32 rounding of the
// float64 sum), then the exact search certified from the device's sums
// against the CPU's own exact search, hit for hit and bit for bit.
func (d *Device) CheckCompressed(r *rand.Rand, prec core.Precision, dim int, m core.Metric) error {
	const rows, nq = 300, batchQT
	data := rowsFor(r, rows+nq, dim)
	view := fallback.Slab{Data: data.Data[:rows*data.Stride], Rows: rows, Dim: dim, Stride: data.Stride}
	c, err := exact.NewCompressed(prec, dim)
	if err != nil {
		return err
	}
	c.AppendSlab(view, 0)
	g, err := d.NewCompressedIndex(c.WordsPerRow(), prec, m, 128)
	if err != nil {
		return err
	}
	defer g.Release()
	ctx := context.Background()
	w := c.WordsPerRow()
	if err := g.Upload(ctx, &packed.Slab{Dim: w, Stride: w, Rows: c.Rows, Data: c.Words()}, 0, nil, nil); err != nil {
		return err
	}
	qs := make([][]float32, nq)
	dq := make([][]float32, nq)
	for i := range qs {
		qs[i] = data.PaddedRow(rows + i)
		dq[i] = exact.DeviceQuery(c, qs[i])
	}
	for _, part := range [][][]float32{dq[:1], dq} {
		sums, scans, err := g.Sums(ctx, part, rows, nil)
		if err != nil {
			return err
		}
		for j, q := range part {
			for i := 0; i < rows; i++ {
				got := sums[j*rows+i]
				if err := checkSum(c, q, i, got); err != nil {
					return fmt.Errorf("%w: %v at dimension %d, team %d, query %d of %d, row %d: %v", gpu.ErrFailed, prec, dim, g.single.Team, j, len(part), i, err)
				}
			}
		}
		want, _, err := exact.ExactSearchBatch(ctx, view, c, qs[:len(part)], 10, m, 1, false)
		if err != nil {
			return err
		}
		got, _, err := exact.ExactSearchSums(ctx, view, c, qs[:len(part)], exact.DeviceSums{Sums: sums, Rows: rows}, scans, 10, m, 1, false)
		if err != nil {
			return err
		}
		if !slices.EqualFunc(want, got, func(a, b []core.Hit) bool { return slices.Equal(a, b) }) {
			return fmt.Errorf("%w: %v exact search at dimension %d, metric %v from the device's sums differs from the CPU's", gpu.ErrFailed, prec, dim, m)
		}
	}
	return nil
}

// checkSum checks one raw sum of row i against the device query q (its
// words as float32 bits).
func checkSum(c *exact.Compressed, q []float32, i int, got float32) error {
	if c.Prec == core.Int8 {
		var want int32
		for j := 0; j < c.Stride; j++ {
			code := int32(c.U8[i*c.Stride+j]) - 128
			qb := int8(math.Float32bits(q[j/4]) >> (8 * (j % 4)))
			want += code * int32(qb)
		}
		if s := int32(math.Float32bits(got)); s != want {
			return fmt.Errorf("sum %d, want %d", s, want)
		}
		return nil
	}
	var want, mag float64
	for j := 0; j < c.Stride; j++ {
		x := float64(halfToFloat(c.F16[i*c.Stride+j]))
		want += x * float64(q[j])
		mag += math.Abs(x * float64(q[j]))
	}
	if math.Abs(float64(got)-want) > 1e-5*math.Max(1, mag) {
		return fmt.Errorf("sum %g, want %g", got, want)
	}
	return nil
}

// halfToFloat widens an IEEE half.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	e := uint32(h>>10) & 0x1f
	m := uint32(h) & 0x3ff
	switch {
	case e == 0:
		f := float32(m) / (1 << 24)
		if sign != 0 {
			return -f
		}
		return f
	case e == 31:
		return math.Float32frombits(sign | 0x7f800000 | m<<13)
	}
	return math.Float32frombits(sign | (e+112)<<23 | m<<13)
}
