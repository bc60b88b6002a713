package exact

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/testkit"
)

// These helpers came with the tests from package fallback when the exact
// search of compressed rows moved here; the generator is the one every test
// draws from (testkit.Rand, replayed with UMBRA_SEED).

// newRand is the test's generator from testkit.
func newRand(t testing.TB) *rand.Rand { return testkit.Rand(t) }

// newSlab packs rows with the given stride. With short set, the last row
// has no padding in Data.
func newSlab(rows [][]float32, dim, stride int, short bool) fallback.Slab {
	n := len(rows) * stride
	if short && len(rows) > 0 {
		n -= stride - dim
	}
	data := make([]float32, n)
	for i, r := range rows {
		copy(data[i*stride:i*stride+dim], r)
	}
	return fallback.Slab{Data: data, Rows: len(rows), Dim: dim, Stride: stride}
}

type ref64Hit struct {
	row   int
	score float64
	mag   float64
}

// refRanking ranks every row by its float64 score, ties by lower row, with
// the sum of each score's terms' magnitudes, which bounds how much float32
// rounding can move it.
func refRanking(m core.Metric, rows [][]float32, q []float32) []ref64Hit {
	out := make([]ref64Hit, len(rows))
	for i, row := range rows {
		var score, mag float64
		for j := range row {
			a, b := float64(row[j]), float64(q[j])
			t := a * b
			if m == core.L2 {
				t = (a - b) * (a - b)
			}
			score += t
			mag += math.Abs(t)
		}
		out[i] = ref64Hit{i, score, mag}
	}
	slices.SortStableFunc(out, func(a, b ref64Hit) int {
		if a.score == b.score {
			return 0
		}
		if (a.score > b.score) == m.HigherIsBetter() {
			return -1
		}
		return 1
	})
	return out
}

// scoreTol is the accuracy asked of a float32 score: 1e-5*max(1, |ref|),
// or 1e-6 of the terms' magnitudes where they cancel.
func scoreTol(ref, mag float64) float64 {
	return math.Max(1e-5*math.Max(1, math.Abs(ref)), 1e-6*mag)
}

// assertRanked checks that hits are the k best of the reference ranking:
// at every position the row is the reference's, or (unless exact) one
// whose float64 score is within what two float32 scores of scoreTol
// accuracy can swap.
func assertRanked(t *testing.T, m core.Metric, hits []core.Hit, ref []ref64Hit, k int, exact bool) {
	t.Helper()
	want := min(k, len(ref))
	if len(hits) != want {
		t.Fatalf("got %d hits, want %d", len(hits), want)
	}
	byRow := make(map[int]ref64Hit, len(ref))
	for _, r := range ref {
		byRow[r.row] = r
	}
	seen := make(map[int]bool, len(hits))
	for i, h := range hits {
		if seen[h.Row] {
			t.Fatalf("row %d returned twice", h.Row)
		}
		seen[h.Row] = true
		if i > 0 {
			p := hits[i-1]
			better := p.Score > h.Score
			if m == core.L2 {
				better = p.Score < h.Score
			}
			if !better && !(p.Score == h.Score && p.Row < h.Row) {
				t.Fatalf("hits %d (%v) and %d (%v) out of order", i-1, p, i, h)
			}
		}
		r, ok := byRow[h.Row]
		if !ok {
			t.Fatalf("hit %d: row %d is not in the slab", i, h.Row)
		}
		got := r.score
		if d := math.Abs(float64(h.Score) - got); d > scoreTol(got, r.mag) {
			t.Fatalf("hit %d: row %d score %g, float64 %g", i, h.Row, h.Score, got)
		}
		if h.Row == ref[i].row {
			continue
		}
		if exact {
			t.Fatalf("hit %d: row %d (%g), reference row %d (%g)", i, h.Row, got, ref[i].row, ref[i].score)
		}
		if d := math.Abs(got - ref[i].score); d > scoreTol(got, r.mag)+scoreTol(ref[i].score, ref[i].mag) {
			t.Fatalf("hit %d: row %d (%g), reference row %d (%g): not a tie", i, h.Row, got, ref[i].row, ref[i].score)
		}
	}
}

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// isErr checks errors.Is(err, want); a nil want asks for no error.
func isErr(t testing.TB, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("got error %v, want %v", err, want)
	}
}

func sameHits(t testing.TB, got, want []core.Hit, format string, args ...any) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: hits differ\n got %v\nwant %v", fmt.Sprintf(format, args...), got, want)
	}
}

// scoreRows writes the float32 score of every row of s for q into
// dst[:s.Rows]: the scores fallback.Search ranks (fallback.ScoreRun).
func scoreRows(_ context.Context, dst []float32, s fallback.Slab, q []float32, m core.Metric, _ int) error {
	qq, err := fallback.CheckQuery(s, q, m)
	if err != nil {
		return err
	}
	fallback.ScoreRun(dst[:s.Rows], s, qq, 0, m)
	return nil
}

// The reference workload of fallback's benchmarks (fallback/bench_test.go):
// 50,000 rows of 768 floats, one query or a batch of 64, k = 10.
const (
	benchRows  = 50_000
	benchDim   = 768
	benchK     = 10
	benchBatch = 64
)

var benchData = sync.OnceValue(func() fallback.Slab {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]float32, benchRows*benchDim)
	for i := range data {
		data[i] = 2*r.Float32() - 1
	}
	return fallback.Slab{Data: data, Rows: benchRows, Dim: benchDim, Stride: benchDim}
})

func benchQueries(n int) [][]float32 {
	r := rand.New(rand.NewPCG(3, 4))
	qs := make([][]float32, n)
	for i := range qs {
		qs[i] = testkit.Vector(r, benchDim)
	}
	return qs
}

var sink float32
