package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/packed"
)

// The check that a device's float32 scores do not depend on whether it
// flushes subnormals (flush.go), run the same way on every API: wgpu's
// tests and the browser's second judge.

// fma32 is a*b + c rounded once to float32, as WGSL's fma is where the
// device fuses it: the product is exact in float64, the sum's rounding
// error is recovered exactly (TwoSum), and a float64 sum that lands on a
// float32 midpoint is rounded the way the exact sum lies, so the double
// rounding never shows.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	bb := s - p
	e := (p - (s - bb)) + (float64(c) - bb)
	r := float32(s)
	if e == 0 || float64(r) == s {
		return r
	}
	nb := math.Nextafter32(r, float32(math.Inf(1)))
	if float64(r) > s {
		nb = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if (float64(r)+float64(nb))/2 != s {
		return r
	}
	if (e > 0) == (nb > r) {
		return nb
	}
	return r
}

// subnormal reports whether v is a float32 subnormal.
func subnormal(v float32) bool { return v != 0 && math.Abs(float64(v)) < 0x1p-126 }

// emulate is teamScore (the shaders' summation order) on a device that
// flushes (flush) or keeps subnormals: flushing, every input and every
// result that is subnormal becomes a zero of its sign, as Vulkan allows.
// met reports whether anything underflowed: an input or a result was
// subnormal (before flushing), or a product or fma of nonzero value
// rounded to zero. (A sum or difference of floats is exact when it is
// that small, so it rounds to zero only when it is zero.)
func emulate(row, q []float32, team int, l2, fused, flush bool) (score float32, met bool) {
	f := func(v float32) float32 {
		if subnormal(v) {
			met = true
			if flush {
				return float32(math.Copysign(0, float64(v)))
			}
		}
		return v
	}
	dim4 := len(row) / 4
	lanes := make([]float32, team)
	for l := range lanes {
		var acc [4]float32
		for i := l; i < dim4; i += team {
			for c := range acc {
				a, b := f(row[4*i+c]), f(q[4*i+c])
				if l2 {
					d := f(a - b)
					a, b = d, d
				}
				if fused {
					exact := float64(a)*float64(b) + float64(acc[c]) // zero exactly when the sum is
					acc[c] = f(fma32(a, b, acc[c]))
					met = met || acc[c] == 0 && exact != 0
				} else {
					p := float32(a * b)
					met = met || p == 0 && a != 0 && b != 0
					acc[c] = f(f(p) + acc[c])
				}
			}
		}
		lanes[l] = f(f(acc[0]+acc[1]) + f(acc[2]+acc[3]))
	}
	for s := 1; s < team; s *= 2 {
		for off := 0; off+s < team; off += 2 * s {
			lanes[off] = f(lanes[off] + lanes[off+s])
		}
	}
	return lanes[0], met
}

// positiveTiny is n rows of dim components in [2^-65, 2^-64): every
// product of two is subnormal, and a score (a sum of dim of them) is
// normal.
func positiveTiny(r *rand.Rand, n, dim int) [][]float32 {
	vs := make([][]float32, n)
	for i := range vs {
		vs[i] = make([]float32, dim)
		for j := range vs[i] {
			vs[i][j] = float32(math.Ldexp(1+r.Float64(), -65))
		}
	}
	return vs
}

