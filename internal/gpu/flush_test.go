//go:build cgo && !nogpu

package gpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

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
//
// Host arithmetic on one goroutine, no device: CI runs it without -race
// (testkit.RaceDeferred), where it takes a third of its time under it.
func TestFlushPlanEmulated(t *testing.T) {
	testkit.RaceDeferred(t)
	r := testkit.Rand(t)
	trials := 20000
	if testkit.Full() {
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

// TestFlushFreeOnDevice: Dot rows and queries whose every product is
// subnormal (scores are normal). Unscaled, a flushing device would score
// every row 0 (the emulation says so), so its top k would be the first k
// rows; planned, the device's scores (lavapipe, which keeps subnormals)
// are, bit for bit, those the emulation gives for a device that flushes,
// and its ranking is the CPU's. L2 rows this small, a subnormal row
// component, and a dot product too wide to scale are refused with
// ErrSubnormal. The browser's judge runs the same check (CheckSubnormal)
// through WebGPU.
func TestFlushFreeOnDevice(t *testing.T) {
	d := softwareDevice(t)
	require.NoError(t, d.CheckSubnormal(testkit.Rand(t)))
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
