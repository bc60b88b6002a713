package exact

import (
	"context"
	"fmt"
	"testing"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
)

// TestExactSearchRowsIsTheSubsetsAnswer: a gather over the listed rows of
// a compressed index answers exactly as the scan with the same rows in
// s.Allow, and as the float32 search of them (the same rows, score bits
// and ties by lower ID), on every data kind, both metrics, both
// precisions and every compressed kernel set, for subsets from none to
// every row and k above the subset; in the approximate mode too, whose
// estimates come from the same sums.
func TestExactSearchRowsIsTheSubsetsAnswer(t *testing.T) {
	forEachQuantKernel(t, func(t *testing.T) {
		r := newRand(t)
		ctx := context.Background()
		for kind := range nKinds {
			dim := []int{5, 96, 300}[r.IntN(3)]
			n := 300 + r.IntN(500)
			rows := makeRows(r, kind, n, dim)
			s := newSlab(rows, dim, (dim+3)&^3, r.IntN(2) == 0)
			if r.IntN(2) == 0 {
				s.IDs = make([]uint64, n)
				for i, p := range r.Perm(n) {
					s.IDs[i] = uint64(p)
				}
			}
			qs := [][]float32{makeQuery(r, kind, rows, dim), makeQuery(r, kind, rows, dim)}
			for _, p := range []core.Precision{core.Int8, core.F16} {
				c := compress(t, p, fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride})
				for _, frac := range []float64{0, 0.01, 0.2, 1} {
					var list []uint32
					masked := s
					masked.Allow = make([]uint64, (n+63)/64)
					for i := range n {
						if r.Float64() < frac {
							list = append(list, uint32(i))
							masked.Allow[i>>6] |= 1 << (i & 63)
						}
					}
					for _, m := range []core.Metric{core.Dot, core.L2} {
						for _, k := range []int{1, 10, len(list) + 2} {
							name := fmt.Sprintf("%v %v %v dim %d, %d of %d rows, k %d", kind, p, m, dim, len(list), n, k)
							want, _, err := ExactSearchBatch(ctx, masked, c, qs, k, m, 2, false)
							noErr(t, err)
							f32, err := fallback.SearchBatch(ctx, masked, qs, k, m, 2)
							noErr(t, err)
							got, st, err := ExactSearchRows(ctx, s, c, list, qs, k, m, 1+r.IntN(3), false)
							noErr(t, err)
							approxWant, _, err := ExactSearchBatch(ctx, masked, c, qs, k, m, 2, true)
							noErr(t, err)
							approx, _, err := ExactSearchRows(ctx, s, c, list, qs, k, m, 2, true)
							noErr(t, err)
							for j := range qs {
								sameBits(t, got[j], want[j], "%s query %d: gather against scan", name, j)
								sameBits(t, got[j], f32[j], "%s query %d: gather against float32", name, j)
								sameBits(t, approx[j], approxWant[j], "%s query %d: approximate gather against scan", name, j)
							}
							if st.Queries != len(qs) || st.BytesRead < int64(len(list))*int64(c.Stride) {
								t.Fatalf("%s: stats %+v for %d listed rows", name, st, len(list))
							}
						}
					}
				}
			}
		}
	})
}
