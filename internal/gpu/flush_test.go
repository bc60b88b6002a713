//go:build cgo && !nogpu

package gpu

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/testkit"
)

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

// TestEmulateMatchesTeamScore: without flushing, emulate is teamScore.
func TestEmulateMatchesTeamScore(t *testing.T) {
	r := testkit.Rand(t)
	for range 2000 {
		stride := 4 * (1 + r.IntN(40))
		row, q := tinyVector(r, stride), tinyVector(r, stride)
		team, l2, fused := 1<<r.IntN(7), r.IntN(2) == 0, r.IntN(2) == 0
		got, _ := emulate(row, q, team, l2, fused, false)
		require.Equal(t, math.Float32bits(teamScore(row, q, team, l2, fused)), math.Float32bits(got))
	}
}

// tinyVector is n components of random signs, zeros now and
// then, with exponents spread over a random window starting anywhere from
// 2^-75 to 2^20 (half the time below 2^-55, where products underflow),
// and now and then one far smaller or larger.
func tinyVector(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	base, spread := r.IntN(96)-75, 1+r.IntN(24)
	if r.IntN(2) == 0 {
		base = r.IntN(20) - 75 // where products and sums underflow
	}
	for i := range v {
		if r.IntN(8) == 0 {
			continue
		}
		e := base + r.IntN(spread)
		if r.IntN(50) == 0 {
			e += r.IntN(60) - 30
		}
		x := float32(math.Ldexp(1+r.Float64(), e))
		if r.IntN(2) == 0 {
			x = -x
		}
		v[i] = x
	}
	return v
}

// TestFlushPlanEmulated: on random rows and queries whose products and
// sums reach far into the subnormal range, in the shaders' order for teams
// of 1 to 64 lanes, fma fused or not, Dot and L2:
//   - wherever flushPlan accepts, the scaled query's score meets no
//     subnormal and no underflow at all, so a flushing device gives the same bits as one
//     that keeps subnormals;
//   - where the unscaled score met no subnormal (every search before
//     scaling existed that was flush-free), scaling and unscaling give
//     back its bits exactly;
//   - flushing does change many unscaled scores (the fault is real here),
//     and every L2 case that would change is among those refused.
func TestFlushPlanEmulated(t *testing.T) {
	r := testkit.Rand(t)
	trials := 20000
	if fullTests() {
		trials = 200000
	}
	var accepted, scaled, identical, faulty, refused, l2Faulty, fixed int
	for range trials {
		stride := 4 * (1 + r.IntN(40))
		row, q := tinyVector(r, stride), tinyVector(r, stride)
		team, l2, fused := 1<<r.IntN(7), r.IntN(2) == 0, r.IntN(2) == 0
		plain, metPlain := emulate(row, q, team, l2, fused, false)
		flushed, _ := emulate(row, q, team, l2, fused, true)
		differs := math.Float32bits(plain) != math.Float32bits(flushed)
		if differs {
			faulty++
		}
		s, ok := flushPlan(rangeOf(row), rangeOf(q), l2, stride)
		if !ok {
			refused++
			continue
		}
		if l2 {
			require.Zero(t, s, "L2 never scales")
			if differs {
				l2Faulty++
			}
		} else if differs {
			fixed++
		}
		accepted++
		qs := make([]float32, len(q))
		for i, v := range q {
			qs[i] = scaleBy(v, s)
			require.Equal(t, float64(v), math.Ldexp(float64(qs[i]), -s), "scaling the query is exact")
		}
		keep, met := emulate(row, qs, team, l2, fused, false)
		flush, _ := emulate(row, qs, team, l2, fused, true)
		require.False(t, met, "an underflow after planning (s %d, L2 %v, rows %v, query %v)", s, l2, rangeOf(row), rangeOf(q))
		require.Equal(t, math.Float32bits(keep), math.Float32bits(flush))
		if s > 0 {
			scaled++
		}
		if !metPlain {
			identical++
			require.Equal(t, math.Float32bits(plain), math.Float32bits(scaleBy(keep, -s)),
				"bit for bit where nothing underflowed (s %d)", s)
		}
	}
	require.Zero(t, l2Faulty, "an accepted L2 case that flushing changes")
	require.Positive(t, scaled, "some queries were scaled")
	require.Positive(t, identical, "the bit-for-bit check ran")
	require.Greater(t, faulty, trials/20, "flushing changes enough unscaled scores to matter")
	require.Positive(t, fixed, "dot products flushing changed are served, scaled")
	require.Less(t, refused, trials*3/4, "many cases are served")
	t.Logf("%d trials: %d accepted (%d scaled), %d checked bit for bit against the unscaled score, %d unscaled scores changed by flushing (%d of them dot products served), %d refused",
		trials, accepted, scaled, identical, faulty, fixed, refused)
}

// positiveTiny is rows of dim components in [2^-65, 2^-64): every product
// of two is subnormal, and a score (a sum of dim of them) is normal.
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

