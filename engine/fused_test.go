package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestFusedTopK compares the GPU's selection with the fallback for k from
// 1 to Len (across the fused path's limits, where larger k takes the radix
// select and from Len/2 the host's), N from 1 to past a chunk, single and
// batched, with duplicated rows (exact ties, ordered by lower ID) and with
// an allow filter, on every GPU backend.
func TestFusedTopK(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 20
	for ni, n := range []int{1, 7, 520, 1300} {
		base := testkit.Vectors(r, max(n/3, 1), dim)
		data := make([][]float32, n)
		for i := range data {
			data[i] = base[r.IntN(len(base))]
		}
		queries := append(testkit.Vectors(r, 9, dim), data[n-1])
		keep := func(id uint64) bool { return id%5 != 2 }
		for mi, m := range metrics {
			if !testkit.Whole() && (mi+ni)%len(metrics) != 0 {
				// The README's test command takes one metric per size, in
				// turn; CI (UMBRA_FULL=1) takes every metric at every size.
				continue
			}
			cpu := open(t, backends[0], engine.Config{Dim: dim, Metric: m})
			_, err := cpu.Add(context.Background(), umbra.Vectors(data))
			require.NoError(t, err)
			for _, b := range backends[1:] {
				t.Run(fmt.Sprintf("%s/%s/n%d", b.name, m, n), func(t *testing.T) {
					ix := open(t, b, engine.Config{Dim: dim, Metric: m}, 500)
					_, err := ix.Add(context.Background(), umbra.Vectors(data))
					require.NoError(t, err)
					requireSearchesMatch(t, m, cpu, ix, queries, []int{1, 3, 10, 59, 60, 61, 124, 125, 255, 256, 257, n / 2, n}, keep, nil)
				})
			}
		}
	}
}

// requireSearchesMatch requires ix's batched, single and filtered (keep)
// searches to return cpu's hits for every k in ks within 1..Len; check,
// when set, is called with each batch's trace.
func requireSearchesMatch(t *testing.T, m umbra.Metric, cpu, ix *engine.Index, queries [][]float32, ks []int, keep func(uint64) bool, check func(tr diag.Trace, what string)) {
	t.Helper()
	ctx := context.Background()
	for _, k := range ks {
		if k < 1 || k > ix.Len() {
			continue
		}
		for _, opts := range [][]umbra.SearchOption{nil, {umbra.AllowFunc(keep)}} {
			what := fmt.Sprintf("k=%d filtered=%v", k, opts != nil)
			want, err := cpu.SearchBatch(ctx, queries, k, opts...)
			require.NoError(t, err)
			var tr diag.Trace
			got, err := ix.SearchBatch(diag.WithTrace(ctx, &tr), queries, k, opts...)
			require.NoError(t, err)
			if check != nil {
				check(tr, what)
			}
			one, err := ix.Search(ctx, queries[3], k, opts...)
			require.NoError(t, err)
			require.Equal(t, got[3], one, "batched and single search differ, %s", what)
			for qi := range queries {
				requireSameHits(t, m, cpu.Vector, queries[qi], want[qi], got[qi], fmt.Sprintf("%s query %d (%s path)", what, qi, tr.SelectPath))
			}
		}
	}
}

// TestFusedTraceCounts: a traced search within the fused limit issues one
// scan per device chunk and one merge, in one submission and one map, and
// reads back only its k hits; Trace reports it.
func TestFusedTraceCounts(t *testing.T) {
	r := testkit.Rand(t)
	const dim, n, k = 32, 2000, 10
	data := testkit.Vectors(r, n, dim)
	for _, b := range backends[1:] {
		t.Run(b.name, func(t *testing.T) {
			for _, chunk := range []int{0, 1000} {
				ix := open(t, b, engine.Config{Dim: dim, Metric: umbra.Dot}, chunk)
				_, err := ix.Add(context.Background(), umbra.Vectors(data))
				require.NoError(t, err)
				if engine.DeviceLimits(ix).FusedK < k {
					t.Fatalf("the adapter's fused limit %d is below k = %d", engine.DeviceLimits(ix).FusedK, k)
				}
				chunks := int64(1)
				if chunk > 0 {
					chunks = n / int64(chunk)
				}
				for _, nq := range []int{1, 8} {
					var tr diag.Trace
					_, err := ix.SearchBatch(diag.WithTrace(context.Background(), &tr), data[:nq], k)
					require.NoError(t, err)
					what := fmt.Sprintf("%d chunk(s), %d queries", chunks, nq)
					require.Equal(t, "fused", tr.SelectPath, what)
					require.Equal(t, chunks+1, tr.Dispatches, what)
					require.Equal(t, int64(1), tr.Submissions, what)
					require.Equal(t, int64(1), tr.Maps, what)
					require.GreaterOrEqual(t, tr.BytesDown, int64(nq*k*8), what)
					require.Less(t, tr.BytesDown, int64(nq*k*8+64), what+": the hits (and two timestamps), no scores")
					require.Greater(t, tr.BytesUp, int64(nq*dim*4), what)
				}
				require.NoError(t, ix.Close())
			}
		})
	}
}

