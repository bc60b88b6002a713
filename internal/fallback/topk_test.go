package fallback

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/internal/topk"
)

// sortedHits is the obvious selection: sort everything, keep k.
func sortedHits(scores []float32, k int, m Metric) []Hit {
	all := make([]Hit, len(scores))
	for i, s := range scores {
		all[i] = Hit{Row: i, Score: s}
	}
	slices.SortStableFunc(all, func(a, b Hit) int {
		if a.Score == b.Score {
			return 0
		}
		if (a.Score > b.Score) == (m == Dot) {
			return -1
		}
		return 1
	})
	return all[:min(k, len(all))]
}

// fewScores draws from a handful of values so that ties are common.
func fewScores(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.IntN(7)) - 3
	}
	return v
}

func TestSelectTopK(t *testing.T) {
	r := testkit.Rand(t)
	for _, m := range []Metric{Dot, L2} {
		for _, n := range []int{0, 1, 2, 9, 100, 1001} {
			for _, ties := range []bool{false, true} {
				scores := testkit.Vector(r, n)
				if ties {
					scores = fewScores(r, n)
				}
				for _, k := range []int{1, 2, 5, n - 1, n, n + 3} {
					if k < 1 {
						continue
					}
					name := fmt.Sprintf("%v/n%d/k%d/ties=%v", m, n, k, ties)
					sameHits(t, topk.SelectTopK(scores, k, m), sortedHits(scores, k, m), "%s", name)
				}
			}
		}
	}
}

func TestSelectTopKNothing(t *testing.T) {
	for _, got := range [][]Hit{
		topk.SelectTopK([]float32{1, 2}, 0, Dot),
		topk.SelectTopK([]float32{1, 2}, -1, L2),
		topk.SelectTopK([]float32{1, 2}, 1, Metric(9)),
		topk.SelectTopK(nil, 3, Dot),
	} {
		if got == nil || len(got) != 0 {
			t.Errorf("got %#v, want an empty non-nil slice", got)
		}
	}
}

// Merging the top-k of disjoint chunks must equal the top-k of the whole,
// which is how Search and SearchBatch combine their workers' answers.
func TestMergeTopK(t *testing.T) {
	r := testkit.Rand(t)
	for _, m := range []Metric{Dot, L2} {
		for _, ties := range []bool{false, true} {
			n := 1 + r.IntN(3000)
			scores := testkit.Vector(r, n)
			if ties {
				scores = fewScores(r, n)
			}
			for _, k := range []int{1, 3, 17, n, n + 2} {
				var parts []topk.Heap
				for lo := 0; lo < n; {
					hi := min(n, lo+1+r.IntN(400))
					part := topk.New(k, hi-lo, nil)
					keys := slices.Clone(scores[lo:hi])
					topk.ToKeys(m, keys)
					part.OfferKeys(keys, lo)
					parts = append(parts, part)
					lo = hi
				}
				r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
				for i := 1; i < len(parts); i++ {
					parts[0].Merge(&parts[i])
				}
				name := fmt.Sprintf("%v/n%d/k%d/ties=%v/parts%d", m, n, k, ties, len(parts))
				sameHits(t, parts[0].Result(m), sortedHits(scores, k, m), "%s", name)
			}
		}
	}
}
