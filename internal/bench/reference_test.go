package bench

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/umbravec/umbra"

	"github.com/umbravec/umbra/internal/testkit"
)

// Three 2-D rows, worked by hand for q = (1, 0).
var refRows = []float32{
	3, 4,
	1, 0,
	0, 2,
}

func TestReferenceScores(t *testing.T) {
	q := []float32{1, 0}
	cases := []struct {
		m    umbra.Metric
		want []float64
		top  []int
		mag  float64 // largest sum of absolute terms
	}{
		{umbra.Cosine, []float64{0.6, 1, 0}, []int{1, 0, 2}, 1},
		{umbra.Dot, []float64{3, 1, 0}, []int{0, 1, 2}, 3},
		{umbra.L2, []float64{20, 0, 5}, []int{1, 2, 0}, 26}, // 9+16+1
	}
	for _, c := range cases {
		t.Run(c.m.String(), func(t *testing.T) {
			ref := NewReference(refRows, 2, q, c.m)
			assert.InDeltaSlice(t, c.want, ref.Scores, 1e-15)
			assert.Equal(t, c.top, ref.TopK(3))
			assert.Equal(t, c.top[:2], ref.TopK(2))
			assert.InDelta(t, 8*math.Sqrt(2)*0x1p-24*c.mag, ref.Threshold, 1e-18)
		})
	}
}

func TestReferenceTiesByID(t *testing.T) {
	ref := NewReference([]float32{1, 0, 2, 0, 1, 0}, 2, []float32{1, 0}, umbra.Cosine)
	assert.Equal(t, []int{0, 1, 2}, ref.TopK(3), "equal cosines rank by lower ID")
}

func TestMaxAbsDiff(t *testing.T) {
	ref := &Reference{Metric: umbra.Dot, Scores: []float64{3, 1, 0}, Threshold: 1e-6}
	d, err := ref.MaxAbsDiff([]umbra.Hit{{ID: 0, Score: 3}, {ID: 2, Score: 0.25}, {ID: 1, Score: 1}})
	require.NoError(t, err)
	assert.Equal(t, 0.25, d)

	_, err = ref.MaxAbsDiff([]umbra.Hit{{ID: 0, Score: 3}, {ID: 0, Score: 3}, {ID: 1, Score: 1}})
	assert.ErrorContains(t, err, "twice")
	_, err = ref.MaxAbsDiff([]umbra.Hit{{ID: 0, Score: 3}})
	assert.ErrorContains(t, err, "returned 1 hits for 3 rows")

	d, err = ref.MaxAbsDiff([]umbra.Hit{{ID: 0, Score: float32(math.NaN())}, {ID: 1, Score: 1}, {ID: 2}})
	require.NoError(t, err)
	assert.True(t, math.IsInf(d, 1), "a NaN score is the worst difference")
}

func TestHitsDiff(t *testing.T) {
	ref := &Reference{Metric: umbra.Dot, Scores: []float64{3, 1, 0}}
	assert.Equal(t, 0.5, ref.HitsDiff([]umbra.Hit{{ID: 1, Score: 1.5}, {ID: 0, Score: 3}}))
	assert.Equal(t, 0.0, ref.HitsDiff(nil))
	assert.True(t, math.IsInf(ref.HitsDiff([]umbra.Hit{{ID: 3}}), 1))
	assert.True(t, math.IsInf(ref.HitsDiff([]umbra.Hit{{ID: 0, Score: float32(math.NaN())}}), 1))
}

func TestCompareTopK(t *testing.T) {
	// Rows 1 and 2 are a near-tie (within the threshold); row 3 is not.
	ref := &Reference{Metric: umbra.Dot, Scores: []float64{0.9, 0.5, 0.5 - 1e-7, 0.1}, Threshold: 1e-6}
	hits := func(ids ...uint64) []umbra.Hit {
		h := make([]umbra.Hit, len(ids))
		for i, id := range ids {
			h[i] = umbra.Hit{ID: id}
		}
		return h
	}
	cases := []struct {
		name  string
		hits  []umbra.Hit
		k     int
		exact bool
		match bool
		rank  int
	}{
		{"exact", hits(0, 1, 2), 3, true, true, -1},
		{"near-tie swapped", hits(0, 2, 1), 3, false, true, 1},
		{"wrong row", hits(0, 1, 3), 3, false, false, 2},
		{"duplicate", hits(0, 1, 1), 3, false, false, 2},
		{"too few", hits(0, 1), 3, false, false, 2},
		{"too many", hits(0, 1, 2), 2, false, false, 2},
		{"out of range", hits(0, 9), 2, false, false, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ref.CompareTopK(c.hits, c.k)
			assert.Equal(t, TopKResult{Exact: c.exact, Match: c.match, Rank: c.rank}, r)
		})
	}
}

// TestTopKSelectsLikeASort: the heap selection gives the first k of a
// full sort (better score first, equal scores by lower ID) for every k,
// asked in any order, on scores with many ties.
func TestTopKSelectsLikeASort(t *testing.T) {
	r := testkit.Rand(t)
	for _, m := range []umbra.Metric{umbra.Dot, umbra.L2} {
		ref := &Reference{Metric: m, Scores: make([]float64, 3000)}
		for i := range ref.Scores {
			ref.Scores[i] = float64(r.IntN(40))
		}
		all := make([]int, len(ref.Scores))
		for i := range all {
			all[i] = i
		}
		slices.SortFunc(all, func(a, b int) int {
			if ref.better(a, b) {
				return -1
			}
			if ref.better(b, a) {
				return 1
			}
			return 0
		})
		for _, k := range []int{5, 1, 700, 3000, 10, 4000, 0} {
			require.Equal(t, all[:min(k, len(all))], ref.TopK(k), "metric %v k %d", m, k)
		}
	}
}
