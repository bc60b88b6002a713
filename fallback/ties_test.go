package fallback

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/umbravec/umbra/internal/testkit"
)

// tieRef is the brute-force answer the tie tests compare with: every
// allowed row's score from the rows kernel, sorted best first by its own
// comparison (written here, not worse's): by score (larger under Dot,
// smaller under L2, -0 == +0, NaN last), then by lower ID.
func tieRef(t *testing.T, s Slab, q []float32, m Metric, ids []uint64) []Hit {
	t.Helper()
	scores := make([]float32, s.Rows)
	noErr(t, scoreRows(context.Background(), scores, s, q, m, 1))
	var hits []Hit
	for i, sc := range scores {
		if allows(s.Allow, i) {
			hits = append(hits, Hit{Row: i, Score: sc})
		}
	}
	id := func(row int) uint64 {
		if ids == nil {
			return uint64(row)
		}
		return ids[row]
	}
	slices.SortFunc(hits, func(a, b Hit) int {
		an, bn := a.Score != a.Score, b.Score != b.Score
		switch {
		case an != bn:
			if an {
				return 1
			}
			return -1
		case !an && a.Score != b.Score:
			c := cmp.Compare(b.Score, a.Score)
			if m == L2 {
				c = -c
			}
			return c
		}
		return cmp.Compare(id(a.Row), id(b.Row))
	})
	return hits
}

// tieSlab makes n rows drawn from a few distinct grid vectors (so most rows
// have exact duplicates and ties fall at every rank), IDs a random
// permutation of random distinct values, and, sometimes, an allow bitmap.
func tieSlab(r *rand.Rand, n, dim int) (Slab, [][]float32) {
	distinct := make([][]float32, 1+r.IntN(6))
	for i := range distinct {
		distinct[i] = gridVec(r, dim)
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

// Equal scores go to the lower ID on every search of this package —
// Search, SearchBatch, Range, Within, and the compressed searches on the
// CPU's scan and on a device's sums — whatever the rows the IDs sit at: the
// answer is the brute-force one sorted by score, then ID.
func TestTiesGoToLowerID(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	for trial := range 40 {
		m := []Metric{Dot, L2}[trial%2]
		dim := 1 + r.IntN(40)
		n := 1 + r.IntN(600)
		s, distinct := tieSlab(r, n, dim)
		nq := 1 + r.IntN(4)
		qs := make([][]float32, nq)
		for j := range qs {
			if r.IntN(2) == 0 {
				qs[j] = distinct[r.IntN(len(distinct))]
			} else {
				qs[j] = gridVec(r, dim)
			}
		}
		name := fmt.Sprintf("trial %d %v n %d dim %d filtered %v", trial, m, n, dim, s.Allow != nil)
		refs := make([][]Hit, nq)
		for j, q := range qs {
			refs[j] = tieRef(t, s, q, m, s.IDs)
		}
		for _, k := range []int{1, 1 + r.IntN(10), 1 + r.IntN(n), n, n + 2} {
			batch, err := SearchBatch(ctx, s, qs, k, m, 1+r.IntN(3))
			noErr(t, err)
			for j, q := range qs {
				want := refs[j][:min(k, len(refs[j]))]
				one, err := Search(ctx, s, q, k, m, 1+r.IntN(3))
				noErr(t, err)
				sameHits(t, one, want, "%s k %d query %d: Search", name, k, j)
				sameHits(t, batch[j], want, "%s k %d query %d: SearchBatch", name, k, j)
			}
			for _, p := range []Precision{F16, Int8} {
				c := compress(t, p, Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride})
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
					want := refs[j][:min(k, len(refs[j]))]
					sameHits(t, got[j], want, "%s k %d query %d: %v ExactSearchBatch", name, k, j, p)
					sameHits(t, sums[j], want, "%s k %d query %d: %v ExactSearchSums", name, k, j, p)
					// The estimates of duplicates are equal too: the k best
					// of them are the first k of all, ranked by ID.
					sameHits(t, approx[j], all[j][:min(k, len(all[j]))], "%s k %d query %d: %v approximate", name, k, j, p)
					for i := 1; i < len(all[j]); i++ {
						if Worse(all[j][i-1], all[j][i], m, s.IDs) {
							t.Fatalf("%s query %d: %v approximate hits %d and %d out of order: %v", name, j, p, i-1, i, all[j])
						}
					}
				}
			}
		}
		// Range, on the CPU's scan and over read-back scores (Within), and
		// over compressed rows.
		ref := refs[0]
		if len(ref) == 0 {
			continue
		}
		th := ref[r.IntN(len(ref))].Score
		var want []Hit
		for _, h := range ref {
			if Worse(Hit{Score: th}, h, m, nil) || Tied(h.Score, th, m) {
				want = append(want, h)
			}
		}
		got, err := Range(ctx, s, qs[0], th, m, 2)
		noErr(t, err)
		sameHits(t, got, want, "%s Range %g", name, th)
		scores := make([]float32, n)
		noErr(t, scoreRows(ctx, scores, s, qs[0], m, 1))
		sameHits(t, Within(scores, th, m, s.Allow, s.IDs), want, "%s Within %g", name, th)
		for _, p := range []Precision{F16, Int8} {
			c := compress(t, p, Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride})
			got, _, err := ExactRange(ctx, s, c, qs[0], th, m, 2)
			noErr(t, err)
			sameHits(t, got, want, "%s %v ExactRange %g", name, p, th)
			got, _, err = ExactRangeSums(ctx, s, c, qs[0], simulatedSums(c, qs[:1], r.IntN(n+1)), th, m, 2)
			noErr(t, err)
			sameHits(t, got, want, "%s %v ExactRangeSums %g", name, p, th)
		}
	}
}

// The case, in the fallback's terms: two equal rows, the lower ID
// at the higher row, k = 1.
func TestTieAtRankK(t *testing.T) {
	ctx := context.Background()
	v := []float32{0.6, 0.8, 0, 0}
	s := newSlab([][]float32{v, v}, 4, 4, false)
	s.IDs = []uint64{10, 5}
	for _, m := range []Metric{Dot, L2} {
		hits, err := Search(ctx, s, v, 1, m, 1)
		noErr(t, err)
		if len(hits) != 1 || hits[0].Row != 1 {
			t.Errorf("%v: got %v, want row 1 (ID 5)", m, hits)
		}
		all, err := Range(ctx, s, v, hits[0].Score, m, 1)
		noErr(t, err)
		if len(all) != 2 || all[0].Row != 1 {
			t.Errorf("%v: range got %v, want row 1 (ID 5) first", m, all)
		}
	}
}

// Rerank puts each run of equal scores (-0 == +0, NaN == NaN) in ID order
// and moves nothing else.
func TestRerank(t *testing.T) {
	nan := float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	ids := []uint64{7, 3, 9, 1, 4, 2, 8}
	hits := []Hit{{0, 2}, {1, 1}, {2, 1}, {3, 0}, {4, negZero}, {5, nan}, {6, nan}}
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