// CheckSubnormal checks the subnormal guard on the device: Dot rows and
// queries (random from r) whose every product is subnormal, which a
// device that flushes would score 0 unscaled, are searched and scored
// exactly — each hit's score, bit for bit, what the emulation of a
// flushing device gives for the scaled query, every ranking the CPU's,
// the scores read back whole unscaled too — and what no scaling can keep
// exact (L2 rows or queries below 2^-40, a subnormal row component, a dot
// product too wide to scale) is refused with ErrSubnormal, for the CPU to
// score.
func (d *Device) CheckSubnormal(r *rand.Rand) error {
	ctx := context.Background()
	const n, dim, k = 300, 32, 10
	slab := packed.NewSlab(dim)
	slab.Append(positiveTiny(r, n, dim), false)
	qs := make([][]float32, 3)
	for i, v := range positiveTiny(r, len(qs), dim) {
		qs[i] = packed.Padded(v, slab.Stride)
	}
	g, err := newIndex(d, slab.Stride, core.Dot, 0)
	if err != nil {
		return err
	}
	defer g.Release()
	if err := g.Upload(ctx, slab, 0, nil, nil); err != nil {
		return err
	}
	team := int(g.single.Team)
	view := fallback.Slab{Data: slab.Data, Rows: slab.Rows, Dim: slab.Dim, Stride: slab.Stride}
	for _, batch := range [][][]float32{qs[:1], qs} {
		got, err := g.Search(ctx, batch, k, n, nil, nil)
		if err != nil {
			return fmt.Errorf("tiny dot products, %d queries: %w", len(batch), err)
		}
		want, err := fallback.SearchBatch(ctx, view, batch, k, fallback.Dot, 1)
		if err != nil {
			return err
		}
		for qi, hs := range got {
			if len(hs) != len(want[qi]) {
				return fmt.Errorf("%w: tiny dot products, query %d: %d hits, the CPU %d", ErrFailed, qi, len(hs), len(want[qi]))
			}
			s, ok := flushPlan(g.rows.get(), rangeOf(batch[qi]), false, slab.Stride)
			if !ok || s <= 0 {
				return fmt.Errorf("%w: tiny dot products, query %d: planned scale %d, ok %v", ErrFailed, qi, s, ok)
			}
			scaledQ := make([]float32, len(batch[qi]))
			for i, v := range batch[qi] {
				scaledQ[i] = scaleBy(v, s)
			}
			for i, h := range hs {
				if w := want[qi][i]; h.Row != w.Row || math.Abs(float64(h.Score-w.Score)) > 1e-5*math.Abs(float64(w.Score)) {
					return fmt.Errorf("%w: tiny dot products, query %d rank %d: row %d score %g, the CPU's row %d score %g",
						ErrFailed, qi, i, h.Row, h.Score, w.Row, w.Score)
				}
				row := slab.Data[h.Row*slab.Stride : (h.Row+1)*slab.Stride]
				if unscaled, _ := emulate(row, batch[qi], team, false, true, true); unscaled != 0 {
					return fmt.Errorf("%w: the emulation: unscaled, a flushing device scores row %d %g, not 0", ErrFailed, h.Row, unscaled)
				}
				match := false
				for _, fused := range []bool{false, true} {
					f, _ := emulate(row, scaledQ, team, false, fused, true)
					match = match || math.Float32bits(scaleBy(f, -s)) == math.Float32bits(h.Score)
				}
				if !match {
					return fmt.Errorf("%w: tiny dot products, query %d row %d: %v is not what a flushing device gives", ErrFailed, qi, h.Row, h.Score)
				}
			}
		}
	}
	// Every score read back (k = n, and the range path's Scores) is
	// unscaled too.
	all, err := g.Scores(ctx, qs[0], n)
	if err != nil {
		return err
	}
	hits, err := g.Search(ctx, qs[:1], k, n, nil, nil)
	if err != nil {
		return err
	}
	full, err := g.Search(ctx, qs[:1], n, n, nil, nil)
	if err != nil {
		return err
	}
	for i, h := range hits[0] {
		if h.Score != all[h.Row] || full[0][i] != h {
			return fmt.Errorf("%w: tiny dot products: hit %d (%v) read back whole as %v, ranked among all as %v", ErrFailed, i, h, all[h.Row], full[0][i])
		}
	}

	refuse := func(what string, metric core.Metric, rows [][]float32, q []float32) error {
		s := packed.NewSlab(len(rows[0]))
		s.Append(rows, false)
		g, err := newIndex(d, s.Stride, metric, 0)
		if err != nil {
			return err
		}
		defer g.Release()
		if err := g.Upload(ctx, s, 0, nil, nil); err != nil {
			return err
		}
		pq := packed.Padded(q, s.Stride)
		if _, err = g.Search(ctx, [][]float32{pq}, 1, s.Rows, nil, nil); !errors.Is(err, ErrSubnormal) {
			return fmt.Errorf("%w: %s: a search gave error %v, not ErrSubnormal", ErrFailed, what, err)
		}
		if _, err = g.Scores(ctx, pq, s.Rows); !errors.Is(err, ErrSubnormal) {
			return fmt.Errorf("%w: %s: scores gave error %v, not ErrSubnormal", ErrFailed, what, err)
		}
		return nil
	}
	ones := []float32{1, 1, 1, 1}
	for _, c := range []struct {
		what   string
		metric core.Metric
		rows   [][]float32
		q      []float32
	}{
		{"L2 with components below 2^-40", core.L2, positiveTiny(r, 4, 4), ones},
		{"L2 with a query below 2^-40", core.L2, [][]float32{ones, ones}, []float32{1, 0x1p-41, 0, 0}},
		{"a subnormal row component", core.Dot, [][]float32{ones, {1, 0x1p-140, 0, 0}}, ones},
		{"a dot product too wide to scale", core.Dot, [][]float32{{0x1p100, 0x1p-100, 0, 0}, ones}, []float32{0x1p20, 0x1p-20, 0, 0}},
	} {
		if err := refuse(c.what, c.metric, c.rows, c.q); err != nil {
			return err
		}
	}
	return nil
}
