//go:build cgo && !nogpu

package gpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/shaders"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/internal/topk"
)

// TestFusedProbed: the probe self-tested the fused path on the software
// adapter and enabled it, with a limit for single queries.
func TestFusedProbed(t *testing.T) {
	d := softwareDevice(t)
	require.NoError(t, d.fusedErr)
	require.True(t, d.fused, "the fused path passed its self-test")
	g, err := d.NewIndex(768, core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	l := g.Limits()
	t.Logf("fused limit: k <= %d single, k <= %d batch (workgroup memory %d bytes)", l.FusedK, l.FusedBatchK, l.MaxWorkgroupBytes)
	require.Equal(t, uint32(shaders.FusedMaxK), l.FusedK)
	require.NotZero(t, l.FusedBatchK)
}

// fusedSlab is n rows of dim with about a third of them duplicates (exact
// ties, which only the row index orders) and a few rows equal to the
// first query's negation, plus nq queries.
func fusedSlab(r *rand.Rand, n, dim, nq int) (*packed.Slab, [][]float32) {
	s := packed.NewSlab(dim)
	vs := make([][]float32, n)
	for i := range vs {
		if i > 2 && r.IntN(3) == 0 {
			vs[i] = vs[r.IntN(i)]
			continue
		}
		vs[i] = make([]float32, dim)
		for j := range vs[i] {
			vs[i][j] = r.Float32()*2 - 1
		}
	}
	s.Append(vs, false)
	qs := make([][]float32, nq)
	for i := range qs {
		q := make([]float32, s.Stride)
		if i == 0 {
			copy(q, vs[0])
		} else {
			for j := 0; j < dim; j++ {
				q[j] = r.Float32()*2 - 1
			}
		}
		qs[i] = q
	}
	return s, qs
}

// TestFusedAndRadixMatchTheFallback compares the fused path and the radix
// path with the fallback's selection over the very same scores: k from 1
// to past the fused limit, N from 1 to past a chunk, single queries and
// batches, exact ties, masked: the lists must be identical, rows and
// order (ties by lower row).
func TestFusedAndRadixMatchTheFallback(t *testing.T) {
	d := softwareDevice(t)
	r := testkit.Rand(t)
	const dim, chunk = 24, 700 // 1500 rows: three chunks
	for _, n := range []int{1, 3, 150, 1500} {
		s, qs := fusedSlab(r, n, dim, 10)
		for _, metric := range []core.Metric{core.Dot, core.L2} {
			g, err := d.NewIndex(s.Stride, metric, chunk)
			require.NoError(t, err)
			require.NoError(t, g.Upload(context.Background(), s, 0, nil, nil))
			mask := make([]uint64, (n+63)/64)
			for i := 0; i < n; i++ {
				if r.IntN(4) != 0 {
					mask[i/64] |= 1 << (i % 64)
				}
			}
			ks := []int{1, 2, 10, 60, 61, 255, 256, 257, 600, n}
			// Every query's scores, read back once: the fallback selects
			// from them for each k and mask.
			all := make([][]float32, len(qs))
			for qi, q := range qs {
				all[qi], err = g.Scores(context.Background(), q, n)
				require.NoError(t, err)
			}
			for _, path := range []SelectPath{SelectAuto, SelectRadix} {
				ctx := WithSelectPath(context.Background(), path)
				// The fused scan with as many workgroups as it plans, and
				// with one or three a chunk, each looping over many steps.
				g.fusedGroups = []int{0, 1, 3}[r.IntN(3)]
				for _, k := range ks {
					if k > n {
						continue
					}
					for _, m := range [][]uint64{nil, mask} {
						for _, batch := range [][][]float32{qs[:1], qs} {
							what := fmt.Sprintf("n=%d metric=%d path=%d groups=%d k=%d masked=%v nq=%d", n, metric, path, g.fusedGroups, k, m != nil, len(batch))
							var st core.Stages
							got, err := g.Search(ctx, batch, k, n, m, &st)
							require.NoError(t, err, what)
							if path == SelectRadix {
								require.NotEqual(t, "fused", st.Path, what)
							}
							for qi := range batch {
								want := topk.SelectAllowed(all[qi], k, g.metric, m)
								require.Equal(t, want, got[qi], "%s query %d (took %s)", what, qi, st.Path)
							}
						}
					}
				}
			}
			g.Release()
		}
	}
}

// TestFusedCounts asserts what one search issues, counted where the wgpu
// calls are made: the fused path's one scan per chunk plus the merge, one
// submission, one map, and no score buffer read back; the radix path's 17
// select dispatches after the scores.
func TestFusedCounts(t *testing.T) {
	d := softwareDevice(t)
	r := testkit.Rand(t)
	const n, dim = 3000, 64
	s, qs := fusedSlab(r, n, dim, 8)
	stamps := int64(0) // a traced search maps its two timestamps with the hits
	if d.timestamps {
		stamps = 16
	}
	for _, chunk := range []int{0, 1000} {
		g, err := d.NewIndex(s.Stride, core.Dot, chunk)
		require.NoError(t, err)
		require.NoError(t, g.Upload(context.Background(), s, 0, nil, nil))
		chunks := int64((n + g.ChunkRows() - 1) / g.ChunkRows())
		for _, batch := range [][][]float32{qs[:1], qs} {
			nq := int64(len(batch))
			var st core.Stages
			_, err := g.Search(context.Background(), batch, 10, n, nil, &st)
			require.NoError(t, err)
			what := fmt.Sprintf("%d chunk(s), %d queries", chunks, nq)
			require.Equal(t, "fused", st.Path, what)
			require.Equal(t, chunks+1, st.Dispatches, what)
			require.Equal(t, int64(1), st.Submissions, what)
			require.Equal(t, int64(1), st.Maps, what)
			require.Equal(t, nq*10*shaders.HitBytes+stamps, st.BytesDown, what)
			require.Equal(t, nq*int64(s.Stride)*4+chunks*shaders.ParamsBytes+shaders.MergeParamsBytes, st.BytesUp, what)
			if chunks == 1 {
				require.LessOrEqual(t, st.Dispatches, int64(3), what)
			}

			st = core.Stages{}
			_, err = g.Search(WithSelectPath(context.Background(), SelectRadix), batch, 10, n, nil, &st)
			require.NoError(t, err)
			require.Equal(t, "radix", st.Path, what)
			require.Equal(t, chunks+18, st.Dispatches, what, "scores per chunk, 16 select rounds, compact and sort")
			require.Equal(t, int64(1), st.Submissions, what)
			require.Equal(t, int64(1), st.Maps, what)
			require.Equal(t, nq*10*shaders.HitBytes+stamps, st.BytesDown, what)
		}
		g.Release()
	}
}

// TestRadixSortLimit: the radix select's hits come back sorted by the
// device's sort pass up to shaders.SortLimit and by the host past it,
// identical either way to the fallback's selection over the same scores
// (rows and order, ties by lower row), masked or not; the sort pass is one
// more dispatch.
func TestRadixSortLimit(t *testing.T) {
	d := softwareDevice(t)
	r := testkit.Rand(t)
	const n, dim = 2*shaders.SortLimit + 3000, 4
	s, qs := fusedSlab(r, n, dim, 2)
	for _, metric := range []core.Metric{core.Dot, core.L2} {
		g, err := d.NewIndex(s.Stride, metric, 0)
		require.NoError(t, err)
		require.NoError(t, g.Upload(context.Background(), s, 0, nil, nil))
		chunks := int64((n + g.ChunkRows() - 1) / g.ChunkRows())
		mask := make([]uint64, (n+63)/64)
		for i := range mask {
			mask[i] = r.Uint64() | 1<<63 // at least the limit's rows stay allowed
		}
		all, err := g.Scores(context.Background(), qs[0], n)
		require.NoError(t, err)
		for _, k := range []int{shaders.FusedMaxK + 1, shaders.SortLimit - 1, shaders.SortLimit, shaders.SortLimit + 1} {
			for _, m := range [][]uint64{nil, mask} {
				what := fmt.Sprintf("metric=%d k=%d masked=%v", metric, k, m != nil)
				var st core.Stages
				got, err := g.Search(context.Background(), qs[:1], k, n, m, &st)
				require.NoError(t, err, what)
				require.Equal(t, "radix", st.Path, what)
				want := topk.SelectAllowed(all, k, g.metric, m)
				require.Equal(t, want, got[0], what)
				sorted := int64(1)
				if k > shaders.SortLimit {
					sorted = 0
				}
				require.Equal(t, chunks+17+sorted, st.Dispatches, what)
			}
		}
		g.Release()
	}
}

// TestMaskBitsPastRows: an allow bitmap with bits set past the rows
// searched (in its last word, and in a word past them) is refused
// nothing and counts only the rows below: k beyond the rows it allows
// returns those rows, never more. Before, the bits past rows counted, k
// passed the admissible rows, the device's selection found no threshold
// and the unfilled hit slots came back as hits (stale or past rows). No
// caller in the engine passes such a bitmap (its masks end at the rows,
// shard and overflow splits fall on words), but the device side no longer
// relies on that.
func TestMaskBitsPastRows(t *testing.T) {
	d := softwareDevice(t)
	r := testkit.Rand(t)
	const n, dim = 300, 16
	s, qs := fusedSlab(r, n, dim, 3)
	g, err := d.NewIndex(s.Stride, core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	require.NoError(t, g.Upload(context.Background(), s, 0, nil, nil))
	mask := make([]uint64, 6) // rows 0..383: a word past the rows, too
	for row := 250; row < 6*64; row++ {
		mask[row/64] |= 1 << (row % 64)
	}
	allowed := make([]uint64, len(mask))
	copy(allowed, mask)
	allowed[n/64] &= 1<<(n%64) - 1
	allowed[5] = 0
	view := fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride, Allow: allowed}
	for _, path := range []SelectPath{SelectAuto, SelectRadix} {
		for _, k := range []int{50, 60, 200} {
			for _, batch := range [][][]float32{qs[:1], qs} {
				got, err := g.Search(WithSelectPath(context.Background(), path), batch, k, n, mask, nil)
				require.NoError(t, err)
				for qi, q := range batch {
					want, err := fallback.Search(context.Background(), view, q, k, fallback.Dot, 1)
					require.NoError(t, err)
					require.Len(t, got[qi], 50, "path %v, k %d, %d queries: the 50 rows allowed below %d", path, k, len(batch), n)
					for i, h := range got[qi] {
						require.Less(t, h.Row, n, "a row past the rows searched")
						require.Equal(t, want[i].Row, h.Row, "path %v, k %d, query %d, rank %d", path, k, qi, i)
					}
				}
			}
		}
	}
}
