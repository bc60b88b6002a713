package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// shardSet is one way to shard an index in the tests: lavapipe (Vulkan)
// and llvmpipe (GL) as two adapters, and two device sides on lavapipe.
type shardSet struct {
	name   string
	shards []engine.AdapterSelect
}

var shardSets = []shardSet{
	{"vulkan+gl", []engine.AdapterSelect{{Backend: "vulkan"}, {Backend: "gl"}}},
	{"vulkan+vulkan", []engine.AdapterSelect{{Backend: "vulkan"}, {Backend: "vulkan"}}},
}

// openSharded creates an index over set's adapters (Device GPU, or Auto
// taking software adapters with auto), equal shares, chunkRows rows in a
// device buffer; it skips (with UMBRA_REQUIRE_GPU=1 fails) when an adapter
// is missing.
func openSharded(t *testing.T, set shardSet, cfg engine.Config, chunkRows int, auto bool) *engine.Index {
	t.Helper()
	cfg.Adapters, cfg.Device = set.shards, engine.GPU
	if auto {
		cfg.Device = engine.Auto
	}
	ix, err := engine.NewSharded(context.Background(), cfg, chunkRows, auto)
	if err == nil && ix.Info().Device != engine.GPU {
		err = fmt.Errorf("fell back: %s", ix.Info().Reason)
	}
	if err != nil {
		testkit.NoGPU(t, "the %s shards do not work: %v", set.name, err)
	}
	t.Cleanup(func() { ix.Close() })
	info := ix.Info()
	require.Len(t, info.Shards, len(set.shards))
	for i, s := range info.Shards {
		require.Equal(t, set.shards[i].Backend, s.Adapter.API, "shard %d", i)
	}
	return ix
}

// requireSplit asserts the shards hold every one of rows rows, in
// contiguous segments from row 0 starting on multiples of 64, and, with
// rows past 64 per shard, none of them empty.
func requireSplit(t *testing.T, ix *engine.Index, rows int) {
	t.Helper()
	info := ix.Info()
	next := 0
	for i, s := range info.Shards {
		require.Equal(t, next, s.Start, "shard %d starts where the one before ends: %+v", i, info.Shards)
		require.Zero(t, s.Start%64, "shard %d starts on a bitmap word", i)
		if rows >= 128*len(info.Shards) {
			require.Positive(t, s.Rows, "shard %d holds rows: %+v", i, info.Shards)
		}
		next += s.Rows
	}
	require.Equal(t, rows, next, "the shards hold every row: %+v", info.Shards)
	require.Equal(t, rows, info.DeviceRows)
}

// TestShardsMatchFallback compares sharded searches with the fallback for
// k from 1 to Len, N from 1 to past a chunk on each shard, single and
// batched, with duplicated rows (exact ties, by lower ID) and with an
// allow filter, on lavapipe+llvmpipe and on two lavapipe device sides.
func TestShardsMatchFallback(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 20
	for _, set := range shardSets {
		for _, n := range []int{1, 7, 130, 1300} {
			base := testkit.Vectors(r, max(n/3, 1), dim)
			data := make([][]float32, n)
			for i := range data {
				data[i] = base[r.IntN(len(base))]
			}
			queries := append(testkit.Vectors(r, 9, dim), data[n-1], data[0])
			keep := func(id uint64) bool { return id%5 != 2 }
			ms := metrics
			if set.name != "vulkan+gl" {
				ms = []umbra.Metric{umbra.L2}
			}
			for _, m := range ms {
				t.Run(fmt.Sprintf("%s/%s/n%d", set.name, m, n), func(t *testing.T) {
					cpu := open(t, backends[0], engine.Config{Dim: dim, Metric: m})
					_, err := cpu.Add(context.Background(), umbra.Vectors(data))
					require.NoError(t, err)
					ix := openSharded(t, set, engine.Config{Dim: dim, Metric: m}, 500, false)
					_, err = ix.Add(context.Background(), umbra.Vectors(data))
					require.NoError(t, err)
					requireSplit(t, ix, n)
					requireSearchesMatch(t, m, cpu, ix, queries, []int{1, 3, 10, 63, 64, 65, 256, 257, n / 2, n - 1, n}, keep,
						func(tr diag.Trace, what string) { require.Equal(t, "gpu", tr.Device, what) })
				})
			}
		}
	}
}

