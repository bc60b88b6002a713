//go:build cgo && !nogpu

package gpu

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestGemmMatchesTheTiles: gemm.wgsl, the register-tiled batch kernel,
// writes every score the same bits as scores.wgsl's tiles (so a batch
// ranks as the single queries and the fused scan do), and a search through
// it returns the same hits, scores and ties, with and without an allow
// bitmap and resident tombstones, whole tiles and partial ones, across
// chunks; its trace shows it read the rows once per gemm tile.
func TestGemmMatchesTheTiles(t *testing.T) {
	d := softwareDevice(t)
	t.Logf("%s: gemm chosen for batches %v (self-test: %v)", d.info.Name, d.gemm, d.gemmErr)
	require.NoError(t, d.gemmErr, "gemm.wgsl passes its self-test")
	r := testkit.Rand(t)
	const n, chunk = 333, 100
	nqs, dims := []int{2, 17, 40}, []int{5, 768}
	if testkit.Full() {
		nqs, dims = []int{2, 17, 33, 70}, []int{5, 130, 768}
	}
	ctx := context.Background()
	tile, gemm := WithBatchKernel(ctx, BatchTile), WithBatchKernel(ctx, BatchGemm)
	for _, dim := range dims {
		slab := packed.NewSlab(dim)
		vs := make([][]float32, n)
		for i := range vs {
			if i > 2 && r.IntN(6) == 0 {
				vs[i] = vs[r.IntN(i)] // ties, which go to the lower row
				continue
			}
			vs[i] = make([]float32, dim)
			for j := range vs[i] {
				vs[i][j] = r.Float32()*2 - 1
			}
		}
		slab.Append(vs, false)
		qs := make([][]float32, slices.Max(nqs))
		for i := range qs {
			qs[i] = make([]float32, slab.Stride)
			for j := 0; j < dim; j++ {
				qs[i][j] = r.Float32()*2 - 1
			}
		}
		mask := make([]uint64, (n+63)/64)
		for i := 0; i < n; i++ {
			if r.IntN(3) > 0 {
				mask[i/64] |= 1 << (i % 64)
			}
		}
		for _, metric := range []core.Metric{core.Dot, core.L2} {
			g, err := newIndex(d, slab.Stride, metric, chunk)
			require.NoError(t, err)
			require.NoError(t, g.Upload(ctx, slab, 0, nil, nil))
			require.NotZero(t, g.gemm.RM)
			for _, nq := range nqs {
				what := fmt.Sprintf("dim %d %v, %d queries", dim, metric, nq)
				_, want, err := g.run(tile, qs[:nq], submission{Rows: n}, nil)
				require.NoError(t, err)
				var st core.Stages
				_, got, err := g.run(gemm, qs[:nq], submission{Rows: n}, &st)
				require.NoError(t, err)
				for i := range want {
					if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
						require.Failf(t, "gemm's score differs", "%s: query %d row %d: gemm %v, tiles %v", what, i/n, i%n, got[i], want[i])
					}
				}
				passes := int64((nq + int(g.gemm.QT) - 1) / int(g.gemm.QT))
				require.Equal(t, passes*int64(n)*int64(g.rowBytes()), st.BytesRead, what)
				for _, k := range []int{1, 10, 150} {
					for _, m := range [][]uint64{nil, mask} {
						want, err := g.Search(tile, qs[:nq], k, n, m, nil)
						require.NoError(t, err)
						var st core.Stages
						got, err := g.Search(gemm, qs[:nq], k, n, m, &st)
						require.NoError(t, err)
						require.Equal(t, want, got, "%s, k %d, masked %v", what, k, m != nil)
						require.Equal(t, "radix", st.Path, "gemm's scores are selected by the radix select")
					}
				}
			}
			// Tombstones resident on the device.
			g.MarkDead([]int{0, 7, 99, 100, 101, n - 1})
			want, err := g.Search(tile, qs[:17], 20, n, nil, nil)
			require.NoError(t, err)
			got, err := g.Search(gemm, qs[:17], 20, n, nil, nil)
			require.NoError(t, err)
			require.Equal(t, want, got, "dim %d %v with tombstones", dim, metric)
			g.Release()
		}
	}
}

// TestGemmUnderAuto: with no kernel asked for, a batch of GemmMinBatch
// queries or more takes gemm.wgsl exactly when the probe chose it
// (Limits.Gemm), smaller batches scores.wgsl's tiles, as the rows read
// show.
func TestGemmUnderAuto(t *testing.T) {
	d := softwareDevice(t)
	r := testkit.Rand(t)
	const n, dim = 500, 64
	slab := packed.NewSlab(dim)
	vs := make([][]float32, n)
	for i := range vs {
		vs[i] = testkit.Vector(r, dim)
	}
	slab.Append(vs, false)
	g, err := newIndex(d, slab.Stride, core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	require.NoError(t, g.Upload(context.Background(), slab, 0, nil, nil))
	require.Equal(t, d.gemm, g.Limits().Gemm)
	require.Equal(t, g.gemm.QT, g.Limits().GemmQueries)
	for _, c := range []struct{ nq, k int }{{GemmMinBatch - 1, 10}, {GemmMinBatch, 10}, {64, 10}, {64, 300}} {
		nq := c.nq
		qs := make([][]float32, nq)
		for i := range qs {
			qs[i] = slab.PaddedRow(r.IntN(n))
		}
		var st core.Stages
		_, err := g.Search(context.Background(), qs, c.k, n, nil, &st)
		require.NoError(t, err)
		qt := int(g.batch.QT)
		if d.gemm && nq >= GemmMinBatch {
			qt = int(g.gemm.QT)
		}
		require.Equal(t, int64((nq+qt-1)/qt)*n*int64(g.rowBytes()), st.BytesRead, "%d queries, k %d, gemm chosen %v", nq, c.k, d.gemm)
	}
}
