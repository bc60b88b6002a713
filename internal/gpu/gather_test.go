//go:build cgo && !nogpu

package gpu

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestGatherScoresAreTheScans: gather.wgsl scores each listed row with the
// bits the scan gives it (every row read back by Scores), for both
// metrics, single queries and batches, lists from one row to every row,
// across chunk boundaries and dimensions that leave a partial team; it
// reads only the listed rows and issues one dispatch per chunk holding
// some, one submission and one map; a bad list is refused.
func TestGatherScoresAreTheScans(t *testing.T) {
	d := softwareDevice(t)
	r := testkit.Rand(t)
	ctx := context.Background()
	for _, dim := range []int{7, 24, 300} {
		const n, chunk = 1500, 640 // three chunks
		s, qs := fusedSlab(r, n, dim, 5)
		for _, metric := range []core.Metric{core.Dot, core.L2} {
			g, err := d.NewIndex(s.Stride, metric, chunk)
			require.NoError(t, err)
			require.NoError(t, g.Upload(ctx, s, 0, nil, nil))
			all := make([][]float32, len(qs))
			for qi, q := range qs {
				all[qi], err = g.Scores(ctx, q, n)
				require.NoError(t, err)
			}
			for _, frac := range []float64{0, 0.003, 0.1, 1} {
				var rows []uint32
				for i := range n {
					if r.Float64() < frac || frac > 0 && len(rows) == 0 && i == n-1 {
						rows = append(rows, uint32(i))
					}
				}
				for _, batch := range [][][]float32{qs[:1], qs} {
					what := fmt.Sprintf("dim %d metric %v, %d rows, %d queries", dim, metric, len(rows), len(batch))
					var st core.Stages
					got, err := g.Gather(ctx, batch, rows, &st)
					require.NoError(t, err, what)
					require.Len(t, got, len(rows)*len(batch), what)
					for qi := range batch {
						for i, row := range rows {
							if a, b := got[qi*len(rows)+i], all[qi][row]; math.Float32bits(a) != math.Float32bits(b) {
								t.Fatalf("%s: query %d row %d: gather %g, scan %g", what, qi, row, a, b)
							}
						}
					}
					if len(rows) == 0 {
						continue
					}
					chunks := map[uint32]bool{}
					for _, row := range rows {
						chunks[row/chunk] = true
					}
					require.Equal(t, "gather", st.Path, what)
					require.Equal(t, int64(len(chunks)), st.Dispatches, what)
					require.Equal(t, int64(1), st.Submissions, what)
					require.Equal(t, int64(1), st.Maps, what)
					require.Equal(t, int64(len(rows))*int64(s.Stride)*4*int64(len(batch)), st.BytesRead, what)
				}
			}
			_, err = g.Gather(ctx, qs[:1], []uint32{3, 2}, nil)
			require.ErrorIs(t, err, ErrFailed)
			_, err = g.Gather(ctx, qs[:1], []uint32{n}, nil)
			require.ErrorIs(t, err, ErrFailed)
			g.Release()
		}
	}
}
