package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
)

// TestNonFiniteScoresRankTheSameEverywhere: finite inputs can still score
// ±Inf or NaN under Dot (2e38 × 2e38 overflows; +Inf + -Inf is NaN) and
// +Inf under L2. Every path ranks them by one rule: +Inf above every number
// under Dot (below under L2), NaN below everything under both, ties by lower
// ID — on the device's select, the host's select of read-back scores, and
// the fallback alike.
func TestNonFiniteScoresRankTheSameEverywhere(t *testing.T) {
	nonFiniteRanks(t, context.Background())
}

// nonFiniteRanks is TestNonFiniteScoresRankTheSameEverywhere with ctx for
// every call (the select path it forces).
func nonFiniteRanks(t *testing.T, ctx context.Context) {
	const big = 2e38
	q := []float32{big, big, 1, 1}
	data := [][]float32{
		{0, 0, 0.5, 0.25},  // 0: 0.75
		{big, -big, 0, 0},  // 1: +Inf + -Inf = NaN
		{big, big, 0, 0},   // 2: +Inf
		{-big, -big, 0, 0}, // 3: -Inf
		{big, -big, 0, 0},  // 4: NaN
		{0, 0, -1, 0.5},    // 5: -0.5
		{0, 0, 2, 1},       // 6: 3
		{-big, big, 0, 0},  // 7: NaN
		{0, 0, 0.25, 0.5},  // 8: 0.75, ties with 0
		{0, 0, 0, -3},      // 9: -3
	}
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	dot := []umbra.Hit{{ID: 2, Score: inf}, {ID: 6, Score: 3}, {ID: 0, Score: 0.75}, {ID: 8, Score: 0.75}, {ID: 5, Score: -0.5}, {ID: 9, Score: -3}, {ID: 3, Score: -inf}, {ID: 1, Score: nan}, {ID: 4, Score: nan}, {ID: 7, Score: nan}}
	// Under L2 the far rows are +Inf away, the worst numbers; none is NaN.
	lq := []float32{0, 0, 1, 1}
	ldata := [][]float32{{0, 0, 1, 1}, {big, big, 0, 0}, {0, 0, 2, 1}, {-big, 0, 0, 0}, {0, 0, 1, 0}}
	l2 := []umbra.Hit{{ID: 0, Score: 0}, {ID: 2, Score: 1}, {ID: 4, Score: 1}, {ID: 1, Score: inf}, {ID: 3, Score: inf}}

	for _, b := range backends {
		for _, c := range []struct {
			m    umbra.Metric
			data [][]float32
			q    []float32
			want []umbra.Hit
		}{{umbra.Dot, data, q, dot}, {umbra.L2, ldata, lq, l2}} {
			t.Run(fmt.Sprintf("%s/%s", b.name, c.m), func(t *testing.T) {
				ix := open(t, b, engine.Config{Dim: 4, Metric: c.m})
				_, err := ix.Add(ctx, umbra.Vectors(c.data))
				require.NoError(t, err)
				// Small k selects on the device; k past half the rows
				// selects on the host from every read-back score.
				for k := 1; k <= len(c.want); k++ {
					got, err := ix.Search(ctx, c.q, k)
					require.NoError(t, err)
					require.Len(t, got, k)
					for i, h := range got {
						w := c.want[i]
						require.Equal(t, w.ID, h.ID, "k=%d rank %d: got %v, want %v", k, i, got, c.want[:k])
						if math.IsNaN(float64(w.Score)) {
							require.True(t, math.IsNaN(float64(h.Score)), "k=%d rank %d: score %v, want NaN", k, i, h.Score)
						} else {
							require.Equal(t, w.Score, h.Score, "k=%d rank %d", k, i)
						}
					}
				}
			})
		}
	}
}

// TestNewWithCancelledContext: a cancelled context is an error wrapping
// context.Canceled every time, under every device, whether or not a probe
// verdict is already cached — never a random mix of success and a
// misleading "no adapter" fallback.
func TestNewWithCancelledContext(t *testing.T) {
	// Warm the probe cache first, as a long-running program would have.
	if ix, err := engine.New(context.Background(), engine.Config{Dim: 4, Device: engine.GPU}); err == nil {
		ix.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []engine.Device{engine.Auto, engine.GPU, engine.CPU} {
		for i := 0; i < 40; i++ {
			ix, err := engine.New(ctx, engine.Config{Dim: 4, Device: d})
			require.Nil(t, ix)
			require.True(t, errors.Is(err, context.Canceled), "device %s, try %d: %v", d, i, err)
			require.False(t, errors.Is(err, engine.ErrNoAdapter), "device %s: %v", d, err)
		}
	}
}