// TestNonFiniteOnTheRadixSelect runs the NaN, ±Inf and −0 ordering test
// with the radix select forced, so the path that serves k past the fused
// limit keeps the one order too (with the default, small k takes the
// fused path).
func TestNonFiniteOnTheRadixSelect(t *testing.T) {
	nonFiniteRanks(t, gpu.WithSelectPath(context.Background(), gpu.SelectRadix))
}

// TestTraceBytesRead: Trace.BytesRead and Searches show how often a
// search read the rows: on the GPU once per tile of gpu.BatchQueries
// queries, or of Limits.GemmQueries through gemm.wgsl (one for a single
// query), whichever path selects (fused within FusedK, radix past it and,
// under UMBRA_FULL, every score read back from k = n/2), across chunks and
// across the engine's pieces of a batch; on the CPU once per block of
// fallback.QueryBlock queries.
func TestTraceBytesRead(t *testing.T) {
	r := testkit.Rand(t)
	const dim, n = 32, 2000
	data := testkit.Vectors(r, n, dim)
	slabBytes := int64(n * dim * 4) // 32 is its own stride
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			chunks, ks := []int{700}, []int{10, 300}
			if testkit.Full() {
				chunks, ks = []int{0, 700}, []int{10, 300, n / 2}
			}
			for _, chunk := range chunks {
				ix := open(t, b, engine.Config{Dim: dim, Metric: umbra.L2}, chunk)
				_, err := ix.Add(context.Background(), umbra.Vectors(data))
				require.NoError(t, err)
				for _, kernel := range []gpu.BatchKernel{gpu.BatchTile, gpu.BatchGemm} {
					tile := gpu.BatchQueries
					switch {
					case b.device == engine.CPU:
						tile = fallback.QueryBlock(dim)
					case kernel == gpu.BatchGemm:
						tile = int(engine.DeviceLimits(ix).GemmQueries)
					}
					for _, k := range ks {
						for _, nq := range []int{1, 13, 64} {
							var tr diag.Trace
							ctx := diag.WithTrace(gpu.WithBatchKernel(context.Background(), kernel), &tr)
							_, err := ix.SearchBatch(ctx, data[:nq], k)
							require.NoError(t, err)
							passes := int64(1)
							if nq > 1 {
								passes = int64((nq + tile - 1) / tile)
							}
							what := fmt.Sprintf("chunk %d, kernel %d, k %d, %d queries (%s path)", chunk, kernel, k, nq, tr.SelectPath)
							require.Equal(t, b.name == "cpu", tr.Device == "cpu", what)
							require.Equal(t, nq, tr.Searches, what)
							require.Equal(t, passes*slabBytes, tr.BytesRead, what)
						}
					}
				}
			}
		})
	}
}

// TestTraceBytesReadOverflow: under Limits.Overflow the trace counts the
// device's passes over its rows (scores.wgsl's tiles, asked for) and the
// CPU's over the rows past them.
func TestTraceBytesReadOverflow(t *testing.T) {
	r := testkit.Rand(t)
	const dim, n, devRows = 32, 2000, 1024
	data := testkit.Vectors(r, n, dim)
	ix := open(t, backends[1], engine.Config{Dim: dim, Metric: umbra.Dot,
		Limits: engine.Limits{MaxDeviceBytes: devRows * dim * 4, Overflow: true}})
	_, err := ix.Add(context.Background(), umbra.Vectors(data))
	require.NoError(t, err)
	require.Equal(t, devRows, ix.Info().DeviceRows)
	for _, nq := range []int{1, 13, 64} {
		var tr diag.Trace
		ctx := gpu.WithBatchKernel(context.Background(), gpu.BatchTile)
		_, err := ix.SearchBatch(diag.WithTrace(ctx, &tr), data[:nq], 10)
		require.NoError(t, err)
		devPasses, hostPasses := int64(1), int64((nq+fallback.QueryBlock(dim)-1)/fallback.QueryBlock(dim))
		if nq > 1 {
			devPasses = int64((nq + gpu.BatchQueries - 1) / gpu.BatchQueries)
		}
		want := devPasses*devRows*dim*4 + hostPasses*(n-devRows)*dim*4
		require.Equal(t, want, tr.BytesRead, "%d queries", nq)
	}
}