// integerRows returns n rows drawn from few distinct ones with small
// integer components, so every dot product and squared distance is exact
// in float32 on every backend in any summation order: equal scores are
// equal bit for bit, and the only correct order among them is by lower ID.
func integerRows(r *rand.Rand, n, distinct, dim int) [][]float32 {
	base := make([][]float32, distinct)
	for i := range base {
		base[i] = make([]float32, dim)
		for j := range base[i] {
			base[i][j] = float32(r.IntN(5) - 2)
		}
		base[i][0] = float32(i%3 + 1) // never a zero row
	}
	out := make([][]float32, n)
	for i := range out {
		out[i] = base[r.IntN(distinct)]
	}
	return out
}

// TestShardsTiesExact: rows duplicated across both shards, with scores
// exact on every backend, come back exactly as the fallback's — the same
// IDs in the same order, ties by lower ID across the shards' boundary.
func TestShardsTiesExact(t *testing.T) {
	r := testkit.Rand(t)
	const dim, n = 8, 1100
	data := integerRows(r, n, 12, dim)
	queries := integerRows(r, 5, 7, dim)
	for _, m := range []umbra.Metric{umbra.Dot, umbra.L2} {
		t.Run(m.String(), func(t *testing.T) {
			cpu := open(t, backends[0], engine.Config{Dim: dim, Metric: m})
			ix := openSharded(t, shardSets[0], engine.Config{Dim: dim, Metric: m}, 300, false)
			for _, x := range []*engine.Index{cpu, ix} {
				_, err := x.Add(context.Background(), umbra.Vectors(data))
				require.NoError(t, err)
			}
			requireSplit(t, ix, n)
			for _, k := range []int{1, 5, 100, 549, 550, 551, 1099, 1100} {
				want, err := cpu.SearchBatch(context.Background(), queries, k)
				require.NoError(t, err)
				got, err := ix.SearchBatch(context.Background(), queries, k)
				require.NoError(t, err)
				require.Equal(t, want, got, "k=%d", k)
			}
			// One search asks each shard once: a submission and a map
			// each, counted together.
			var tr diag.Trace
			_, err := ix.Search(diag.WithTrace(context.Background(), &tr), queries[0], 5)
			require.NoError(t, err)
			require.Equal(t, int64(2), tr.Submissions)
			require.Equal(t, int64(2), tr.Maps)
		})
	}
}

// TestShardsThroughWrites: appends in several calls (the later ones redo
// the split), upserts on either shard, deletes, compaction and range
// searches all keep the sharded answers equal to the fallback's.
func TestShardsThroughWrites(t *testing.T) {
	for _, set := range shardSets[:1] {
		t.Run(set.name, func(t *testing.T) {
			r := testkit.Rand(t)
			const dim = 10
			ctx := context.Background()
			ix := openSharded(t, set, engine.Config{Dim: dim, Metric: umbra.L2}, 100, false)
			ref := open(t, backends[0], engine.Config{Dim: dim, Metric: umbra.L2})
			data := testkit.Vectors(r, 1200, dim)
			rows := 0
			for _, step := range []int{50, 150, 100, 300, 600} {
				for _, x := range []*engine.Index{ix, ref} {
					_, err := x.Add(ctx, umbra.Vectors(data[rows:rows+step]))
					require.NoError(t, err)
				}
				rows += step
				requireSplit(t, ix, rows)
			}
			first := ix.Info().Shards[1].Start
			qs := testkit.Vectors(r, 3, dim)
			same := func(what string) {
				t.Helper()
				n := ix.Len()
				allow := []uint64{1, 5, uint64(first - 1), uint64(first), uint64(first + 1), 1199, 4000}
				requireSameAnswers(t, umbra.L2, ref, ix, qs, []int{1, 7, first - 1, first, first + 1, 600, n - 1, n}, allow, n/2, what)
			}
			same("after adds")
			up := testkit.Vectors(r, 4, dim)
			for _, x := range []*engine.Index{ix, ref} {
				// a row on the first shard, one on each side of the
				// boundary, and a new one
				require.NoError(t, testkit.ErrOf(x.Upsert(ctx, umbra.Vectors(up), umbra.WithIDs([]uint64{3, uint64(first - 1), uint64(first), 9000}...))))
				require.NoError(t, x.Delete(ctx, umbra.WithIDs(4, 10, uint64(first+2), 1100)))
			}
			same("after upserts and deletes")
			// Enough new rows to double them: a new split, whose shards
			// must carry the tombstones at their new local rows.
			before := ix.Info().Shards[1].Start
			more := testkit.Vectors(r, 1300, dim)
			for _, x := range []*engine.Index{ix, ref} {
				_, err := x.Add(ctx, umbra.Vectors(more))
				require.NoError(t, err)
			}
			require.NotEqual(t, before, ix.Info().Shards[1].Start, "the adds did not re-split")
			first = ix.Info().Shards[1].Start
			same("after deletes and a re-split")
			for _, x := range []*engine.Index{ix, ref} {
				require.NoError(t, x.Compact(ctx))
			}
			requireSplit(t, ix, ix.Len())
			first = ix.Info().Shards[1].Start
			same("after compaction")
		})
	}
}

