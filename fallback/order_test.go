package fallback

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOrderOfNonFiniteScores: -0 and +0 are one score (ties go to the lower
// row), +Inf ranks first under Dot and last under L2, and NaN ranks last
// under both, NaNs by row — the rule the GPU's select shader also follows.
func TestOrderOfNonFiniteScores(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	scores := []float32{nan, 0, inf, negZero, -inf, nan, 1}
	rows := func(hs []Hit) []int {
		out := make([]int, len(hs))
		for i, h := range hs {
			out[i] = h.Row
		}
		return out
	}
	for k := 1; k <= len(scores); k++ {
		require.Equal(t, []int{2, 6, 1, 3, 4, 0, 5}[:k], rows(SelectTopK(scores, k, Dot)), "dot, k=%d", k)
		require.Equal(t, []int{4, 1, 3, 6, 2, 0, 5}[:k], rows(SelectTopK(scores, k, L2)), "l2, k=%d", k)
	}
	require.True(t, Worse(Hit{Row: 0, Score: nan}, Hit{Row: 9, Score: -inf}, Dot, nil))
	require.True(t, Worse(Hit{Row: 0, Score: nan}, Hit{Row: 9, Score: inf}, L2, nil))
	require.False(t, Worse(Hit{Row: 1, Score: negZero}, Hit{Row: 2, Score: 0}, Dot, nil))
	require.True(t, Worse(Hit{Row: 2, Score: negZero}, Hit{Row: 1, Score: 0}, Dot, nil))
}

// With IDs, equal scores go to the lower ID whatever the rows: -0 and +0
// are one score, NaNs one too.
func TestOrderByID(t *testing.T) {
	nan := float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	ids := []uint64{10, 5}
	for _, m := range []Metric{Dot, L2} {
		require.True(t, Worse(Hit{Row: 0, Score: 1}, Hit{Row: 1, Score: 1}, m, ids))
		require.False(t, Worse(Hit{Row: 1, Score: 1}, Hit{Row: 0, Score: 1}, m, ids))
		require.True(t, Worse(Hit{Row: 0, Score: 0}, Hit{Row: 1, Score: negZero}, m, ids))
		require.True(t, Worse(Hit{Row: 0, Score: nan}, Hit{Row: 1, Score: nan}, m, ids))
		require.False(t, Worse(Hit{Row: 0, Score: 0}, Hit{Row: 1, Score: nan}, m, ids))
	}
}
