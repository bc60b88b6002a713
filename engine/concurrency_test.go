package engine_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestSearchesRunWhileAnAddIsStaged pauses an Add after its rows are packed
// and uploaded but before they are published: searches, Len and Get must
// answer meanwhile, from the rows published before it, and the rows appear
// whole once it returns.
func TestSearchesRunWhileAnAddIsStaged(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			r := testkit.Rand(t)
			const dim = 24
			ix := open(t, b, engine.Config{Dim: dim, Metric: umbra.L2}, 300)
			first := testkit.Vectors(r, 500, dim)
			_, err := ix.Add(context.Background(), umbra.Vectors(first))
			require.NoError(t, err)

			staged, release := make(chan struct{}), make(chan struct{})
			engine.SetBeforePublish(ix, func() {
				close(staged)
				<-release
			})
			second := testkit.Vectors(r, 700, dim) // grows the slab and crosses chunks
			added := make(chan error, 1)
			go func() {
				_, err := ix.Add(context.Background(), umbra.Vectors(second))
				added <- err
			}()
			select {
			case <-staged:
			case err := <-added:
				t.Fatalf("Add returned before it was staged: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			qs := testkit.Vectors(r, 5, dim)
			for _, q := range qs {
				hits, err := ix.Search(ctx, q, 10)
				require.NoError(t, err, "a search while an Add is staged")
				checkHits(t, umbra.L2, first, q, 10, hits)
			}
			all, err := ix.SearchBatch(ctx, qs, len(first)+50)
			require.NoError(t, err)
			for i, hits := range all {
				require.Len(t, hits, len(first), "query %d sees only the published rows", i)
			}
			require.Equal(t, len(first), ix.Len())
			close(release)
			require.NoError(t, <-added)

			both := append(append([][]float32{}, first...), second...)
			require.Equal(t, len(both), ix.Len())
			for _, q := range qs {
				hits, err := ix.Search(ctx, q, 25)
				require.NoError(t, err)
				checkHits(t, umbra.L2, both, q, 25, hits)
			}
		})
	}
}

// TestConcurrentSearchesAreCoalesced holds the first search while others
// queue, then checks they ran as one batch and each caller got exactly its
// own answer: the same as a lone search on an index with coalescing off.
// Queued callers whose context ends leave at once with their own error.
func TestConcurrentSearchesAreCoalesced(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			r := testkit.Rand(t)
			const dim, n, callers = 40, 900, 24
			data := testkit.Vectors(r, n, dim)
			ix := open(t, b, engine.Config{Dim: dim, Metric: umbra.Dot}, 400)
			solo := open(t, b, engine.Config{Dim: dim, Metric: umbra.Dot, Coalesce: engine.Coalesce{MaxQueries: 1}}, 400)
			for _, x := range []*engine.Index{ix, solo} {
				_, err := x.Add(context.Background(), umbra.Vectors(data))
				require.NoError(t, err)
			}
			require.NoError(t, ix.Delete(context.Background(), umbra.WithIDs(3, 500))) // tombstones ride along

			hold, sizes := make(chan struct{}), make(chan int, 64)
			engine.SetBeforeBatch(ix, func(size int) {
				sizes <- size
				if size == 1 {
					<-hold // only the first run is a batch of one
				}
			})
			ctx := context.Background()
			first := make(chan error, 1)
			go func() {
				_, err := ix.Search(ctx, data[0], 5)
				first <- err
			}()
			require.Equal(t, 1, <-sizes)

			qs := testkit.Vectors(r, callers, dim)
			type answer struct {
				hits []umbra.Hit
				err  error
			}
			answers := make([]chan answer, callers)
			cancelled := map[int]context.CancelFunc{}
			for i := range qs {
				answers[i] = make(chan answer, 1)
				cctx := ctx
				if i%8 == 7 { // these callers give up while queued
					var cancel context.CancelFunc
					cctx, cancel = context.WithCancel(ctx)
					cancelled[i] = cancel
				}
				go func() {
					hits, err := ix.Search(cctx, qs[i], 7)
					answers[i] <- answer{hits, err}
				}()
			}
			require.Eventually(t, func() bool { return engine.QueuedSearches(ix) == callers },
				30*time.Second, time.Millisecond, "every caller queues behind the held search")
			for i, cancel := range cancelled {
				cancel()
				a := <-answers[i]
				require.ErrorIs(t, a.err, context.Canceled, "caller %d", i)
			}
			close(hold)
			require.NoError(t, <-first)
			for i := range qs {
				if cancelled[i] != nil {
					continue
				}
				a := <-answers[i]
				require.NoError(t, a.err, "caller %d", i)
				want, err := solo.Search(ctx, qs[i], 7, umbra.AllowFunc(func(id uint64) bool { return id != 3 && id != 500 }))
				require.NoError(t, err)
				if b.device == engine.CPU {
					require.Equal(t, want, a.hits, "caller %d: the fallback's batch and single paths agree bit for bit", i)
				}
				requireSameHits(t, umbra.Dot, solo.Vector, qs[i], want, a.hits, "caller "+strconv.Itoa(i))
			}
			require.Equal(t, callers-len(cancelled), <-sizes, "the queued callers ran as one batch")
			batches, queries := engine.BatchStats(ix)
			require.Equal(t, int64(2), batches)
			require.Equal(t, int64(1+callers-len(cancelled)), queries)
		})
	}
}

