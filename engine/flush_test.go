//go:build cgo && !nogpu

package engine_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// tinyPositive is n vectors of dim components in [2^e, 2^(e+1)).
func tinyPositive(r *rand.Rand, n, dim, e int) [][]float32 {
	vs := make([][]float32, n)
	for i := range vs {
		vs[i] = make([]float32, dim)
		for j := range vs[i] {
			vs[i][j] = float32(math.Ldexp(1+r.Float64(), e))
		}
	}
	return vs
}

// dot64 is the float64 dot product of row id of ix with q.
func dot64(t *testing.T, ix *engine.Index, id uint64, q []float32) float64 {
	v, err := ix.Vector(id)
	require.NoError(t, err)
	var s float64
	for i := range v {
		s += float64(v[i]) * float64(q[i])
	}
	return s
}

// TestTinyMagnitudesAnswerAsTheCPU: data whose float32 products are
// subnormal, which a device that flushes subnormals (NVIDIA; lavapipe
// keeps them) would score 0. Under Dot (every product subnormal, scores
// normal) the GPU serves the search with each query scaled by a power of
// two, and answers as the CPU does; under L2 (components below 2^-40,
// which x - q cannot be scaled out of) the search is scored on the CPU,
// with no GPU failure (Device GPU would return one), bit for bit the
// CPU's. internal/gpu's TestFlushFreeOnDevice checks the device's scores
// against an emulation of a flushing device.
func TestTinyMagnitudesAnswerAsTheCPU(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const n, dim = 400, 32
	cases := []struct {
		metric umbra.Metric
		exp    int
		device string
	}{
		{umbra.Dot, -65, "gpu"}, // products below 2^-128, scores about 2^-124
		{umbra.L2, -50, "cpu"},
	}
	for _, c := range cases {
		t.Run(c.metric.String(), func(t *testing.T) {
			vs := tinyPositive(r, n, dim, c.exp)
			qs := tinyPositive(r, 9, dim, c.exp)
			cpu := cpuTwin(t, engine.Config{Dim: dim, Metric: c.metric})
			ix := open(t, backends[1], engine.Config{Dim: dim, Metric: c.metric})
			for _, x := range []*engine.Index{cpu, ix} {
				_, err := x.Add(ctx, umbra.Vectors(vs))
				require.NoError(t, err)
			}
			for _, k := range []int{1, 10, n} {
				want, err := cpu.SearchBatch(ctx, qs, k)
				require.NoError(t, err)
				var tr diag.Trace
				got, err := ix.SearchBatch(diag.WithTrace(ctx, &tr), qs, k)
				require.NoError(t, err)
				require.Equal(t, c.device, tr.Device, "k %d", k)
				for i := range qs {
					what := fmt.Sprintf("%v k %d query %d", c.metric, k, i)
					if c.device == "cpu" {
						sameHitBits(t, want[i], got[i], "%s", what)
						continue
					}
					// The same ranking up to near-ties, as between any two
					// summation orders (the CPU rounds each subnormal
					// product to 2^-149, the scaled device does not), and
					// every score near its float64 value; relative to the
					// scores, since requireSameHits' absolute floor (1e-5)
					// would take scores of 2^-124 as all tied, even all 0.
					require.Len(t, got[i], len(want[i]), what)
					for j := range want[i] {
						g, w := dot64(t, cpu, got[i][j].ID, qs[i]), dot64(t, cpu, want[i][j].ID, qs[i])
						require.InEpsilon(t, w, g, 1e-5, "%s rank %d: a near-tie in the CPU's ranking", what, j)
						require.InEpsilon(t, g, float64(got[i][j].Score), 1e-5, "%s rank %d: the score", what, j)
					}
				}
			}
			if c.device == "cpu" {
				want, err := cpu.SearchRange(ctx, qs[0], 0x1p-90)
				require.NoError(t, err)
				got, err := ix.SearchRange(ctx, qs[0], 0x1p-90)
				require.NoError(t, err)
				require.NotEmpty(t, want)
				sameHitBits(t, want, got, "range")
			}
			require.Equal(t, engine.GPU, ix.Info().Device, "no GPU failure was counted")
		})
	}
	// In a child process (Isolate, under Auto, every search sent to the
	// GPU) the refusal crosses the pipe as itself: the CPU answers and the
	// index is not moved off the GPU as after a failure.
	t.Run("isolated", func(t *testing.T) {
		vs, qs := tinyPositive(r, 200, dim, -50), tinyPositive(r, 3, dim, -50)
		cpu := cpuTwin(t, engine.Config{Dim: dim, Metric: umbra.L2})
		ix := openIsolated(t, backends[1], engine.Config{Dim: dim, Metric: umbra.L2})
		for _, x := range []*engine.Index{cpu, ix} {
			_, err := x.Add(ctx, umbra.Vectors(vs))
			require.NoError(t, err)
		}
		want, err := cpu.SearchBatch(ctx, qs, 10)
		require.NoError(t, err)
		var tr diag.Trace
		got, err := ix.SearchBatch(diag.WithTrace(ctx, &tr), qs, 10)
		require.NoError(t, err)
		require.Equal(t, "cpu", tr.Device)
		for i := range qs {
			sameHitBits(t, want[i], got[i], "query %d", i)
		}
		require.Equal(t, engine.GPU, ix.Info().Device, "no GPU failure was counted")
		require.Empty(t, ix.Info().Reason)
	})
}