// TestFlushFreeOnDevice: Dot rows and queries whose every product is
// subnormal (scores are normal). Unscaled, a flushing device would score
// every row 0 (the emulation says so), so its top k would be the first k
// rows; planned, the device's scores (lavapipe, which keeps subnormals)
// are, bit for bit, those the emulation gives for a device that flushes,
// and its ranking is the CPU's. L2 rows this small, a subnormal row
// component, and a dot product too wide to scale are refused with
// ErrSubnormal.
func TestFlushFreeOnDevice(t *testing.T) {
	d := softwareDevice(t)
	r := testkit.Rand(t)
	const n, dim, k = 300, 32, 10
	slab := packed.NewSlab(dim)
	slab.Append(positiveTiny(r, n, dim), false)
	qs := make([][]float32, 3)
	for i, v := range positiveTiny(r, len(qs), dim) {
		qs[i] = make([]float32, slab.Stride)
		copy(qs[i], v)
	}
	g, err := newIndex(d, slab.Stride, core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	require.NoError(t, g.Upload(context.Background(), slab, 0, nil, nil))
	team := int(g.single.Team)
	for _, batch := range [][][]float32{qs[:1], qs} {
		got, err := g.Search(context.Background(), batch, k, n, nil, nil)
		require.NoError(t, err)
		requireFallbackAnswers(t, slab, batch, k, core.Dot, got, "tiny dot")
		for qi, hs := range got {
			s, ok := flushPlan(g.rows.get(), rangeOf(batch[qi]), false, slab.Stride)
			require.True(t, ok)
			require.Greater(t, s, 0)
			scaledQ := make([]float32, len(batch[qi]))
			for i, v := range batch[qi] {
				scaledQ[i] = scaleBy(v, s)
			}
			for _, h := range hs {
				row := slab.Data[h.Row*slab.Stride : (h.Row+1)*slab.Stride]
				unscaled, _ := emulate(row, batch[qi], team, false, true, true)
				require.Zero(t, unscaled, "unplanned, a flushing device scores the row 0")
				match := false
				for _, fused := range []bool{false, true} {
					f, _ := emulate(row, scaledQ, team, false, fused, true)
					match = match || math.Float32bits(scaleBy(f, -s)) == math.Float32bits(h.Score)
				}
				require.True(t, match, "query %d row %d: %v is not what a flushing device gives", qi, h.Row, h.Score)
			}
		}
	}
	// Every score read back (k = n, and the range path's Scores) is
	// unscaled too.
	all, err := g.Scores(context.Background(), qs[0], n)
	require.NoError(t, err)
	hits, err := g.Search(context.Background(), qs[:1], k, n, nil, nil)
	require.NoError(t, err)
	for _, h := range hits[0] {
		require.Equal(t, h.Score, all[h.Row])
	}
	full, err := g.Search(context.Background(), qs[:1], n, n, nil, nil)
	require.NoError(t, err)
	require.Equal(t, hits[0], full[0][:k])

	refuse := func(what string, metric core.Metric, rows [][]float32, q []float32) {
		t.Helper()
		s := packed.NewSlab(len(rows[0]))
		s.Append(rows, false)
		g, err := newIndex(d, s.Stride, metric, 0)
		require.NoError(t, err)
		defer g.Release()
		require.NoError(t, g.Upload(context.Background(), s, 0, nil, nil))
		pq := make([]float32, s.Stride)
		copy(pq, q)
		_, err = g.Search(context.Background(), [][]float32{pq}, 1, s.Rows, nil, nil)
		require.ErrorIs(t, err, ErrSubnormal, what)
		_, err = g.Scores(context.Background(), pq, s.Rows)
		require.ErrorIs(t, err, ErrSubnormal, what)
	}
	ones := []float32{1, 1, 1, 1}
	refuse("L2 with components below 2^-40", core.L2, positiveTiny(r, 4, 4), ones)
	refuse("L2 with a query below 2^-40", core.L2, [][]float32{ones, ones}, []float32{1, 0x1p-41, 0, 0})
	refuse("a subnormal row component", core.Dot, [][]float32{ones, {1, 0x1p-140, 0, 0}}, ones)
	refuse("a dot product too wide to scale", core.Dot, [][]float32{{0x1p100, 0x1p-100, 0, 0}, ones}, []float32{0x1p20, 0x1p-20, 0, 0})
}

// TestFlushPlanL2WithAnAllZeroSide: under L2 an all-zero row set (or
// query) leaves the other side's components as the differences, so tiny
// ones are refused, not waved through as "every product is 0" (which is
// Dot's rule). A random seed of TestFlushPlanEmulated found this case.
func TestFlushPlanL2WithAnAllZeroSide(t *testing.T) {
	none, tiny, fine := expRange{}, expRange{min: -71, max: -64, any: true}, expRange{min: -10, max: 3, any: true}
	for _, c := range []struct {
		rows, q expRange
		ok      bool
	}{{none, tiny, false}, {tiny, none, false}, {none, fine, true}, {fine, none, true}, {none, none, true}} {
		_, ok := flushPlan(c.rows, c.q, true, 8)
		require.Equal(t, c.ok, ok, "L2, rows %v, query %v", c.rows, c.q)
		_, ok = flushPlan(c.rows, c.q, false, 8)
		require.True(t, ok, "Dot, rows %v, query %v: a zero side makes every product 0", c.rows, c.q)
	}
}
