package fallback

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/internal/topk"
)

// TestAllowAndRange: with an allow bitmap Search and SearchBatch return the
// true top k among the allowed rows only (fewer when fewer are allowed,
// down to one row in thousands), and Range returns exactly the allowed rows
// within the threshold, best first — compared with brute force over the
// scores of every row.
func TestAllowAndRange(t *testing.T) {
	r := testkit.Rand(t)
	const rows, dim = 3001, 24
	data := make([]float32, rows*dim)
	for i := range data {
		data[i] = r.Float32()*2 - 1
	}
	qs := make([][]float32, 5)
	for i := range qs {
		qs[i] = make([]float32, dim)
		for j := range qs[i] {
			qs[i][j] = r.Float32()*2 - 1
		}
	}
	ctx := context.Background()
	for _, m := range []Metric{Dot, L2} {
		for _, frac := range []float64{1, 0.5, 0.01, 0.0005, 0} {
			allow := make([]uint64, (rows+63)/64)
			allowed := 0
			for i := 0; i < rows; i++ {
				if r.Float64() < frac {
					allow[i>>6] |= 1 << (uint(i) & 63)
					allowed++
				}
			}
			s := Slab{Data: data, Rows: rows, Dim: dim, Stride: dim, Allow: allow}
			all := Slab{Data: data, Rows: rows, Dim: dim, Stride: dim}
			batch, err := SearchBatch(ctx, s, qs, 10, m, 0)
			require.NoError(t, err)
			for qi, q := range qs {
				scores := make([]float32, rows)
				require.NoError(t, scoreRows(ctx, scores, all, q, m, 0))
				// The reference: every allowed row, ranked by the shared rule.
				var ref []Hit
				for i, sc := range scores {
					if topk.Allows(s.Allow, i) {
						ref = append(ref, Hit{Row: i, Score: sc})
					}
				}
				masked := make([]float32, len(ref))
				for i, h := range ref {
					masked[i] = h.Score
				}
				want := topk.SelectTopK(masked, 10, m)
				for i := range want {
					want[i].Row = ref[want[i].Row].Row
				}
				got, err := Search(ctx, s, q, 10, m, 0)
				require.NoError(t, err)
				require.Equal(t, want, got, "%s, %.4f allowed (%d rows), query %d", m, frac, allowed, qi)
				require.Equal(t, want, batch[qi], "batch: %s, %.4f allowed, query %d", m, frac, qi)

				// Range at the score of the 7th best allowed row (or any
				// value when fewer are allowed).
				threshold := float32(0.5)
				if m == L2 {
					threshold = 8
				}
				if len(want) >= 7 {
					threshold = want[6].Score
				}
				within, err := Range(ctx, s, q, threshold, m, 0)
				require.NoError(t, err)
				var wantRange []Hit
				for _, h := range topk.SelectTopK(masked, len(masked), m) {
					if (m == Dot && h.Score >= threshold) || (m == L2 && h.Score <= threshold) {
						wantRange = append(wantRange, Hit{Row: ref[h.Row].Row, Score: h.Score})
					}
				}
				if wantRange == nil {
					wantRange = []Hit{}
				}
				require.Equal(t, wantRange, within, "range: %s, %.4f allowed, query %d", m, frac, qi)
			}
		}
	}
	// NaN is within no threshold.
	nan := Slab{Data: []float32{float32(math.Inf(1)), float32(math.Inf(-1)), 1, 1}, Rows: 2, Dim: 2, Stride: 2}
	within, err := Range(ctx, nan, []float32{1, 1}, -1e30, Dot, 0)
	require.NoError(t, err)
	require.Equal(t, []Hit{{Row: 1, Score: 2}}, within)
}
