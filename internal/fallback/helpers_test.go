package fallback

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/umbravec/umbra/internal/parallel"
	"github.com/umbravec/umbra/internal/testkit"
)

// newSlab packs rows with the given stride. With short set, the last row
// has no padding in Data.
func newSlab(rows [][]float32, dim, stride int, short bool) Slab {
	n := len(rows) * stride
	if short && len(rows) > 0 {
		n -= stride - dim
	}
	data := make([]float32, n)
	for i, r := range rows {
		copy(data[i*stride:i*stride+dim], r)
	}
	return Slab{Data: data, Rows: len(rows), Dim: dim, Stride: stride}
}

// ref64 returns the float64 score and the sum of its terms' magnitudes,
// which bounds how much float32 rounding can move the score.
func ref64(m Metric, row, q []float32) (score, mag float64) {
	for i := range row {
		a, b := float64(row[i]), float64(q[i])
		t := a * b
		if m == L2 {
			t = (a - b) * (a - b)
		}
		score += t
		mag += math.Abs(t)
	}
	return score, mag
}

type ref64Hit struct {
	row   int
	score float64
	mag   float64
}

// kit is h as testkit's near-tie rule reads it.
func (h ref64Hit) kit() testkit.Ref {
	return testkit.Ref{ID: uint64(h.row), Score: h.score, Tol: testkit.Tolerance(h.score, h.mag)}
}

// refRanking ranks every row by its float64 score, ties by lower row.
func refRanking(m Metric, rows [][]float32, q []float32) []ref64Hit {
	out := make([]ref64Hit, len(rows))
	for i, r := range rows {
		s, mag := ref64(m, r, q[:len(r)])
		out[i] = ref64Hit{i, s, mag}
	}
	slices.SortStableFunc(out, func(a, b ref64Hit) int {
		if a.score == b.score {
			return 0
		}
		if (a.score > b.score) == (m == Dot) {
			return -1
		}
		return 1
	})
	return out
}

// assertRanked checks that hits are the k best of the reference ranking:
// at every position the row is the reference's, or one whose float64 score
// is a near-tie with it (testkit.NearTie).
func assertRanked(t *testing.T, m Metric, hits []Hit, ref []ref64Hit, k int, exact bool) {
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
			if m == L2 {
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
		if d := math.Abs(float64(h.Score) - got); d > testkit.Tolerance(got, r.mag) {
			t.Fatalf("hit %d: row %d score %g, float64 %g", i, h.Row, h.Score, got)
		}
		if h.Row == ref[i].row {
			continue
		}
		if exact {
			t.Fatalf("hit %d: row %d (%g), reference row %d (%g)", i, h.Row, got, ref[i].row, ref[i].score)
		}
		if !testkit.NearTie(r.kit(), ref[i].kit()) {
			t.Fatalf("hit %d: row %d (%g), reference row %d (%g): not a tie", i, h.Row, got, ref[i].row, ref[i].score)
		}
	}
}

// The module's go.sum does not yet list testify's dependencies, so these
// few helpers stand in for require/assert.

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

func sameHits(t testing.TB, got, want []Hit, format string, args ...any) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: hits differ\n got %v\nwant %v", fmt.Sprintf(format, args...), got, want)
	}
}

// scoreRows writes the score of every row of s for q into dst[:s.Rows] with
// Search's kernels, blocks and goroutines, so tests can check the rows
// kernel against float64 row by row and Search's selection against
// SelectTopK over all scores.
func scoreRows(ctx context.Context, dst []float32, s Slab, q []float32, m Metric, workers int) (err error) {
	defer parallel.Recover(&err)
	if err := checkMetric(m); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	qq, err := s.query(q)
	if err != nil {
		return err
	}
	if s.Rows == 0 {
		return nil
	}
	kern := active.rows(m)
	p := newPlan(s, rowsFor(blockBytes, s.Stride, 8))
	w := parallel.Workers(workers, p.nblocks, s.Rows*s.Stride)
	return parallel.Run(ctx, w, p.nblocks, func(_, b int) {
		lo, rows, n := p.block(b)
		kern(dst[lo:lo+n], qq, rows, p.stride)
	})
}
