package fallback

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// TestSearchRowsIsSearchOfTheSubset: a gather over listed rows answers
// exactly as Search (and SearchBatch) with the same rows in s.Allow — the
// same rows, the same score bits, ties by the lower ID — for every kernel
// set, both metrics, short and long rows (one and eight rows in step), a
// last row without its padding, subsets from none to every row, k above
// the subset, duplicate rows (so scores tie) and IDs that do not follow
// the rows. RangeRows answers as Range.
func TestSearchRowsIsSearchOfTheSubset(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	forEachKernel(t, func(t *testing.T) {
		for _, shape := range []struct{ dim, stride int }{{7, 8}, {96, 96}, {515, 516}, {768, 768}} {
			n := 700 + r.IntN(300)
			vs := testkit.Vectors(r, n, shape.dim)
			for i := range n / 10 { // duplicates: tied scores
				copy(vs[r.IntN(n)], vs[i])
			}
			s := newSlab(vs, shape.dim, shape.stride, r.IntN(2) == 0)
			if r.IntN(2) == 0 {
				s.IDs = make([]uint64, n)
				for i, p := range r.Perm(n) {
					s.IDs[i] = uint64(p) * 3
				}
			}
			for _, frac := range []float64{0, 0.002, 0.05, 0.5, 1} {
				var rows []uint32
				allow := make([]uint64, (n+63)/64)
				for i := range n {
					if r.Float64() < frac || frac > 0 && i == n-1 && r.IntN(2) == 0 {
						rows = append(rows, uint32(i))
						allow[i>>6] |= 1 << (i & 63)
					}
				}
				masked := s
				masked.Allow = allow
				qs := testkit.Vectors(r, 3, shape.dim)
				for _, m := range []Metric{Dot, L2} {
					for _, k := range []int{1, 10, len(rows) + 3} {
						name := fmt.Sprintf("%v dim %d stride %d, %d of %d rows, k %d", m, shape.dim, shape.stride, len(rows), n, k)
						want, err := SearchBatch(ctx, masked, qs, k, m, 0)
						require.NoError(t, err, name)
						got, err := SearchRowsBatch(ctx, s, rows, qs, k, m, 1+r.IntN(3))
						require.NoError(t, err, name)
						for j := range qs {
							one, err := Search(ctx, masked, qs[j], k, m, 0)
							require.NoError(t, err, name)
							require.Equal(t, hitBits(one), hitBits(want[j]), name)
							require.Equal(t, hitBits(want[j]), hitBits(got[j]), "%s, query %d", name, j)
						}
					}
					threshold := float32(0)
					if m == L2 {
						threshold = float32(shape.dim) / 2
					}
					want, err := Range(ctx, masked, qs[0], threshold, m, 0)
					require.NoError(t, err)
					got, err := RangeRows(ctx, s, rows, qs[0], threshold, m, 2)
					require.NoError(t, err)
					require.Equal(t, hitBits(want), hitBits(got), "range %v dim %d, %d rows", m, shape.dim, len(rows))
				}
			}
		}
	})
}

// hitBits is hits with each score as its bits, so -0 and +0 (and NaNs)
// compare as what they are.
func hitBits(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = fmt.Sprintf("%d:%08x", h.Row, math.Float32bits(h.Score))
	}
	return out
}

func TestCheckRows(t *testing.T) {
	s := Slab{Data: make([]float32, 40), Rows: 10, Dim: 4, Stride: 4}
	for _, bad := range [][]uint32{{10}, {3, 3}, {4, 2}, {0, 11}} {
		_, err := SearchRows(context.Background(), s, bad, make([]float32, 4), 3, Dot, 0)
		isErr(t, err, ErrRows)
	}
	hits, err := SearchRows(context.Background(), s, []uint32{}, make([]float32, 4), 3, Dot, 0)
	noErr(t, err)
	require.Empty(t, hits)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	big := Slab{Data: make([]float32, 4000*64), Rows: 4000, Dim: 64, Stride: 64}
	all := make([]uint32, 4000)
	for i := range all {
		all[i] = uint32(i)
	}
	_, err = SearchRows(ctx, big, all, make([]float32, 64), 3, Dot, 2)
	isErr(t, err, context.Canceled)
	require.True(t, slices.IsSorted(all))
}