// TestMemoryBudgets: an Add past MaxHostBytes, or under Device GPU past
// MaxDeviceBytes, is ErrTooLarge with nothing stored; under Auto the device
// budget moves searches to the CPU, which answers exactly; negative budgets
// are configuration errors.
func TestMemoryBudgets(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 10 // stride 12: 48 bytes a row
	rowBytes := int64(48)
	data := testkit.Vectors(r, 100, dim)

	for _, b := range backends {
		t.Run(b.name+"/host", func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: dim, Metric: umbra.L2, Limits: engine.Limits{MaxHostBytes: 150 * rowBytes}})
			_, err := ix.Add(ctx, umbra.Vectors(data))
			require.NoError(t, err)
			_, err = ix.Add(ctx, umbra.Vectors(data))
			require.ErrorIs(t, err, umbra.ErrTooLarge)
			require.ErrorContains(t, err, "MaxHostBytes")
			require.Equal(t, 100, ix.Len(), "nothing of the refused Add is stored")
			require.NoError(t, testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors(data[:2]), umbra.WithIDs([]uint64{1000, 1001}...))), "an Upsert within the budget")
			require.NoError(t, testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors(data[:2]), umbra.WithIDs([]uint64{5, 2000}...))), "one replaced, one added")
			_, err = ix.Add(ctx, umbra.Vectors(data[:47])) // 103 + 47 = 150 rows
			require.NoError(t, err, "up to the budget exactly")
			_, err = ix.Add(ctx, umbra.Vectors(data[:1]))
			require.ErrorIs(t, err, umbra.ErrTooLarge)
			before, err := ix.Vector(5)
			require.NoError(t, err)
			_, err = ix.Upsert(ctx, umbra.Vectors(data[40:42]), umbra.WithIDs([]uint64{5, 3000}...))
			require.ErrorIs(t, err, umbra.ErrTooLarge, "an Upsert that adds past the budget")
			after, err := ix.Vector(5)
			require.NoError(t, err)
			require.Equal(t, before, after, "its replaced row is unchanged")
			require.Equal(t, 150, ix.Len())
		})
	}
	for _, b := range backends[1:] {
		t.Run(b.name+"/device", func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: dim, Metric: umbra.L2, Limits: engine.Limits{MaxDeviceBytes: 150 * rowBytes}})
			_, err := ix.Add(ctx, umbra.Vectors(data))
			require.NoError(t, err)
			_, err = ix.Add(ctx, umbra.Vectors(data))
			require.ErrorIs(t, err, umbra.ErrTooLarge)
			require.ErrorContains(t, err, "MaxDeviceBytes")
			require.Equal(t, 100, ix.Len())
			require.Equal(t, engine.GPU, ix.Info().Device)

			auto, err := engine.NewSoftwareAuto(ctx, engine.Config{Dim: dim, Metric: umbra.L2, Adapters: []engine.AdapterSelect{b.adapter},
				Limits: engine.Limits{MaxDeviceBytes: 150 * rowBytes}}, 0, time.Hour, nil)
			require.NoError(t, err)
			defer auto.Close()
			require.Equal(t, engine.GPU, auto.Info().Device)
			for range 2 {
				_, err = auto.Add(ctx, umbra.Vectors(data))
				require.NoError(t, err, "under Auto the rows past the device budget go to the CPU")
			}
			info := auto.Info()
			require.Equal(t, engine.CPU, info.Device)
			require.Contains(t, info.Reason, "MaxDeviceBytes")
			both := append(append([][]float32{}, data...), data...)
			for _, q := range testkit.Vectors(r, 3, dim) {
				hits, err := auto.Search(ctx, q, 7)
				require.NoError(t, err)
				checkHits(t, umbra.L2, both, q, 7, hits)
			}
		})
	}
	for _, cfg := range []engine.Config{{Dim: 4, Limits: engine.Limits{MaxHostBytes: -1}}, {Dim: 4, Limits: engine.Limits{MaxDeviceBytes: -1}}, {Dim: 4, Coalesce: engine.Coalesce{MaxQueries: -1}}, {Dim: 4, Coalesce: engine.Coalesce{Wait: -1}}} {
		_, err := engine.New(ctx, cfg)
		require.ErrorIs(t, err, umbra.ErrInvalidConfig, "%+v", cfg)
	}
}