// TestShardFault fails one shard. Under Device GPU the search returns
// ErrGPU naming the shard, never the other shard's hits alone, and once
// the fault is gone the answers are exact again; an Add it fails stores
// nothing. Under Auto the failing search and later ones are answered
// exactly on the CPU, and recovery brings every shard back.
func TestShardFault(t *testing.T) {
	set := shardSets[0]
	r := testkit.Rand(t)
	const dim = 12
	ctx := context.Background()
	data := testkit.Vectors(r, 900, dim)
	qs := testkit.Vectors(r, 4, dim)
	ref := open(t, backends[0], engine.Config{Dim: dim, Metric: umbra.Dot})
	_, err := ref.Add(ctx, umbra.Vectors(data))
	require.NoError(t, err)
	same := func(ix *engine.Index, what string) {
		t.Helper()
		want, err := ref.SearchBatch(ctx, qs, 20)
		require.NoError(t, err)
		got, err := ix.SearchBatch(ctx, qs, 20)
		require.NoError(t, err, what)
		for i := range qs {
			requireSameHits(t, umbra.Dot, ref.Vector, qs[i], want[i], got[i], fmt.Sprintf("%s: query %d", what, i))
		}
	}
	t.Run("gpu", func(t *testing.T) {
		ix := openSharded(t, set, engine.Config{Dim: dim, Metric: umbra.Dot}, 0, false)
		_, err := ix.Add(ctx, umbra.Vectors(data[:800]))
		require.NoError(t, err)
		for shard := range set.shards {
			engine.SetShardFault(ix, shard, func(string) error { return errDeviceGone })
			_, err := ix.SearchBatch(ctx, qs, 20)
			require.ErrorIs(t, err, engine.ErrGPU, "shard %d failed", shard)
			require.Contains(t, err.Error(), fmt.Sprintf("shard %d", shard))
			engine.SetShardFault(ix, shard, nil)
		}
		// Appends go to the last shard: failing it fails the Add whole.
		engine.SetShardFault(ix, 1, func(string) error { return errDeviceGone })
		_, err = ix.Add(ctx, umbra.Vectors(data[800:]))
		require.ErrorIs(t, err, engine.ErrGPU)
		require.Equal(t, 800, ix.Len(), "a failed Add stores nothing")
		engine.SetShardFault(ix, 1, nil)
		// An Upsert the first shard fails is undone; the device rows may
		// be stale, so searches refuse until the next write uploads every
		// row again (with a new split).
		engine.SetShardFault(ix, 0, func(string) error { return errDeviceGone })
		_, err = ix.Upsert(ctx, umbra.Vectors([][]float32{data[5]}), umbra.WithIDs([]uint64{3}...))
		require.ErrorIs(t, err, engine.ErrGPU)
		engine.SetShardFault(ix, 0, nil)
		if _, err := ix.SearchBatch(ctx, qs, 20); err != nil {
			require.ErrorIs(t, err, engine.ErrGPU, "a stale device refuses, never answers")
		}
		_, err = ix.Add(ctx, umbra.Vectors(data[800:]))
		require.NoError(t, err)
		requireSplit(t, ix, len(data))
		same(ix, "after the faults")
	})
	t.Run("auto", func(t *testing.T) {
		ix := openSharded(t, set, engine.Config{Dim: dim, Metric: umbra.Dot}, 0, true)
		_, err := ix.Add(ctx, umbra.Vectors(data))
		require.NoError(t, err)
		same(ix, "before the fault")
		engine.SetShardFault(ix, 1, func(string) error { return errDeviceGone })
		var tr diag.Trace
		want, err := ref.Search(ctx, qs[0], 20)
		require.NoError(t, err)
		got, err := ix.Search(diag.WithTrace(ctx, &tr), qs[0], 20)
		require.NoError(t, err, "the search shard 1 failed is answered on the CPU")
		requireSameHits(t, umbra.Dot, ref.Vector, qs[0], want, got, "the failed search")
		require.Equal(t, "cpu", tr.Device)
		require.Contains(t, ix.Info().LastFailure, "shard 1")
		same(ix, "while recovering")
		require.Eventually(t, func() bool { return ix.Info().Recoveries > 0 }, time.Minute, time.Millisecond,
			"no recovery within a minute: %s", ix.Info().Reason)
		require.Equal(t, engine.GPU, ix.Info().Device)
		requireSplit(t, ix, len(data))
		tr = diag.Trace{}
		got, err = ix.Search(diag.WithTrace(ctx, &tr), qs[0], 20)
		require.NoError(t, err)
		require.Equal(t, "gpu", tr.Device)
		requireSameHits(t, umbra.Dot, ref.Vector, qs[0], want, got, "after recovery")
		same(ix, "after recovery")
	})
}

