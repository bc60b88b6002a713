package exact

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/internal/topk"
)

// tieSlab makes n rows drawn from a few distinct grid vectors (so most rows
// have exact duplicates and ties fall at every rank), IDs a random
// permutation of random distinct values, and, sometimes, an allow bitmap
// (fallback/ties_test.go's slab for the same test of the float32 search).
func tieSlab(r *rand.Rand, n, dim int) (fallback.Slab, [][]float32) {
	distinct := make([][]float32, 1+r.IntN(6))
	for i := range distinct {
		distinct[i] = testkit.Grid(r, dim)
	}
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = distinct[r.IntN(len(distinct))]
	}
	s := newSlab(rows, dim, (dim+3)&^3, r.IntN(2) == 0)
	seen := map[uint64]bool{}
	s.IDs = make([]uint64, n)
	for i := range s.IDs {
		for {
			id := r.Uint64N(uint64(4 * n))
			if !seen[id] {
				seen[id], s.IDs[i] = true, id
				break
			}
		}
	}
	if r.IntN(3) == 0 {
		s.Allow = make([]uint64, (n+63)/64)
		for i := range n {
			if r.IntN(4) != 0 {
				s.Allow[i/64] |= 1 << (i % 64)
			}
		}
	}
	return s, distinct
}

// Equal scores go to the lower ID on the compressed searches too, on the
// CPU's scan and on a device's sums, whatever the rows the IDs sit at: the
// answers are the float32 search's (fallback's TestTiesGoToLowerID holds
// that one to the brute-force order by score, then ID), bit for bit.
func TestTiesGoToLowerID(t *testing.T) {
	r := newRand(t)
	ctx := context.Background()
	for trial := range 40 {
		m := []core.Metric{core.Dot, core.L2}[trial%2]
		dim := 1 + r.IntN(40)
		n := 1 + r.IntN(600)
		s, distinct := tieSlab(r, n, dim)
		nq := 1 + r.IntN(4)
		qs := make([][]float32, nq)
		for j := range qs {
			if r.IntN(2) == 0 {
				qs[j] = distinct[r.IntN(len(distinct))]
			} else {
				qs[j] = testkit.Grid(r, dim)
			}
		}
		name := fmt.Sprintf("trial %d %v n %d dim %d filtered %v", trial, m, n, dim, s.Allow != nil)
		for _, k := range []int{1, 1 + r.IntN(10), 1 + r.IntN(n), n, n + 2} {
			refs, err := fallback.SearchBatch(ctx, s, qs, k, m, 1+r.IntN(3))
			noErr(t, err)
			for _, p := range []core.Precision{core.F16, core.Int8} {
				c := compress(t, p, fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride})
				got, _, err := ExactSearchBatch(ctx, s, c, qs, k, m, 2, false)
				noErr(t, err)
				dev := simulatedSums(c, qs, r.IntN(n+1))
				sums, _, err := ExactSearchSums(ctx, s, c, qs, dev, 1, k, m, 2, false)
				noErr(t, err)
				all, _, err := ExactSearchBatch(ctx, s, c, qs, n, m, 2, true)
				noErr(t, err)
				approx, _, err := ExactSearchBatch(ctx, s, c, qs, k, m, 2, true)
				noErr(t, err)
				for j := range qs {
					sameHits(t, got[j], refs[j], "%s k %d query %d: %v ExactSearchBatch", name, k, j, p)
					sameHits(t, sums[j], refs[j], "%s k %d query %d: %v ExactSearchSums", name, k, j, p)
					// The estimates of duplicates are equal too: the k best
					// of them are the first k of all, ranked by ID.
					sameHits(t, approx[j], all[j][:min(k, len(all[j]))], "%s k %d query %d: %v approximate", name, k, j, p)
					for i := 1; i < len(all[j]); i++ {
						if topk.Worse(all[j][i-1], all[j][i], m, s.IDs) {
							t.Fatalf("%s query %d: %v approximate hits %d and %d out of order: %v", name, j, p, i-1, i, all[j])
						}
					}
				}
			}
		}
		// Range over compressed rows, at a threshold some rows tie with.
		ref, err := fallback.Search(ctx, s, qs[0], n, m, 1)
		noErr(t, err)
		if len(ref) == 0 {
			continue
		}
		th := ref[r.IntN(len(ref))].Score
		want, err := fallback.Range(ctx, s, qs[0], th, m, 2)
		noErr(t, err)
		for _, p := range []core.Precision{core.F16, core.Int8} {
			c := compress(t, p, fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride})
			got, _, err := ExactRange(ctx, s, c, qs[0], th, m, 2)
			noErr(t, err)
			sameHits(t, got, want, "%s %v ExactRange %g", name, p, th)
			got, _, err = ExactRangeSums(ctx, s, c, qs[0], simulatedSums(c, qs[:1], r.IntN(n+1)), th, m, 2)
			noErr(t, err)
			sameHits(t, got, want, "%s %v ExactRangeSums %g", name, p, th)
		}
	}
}