// TestOverflowMergesExactly keeps the rows past a small device budget on
// the CPU (Config.Overflow): searches of every kind — k from 1 to Len
// across the split, filtered, range, batches — equal the fallback's, and
// stay so through upserts on both sides, deletes and compaction.
func TestOverflowMergesExactly(t *testing.T) {
	for _, b := range backends[1:] {
		t.Run(b.name, func(t *testing.T) {
			r := testkit.Rand(t)
			const dim = 10 // 48 bytes a row
			ctx := context.Background()
			cfg := engine.Config{Dim: dim, Metric: umbra.L2, Limits: engine.Limits{MaxDeviceBytes: 300 * 48, Overflow: true}}
			ix := open(t, b, cfg, 100) // the device holds 256 rows in 3 chunks
			ref := open(t, backends[0], engine.Config{Dim: dim, Metric: umbra.L2})
			data := testkit.Vectors(r, 700, dim)
			for _, x := range []*engine.Index{ix, ref} {
				_, err := x.Add(ctx, umbra.Vectors(data[:200]))
				require.NoError(t, err)
				_, err = x.Add(ctx, umbra.Vectors(data[200:]))
				require.NoError(t, err)
			}
			info := ix.Info()
			require.Equal(t, engine.GPU, info.Device)
			require.Equal(t, 256, info.DeviceRows)
			qs := testkit.Vectors(r, 3, dim)
			allow := []uint64{1, 5, 255, 256, 257, 300, 699, 4000}
			same := func(what string) {
				t.Helper()
				requireSameAnswers(t, umbra.L2, ref, ix, qs, []int{1, 7, 255, 256, 257, 699, 700}, allow, 300, what)
			}
			same("after adds")
			var tr diag.Trace
			_, err := ix.Search(diag.WithTrace(ctx, &tr), qs[0], 3)
			require.NoError(t, err)
			require.Equal(t, "gpu", tr.Device, "the device takes part")
			up := testkit.Vectors(r, 3, dim)
			for _, x := range []*engine.Index{ix, ref} {
				require.NoError(t, testkit.ErrOf(x.Upsert(ctx, umbra.Vectors(up), umbra.WithIDs([]uint64{3, 600, 9000}...)))) // a device row, a CPU row, a new one
				require.NoError(t, x.Delete(ctx, umbra.WithIDs(4, 10, 500)))
			}
			same("after upserts and deletes")
			for _, x := range []*engine.Index{ix, ref} {
				require.NoError(t, x.Compact(ctx))
			}
			require.Equal(t, 256, ix.Info().DeviceRows)
			same("after compaction")
		})
	}
	_, err := engine.New(context.Background(), engine.Config{Dim: 10, Limits: engine.Limits{Overflow: true}})
	require.ErrorIs(t, err, umbra.ErrInvalidConfig, "Overflow without MaxDeviceBytes")
	_, err = engine.New(context.Background(), engine.Config{Dim: 10, Limits: engine.Limits{Overflow: true, MaxDeviceBytes: 63 * 48}})
	require.ErrorIs(t, err, umbra.ErrInvalidConfig, "a budget under 64 rows")
}