// TestShardsRefused: Shards with what it does not support is a
// configuration error, and a shard no adapter matches is named in the
// error (Device GPU) or in the fallback's reason (Auto).
func TestShardsRefused(t *testing.T) {
	two := shardSets[0].shards
	for _, cfg := range []engine.Config{
		{Dim: 8, Adapters: two, Device: engine.CPU},
		{Dim: 8, Adapters: two, Limits: engine.Limits{Overflow: true, MaxDeviceBytes: 1 << 20}},
		{Dim: 8, Adapters: two, Isolate: true},
		{Dim: 8, Adapters: two, Precision: umbra.F16},
		{Dim: 8, Adapters: []engine.AdapterSelect{{Backend: "vulkan"}, {Backend: "glide"}}},
	} {
		_, err := engine.New(context.Background(), cfg)
		require.ErrorIs(t, err, umbra.ErrInvalidConfig, "%+v", cfg)
	}
	missing := []engine.AdapterSelect{{Name: "no such adapter anywhere"}, {Backend: "vulkan"}}
	_, err := engine.New(context.Background(), engine.Config{Dim: 8, Adapters: missing, Device: engine.GPU})
	require.Error(t, err)
	require.Contains(t, err.Error(), "shard 0")
	ix, err := engine.New(context.Background(), engine.Config{Dim: 8, Adapters: missing})
	require.NoError(t, err)
	defer ix.Close()
	require.Equal(t, engine.CPU, ix.Info().Device)
	require.Contains(t, ix.Info().Reason, "shard")
}

// TestShardsSearchWhileAdding searches from several goroutines while
// another adds (run with -race); the adds redo the split as the rows
// double, on new device sides published in one swap. Every answer must be
// the exact top k of one of the prefixes stored at some moment.
func TestShardsSearchWhileAdding(t *testing.T) {
	r := testkit.Rand(t)
	const dim, first, step, k = 16, 100, 50, 5
	data := testkit.Vectors(r, 700, dim)
	queries := testkit.Vectors(r, 4, dim)
	matchesAPrefix := func(q []float32, hits []umbra.Hit) bool {
		for n := first; n <= len(data); n += step {
			if topKError(umbra.L2, data[:n], q, k, hits) == nil {
				return true
			}
		}
		return false
	}
	ix := openSharded(t, shardSets[0], engine.Config{Dim: dim, Metric: umbra.L2}, 128, false)
	_, err := ix.Add(context.Background(), umbra.Vectors(data[:first]))
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range queries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 15; i++ {
				hits, err := ix.Search(context.Background(), queries[g], k)
				if err != nil {
					errs <- err
					return
				}
				if !matchesAPrefix(queries[g], hits) {
					errs <- fmt.Errorf("goroutine %d search %d: %v is the top %d of no stored prefix", g, i, hits, k)
					return
				}
			}
		}()
	}
	for lo := first; lo < len(data); lo += step {
		_, err := ix.Add(context.Background(), umbra.Vectors(data[lo:lo+step]))
		require.NoError(t, err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	requireSplit(t, ix, len(data))
	for _, q := range queries {
		hits, err := ix.Search(context.Background(), q, k)
		require.NoError(t, err)
		checkHits(t, umbra.L2, data, q, k, hits)
	}
}
