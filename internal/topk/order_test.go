package topk

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
)

type Hit = core.Hit

const (
	Dot = core.Dot
	L2  = core.L2
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
	for _, m := range []core.Metric{Dot, L2} {
		require.True(t, Worse(Hit{Row: 0, Score: 1}, Hit{Row: 1, Score: 1}, m, ids))
		require.False(t, Worse(Hit{Row: 1, Score: 1}, Hit{Row: 0, Score: 1}, m, ids))
		require.True(t, Worse(Hit{Row: 0, Score: 0}, Hit{Row: 1, Score: negZero}, m, ids))
		require.True(t, Worse(Hit{Row: 0, Score: nan}, Hit{Row: 1, Score: nan}, m, ids))
		require.False(t, Worse(Hit{Row: 0, Score: 0}, Hit{Row: 1, Score: nan}, m, ids))
	}
}

// Rerank puts each run of equal scores (-0 == +0, NaN == NaN) in ID order
// and moves nothing else.
func TestRerank(t *testing.T) {
	nan := float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	ids := []uint64{7, 3, 9, 1, 4, 2, 8}
	hits := []Hit{{Row: 0, Score: 2}, {Row: 1, Score: 1}, {Row: 2, Score: 1}, {Row: 3, Score: 0}, {Row: 4, Score: negZero}, {Row: 5, Score: nan}, {Row: 6, Score: nan}}
	Rerank(hits, Dot, ids)
	got := make([]int, len(hits))
	for i, h := range hits {
		got[i] = h.Row
	}
	// Every run is in ID order already: nothing moves.
	if want := []int{0, 1, 2, 3, 4, 5, 6}; !slices.Equal(got, want) {
		t.Fatalf("got rows %v, want %v", got, want)
	}
	// With these IDs every run of two swaps.
	rev := []uint64{7, 9, 3, 4, 1, 8, 2}
	Rerank(hits, Dot, rev)
	for i, h := range hits {
		got[i] = h.Row
	}
	if want := []int{0, 2, 1, 4, 3, 6, 5}; !slices.Equal(got, want) {
		t.Fatalf("got rows %v, want %v", got, want)
	}
	if !Tied(0, negZero, L2) || !Tied(nan, nan, Dot) || Tied(nan, 0, L2) || Tied(1, 2, Dot) {
		t.Fatal("Tied is not the ordering's equality")
	}
}
