package fallback

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/internal/topk"
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
		if topk.Allows(s.Allow, i) {
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

// Equal scores go to the lower ID on every search of this package —
// Search, SearchBatch, Range, and Within over read-back scores — whatever
// the rows the IDs sit at: the answer is the brute-force one sorted by
// score, then ID. (internal/exact's TestTiesGoToLowerID holds the
// compressed searches to these answers.)
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
				qs[j] = testkit.Grid(r, dim)
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
		}
		// Range, on the CPU's scan and over read-back scores (Within).
		ref := refs[0]
		if len(ref) == 0 {
			continue
		}
		th := ref[r.IntN(len(ref))].Score
		var want []Hit
		for _, h := range ref {
			if topk.Worse(Hit{Score: th}, h, m, nil) || topk.Tied(h.Score, th, m) {
				want = append(want, h)
			}
		}
		got, err := Range(ctx, s, qs[0], th, m, 2)
		noErr(t, err)
		sameHits(t, got, want, "%s Range %g", name, th)
		scores := make([]float32, n)
		noErr(t, scoreRows(ctx, scores, s, qs[0], m, 1))
		sameHits(t, topk.Within(scores, th, m, s.Allow, s.IDs), want, "%s Within %g", name, th)
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
