package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestGPUComesBack fails the device under Device Auto: the failing search
// and every search after it get the exact answer from the fallback, writes
// go on meanwhile, Info says why, and after two failed recovery attempts
// the third brings the GPU back with every row uploaded again, so searches
// run on the device once more and still agree with the fallback.
func TestGPUComesBack(t *testing.T) {
	for _, b := range backends[1:] {
		t.Run(b.name, func(t *testing.T) {
			r := testkit.Rand(t)
			const dim = 20
			var attempts atomic.Int32
			cfg := engine.Config{Dim: dim, Metric: umbra.L2, Adapters: []engine.AdapterSelect{b.adapter}}
			ix, err := engine.NewSoftwareAuto(context.Background(), cfg, 256, 20*time.Millisecond, func(n int) error {
				attempts.Store(int32(n))
				if n < 3 {
					return errors.New("the device is still gone")
				}
				return nil
			})
			if err != nil || ix.Info().Device != engine.GPU {
				testkit.NoGPU(t, "no %s adapter works: %v", b.name, err)
			}
			t.Cleanup(func() { ix.Close() })
			ref := open(t, backends[0], engine.Config{Dim: dim, Metric: umbra.L2})
			ctx := context.Background()
			data := testkit.Vectors(r, 700, dim)
			for _, x := range []*engine.Index{ix, ref} {
				_, err := x.Add(ctx, umbra.Vectors(data))
				require.NoError(t, err)
			}
			qs := testkit.Vectors(r, 6, dim)
			same := func(what string) {
				t.Helper()
				for i, q := range qs {
					want, err := ref.Search(ctx, q, 9)
					require.NoError(t, err)
					got, err := ix.Search(ctx, q, 9)
					require.NoError(t, err, "%s: query %d", what, i)
					requireSameHits(t, umbra.L2, ref.Vector, q, want, got, what)
				}
			}
			same("before the fault")

			engine.SetGPUFault(ix, func(step string) error { return errDeviceGone })
			var tr diag.Trace
			got, err := ix.Search(diag.WithTrace(ctx, &tr), qs[0], 9)
			require.NoError(t, err, "the search the device failed is answered on the CPU")
			want, err := ref.Search(ctx, qs[0], 9)
			require.NoError(t, err)
			requireSameHits(t, umbra.L2, ref.Vector, qs[0], want, got, "the failed search")
			require.Equal(t, "cpu", tr.Device)
			info := ix.Info()
			require.Equal(t, engine.CPU, info.Device)
			require.Contains(t, info.Reason, "GPU failed")
			require.Contains(t, info.LastFailure, errDeviceGone.Error())

			// Writes while the GPU is down reach the rows recovery uploads.
			more := testkit.Vectors(r, 300, dim)
			for _, x := range []*engine.Index{ix, ref} {
				_, err := x.Add(ctx, umbra.Vectors(more))
				require.NoError(t, err)
				require.NoError(t, x.Delete(ctx, umbra.WithIDs(5, 650, 900)))
			}
			same("while the GPU is down")

			require.Eventually(t, func() bool { return ix.Info().Device == engine.GPU },
				60*time.Second, 5*time.Millisecond, "the GPU comes back")
			info = ix.Info()
			require.Equal(t, 1, info.Recoveries)
			require.Empty(t, info.Reason)
			require.Contains(t, info.LastFailure, errDeviceGone.Error())
			require.Equal(t, int32(3), attempts.Load(), "two failed attempts, then the one that worked")
			same("after the recovery")
			tr = diag.Trace{}
			_, err = ix.Search(diag.WithTrace(ctx, &tr), qs[1], 9)
			require.NoError(t, err)
			require.Equal(t, "gpu", tr.Device, "searches run on the device again")
		})
	}
}

// TestCloseStopsRecovery closes an index whose GPU is down and never comes
// back while a recovery attempt is under way: Close waits for that attempt
// and returns once the recovery in the background has ended, so no attempt
// follows it.
func TestCloseStopsRecovery(t *testing.T) {
	b := backends[1]
	var attempts atomic.Int32
	underWay, release := make(chan struct{}), make(chan struct{})
	cfg := engine.Config{Dim: 8, Adapters: []engine.AdapterSelect{b.adapter}}
	ix, err := engine.NewSoftwareAuto(context.Background(), cfg, 0, time.Millisecond, func(n int) error {
		attempts.Store(int32(n))
		if n == 2 {
			close(underWay)
			<-release
		}
		return errors.New("gone for good")
	})
	if err != nil || ix.Info().Device != engine.GPU {
		testkit.NoGPU(t, "no %s adapter works: %v", b.name, err)
	}
	_, err = ix.Add(context.Background(), umbra.Vectors([][]float32{{1, 2, 3, 4, 5, 6, 7, 8}}))
	require.NoError(t, err)
	engine.SetGPUFault(ix, func(string) error { return errDeviceGone })
	_, err = ix.Search(context.Background(), []float32{1, 0, 0, 0, 0, 0, 0, 0}, 1)
	require.NoError(t, err)
	select {
	case <-underWay:
	case <-time.After(time.Minute):
		t.Fatal("no second recovery attempt within a minute")
	}
	closed := make(chan error, 1)
	go func() { closed <- ix.Close() }()
	// Close has done its part once the rows are gone; it then waits for
	// the attempt under way.
	require.Eventually(t, func() bool { return ix.Len() == 0 }, time.Minute, time.Millisecond)
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a recovery attempt was under way", err)
	default:
	}
	close(release)
	require.NoError(t, <-closed)
	require.False(t, engine.Recovering(ix), "the recovery ended before Close returned")
	require.Equal(t, int32(2), attempts.Load(), "no attempt after the one under way")
	require.Equal(t, engine.CPU, ix.Info().Device)
}

var errDeviceGone = errors.New("device lost (injected)")

// TestCancelledWriteKeepsGPU cancels an Upsert just before it writes the
// rows it replaces to the device, and a Compact while it uploads the
// compacted rows. Each returns the context's error and changes nothing,
// and the GPU, which did not fail, keeps the searches: under Device Auto
// no move to the CPU, no recovery and no LastFailure (a cancelled write
// once counted as a GPU failure, which cost a recovery and every row's
// upload), under Device GPU no rows left stale for the searches to refuse.
func TestCancelledWriteKeepsGPU(t *testing.T) {
	for _, b := range backends[1:] {
		for _, dev := range []engine.Device{engine.Auto, engine.GPU} {
			t.Run(fmt.Sprintf("%s/%v", b.name, dev), func(t *testing.T) {
				r := testkit.Rand(t)
				const dim = 12
				ctx := context.Background()
				cfg := engine.Config{Dim: dim, Metric: umbra.L2}
				var ix *engine.Index
				if dev == engine.Auto {
					c := cfg
					c.Adapters = []engine.AdapterSelect{b.adapter}
					var err error
					ix, err = engine.NewSoftwareAuto(ctx, c, 256, 20*time.Millisecond, nil)
					if err != nil || ix.Info().Device != engine.GPU {
						testkit.NoGPU(t, "no %s adapter works: %v", b.name, err)
					}
					t.Cleanup(func() { ix.Close() })
				} else {
					ix = open(t, b, cfg, 256)
				}
				ref := open(t, backends[0], cfg)
				data := testkit.Vectors(r, 700, dim)
				for _, x := range []*engine.Index{ix, ref} {
					_, err := x.Add(ctx, umbra.Vectors(data))
					require.NoError(t, err)
				}
				qs := testkit.Vectors(r, 5, dim)
				onGPU := func(what string) {
					t.Helper()
					info := ix.Info()
					require.Equal(t, engine.GPU, info.Device, "%s: %s", what, info.Reason)
					require.Zero(t, info.Recoveries, what)
					require.Empty(t, info.LastFailure, "%s: a cancelled call is no GPU failure", what)
					require.Equal(t, ref.Len(), ix.Len(), what)
					for i, q := range qs {
						want, err := ref.Search(ctx, q, 9)
						require.NoError(t, err)
						var tr diag.Trace
						got, err := ix.Search(diag.WithTrace(ctx, &tr), q, 9)
						require.NoError(t, err, "%s: query %d", what, i)
						require.Equal(t, "gpu", tr.Device, "%s: query %d", what, i)
						requireSameHits(t, umbra.L2, ref.Vector, q, want, got, fmt.Sprintf("%s: query %d", what, i))
					}
				}
				onGPU("before")

				// The upsert replaces two rows and adds one; it is
				// cancelled once its new row is staged and published.
				cctx, cancel := context.WithCancel(ctx)
				engine.SetBeforeRewrite(ix, cancel)
				_, err := ix.Upsert(cctx, umbra.Vectors(testkit.Vectors(r, 3, dim)), umbra.WithIDs(3, 17, 1<<40))
				require.ErrorIs(t, err, context.Canceled)
				engine.SetBeforeRewrite(ix, nil)
				for _, id := range []uint64{3, 17} {
					got, err := ix.Vector(id)
					require.NoError(t, err)
					want, err := ref.Vector(id)
					require.NoError(t, err)
					require.Equal(t, want, got, "the cancelled upsert changed row %d", id)
				}
				require.False(t, ix.Has(1<<40), "the cancelled upsert added a row")
				onGPU("after a cancelled upsert")

				// The compaction is cancelled at its upload's first step.
				for _, x := range []*engine.Index{ix, ref} {
					require.NoError(t, x.Delete(ctx, umbra.WithIDs(1, 2, 50, 400)))
				}
				cctx, cancel = context.WithCancel(ctx)
				var steps atomic.Int32
				engine.SetGPUFault(ix, func(string) error {
					steps.Add(1)
					cancel()
					return nil
				})
				require.ErrorIs(t, ix.Compact(cctx), context.Canceled)
				engine.SetGPUFault(ix, nil)
				require.Positive(t, steps.Load(), "the compaction's upload asked the fault hook")
				onGPU("after a cancelled compaction")

				// Uncancelled, both go through, on the GPU still.
				vs := testkit.Vectors(r, 3, dim)
				for _, x := range []*engine.Index{ix, ref} {
					_, err := x.Upsert(ctx, umbra.Vectors(vs), umbra.WithIDs(3, 17, 1<<40))
					require.NoError(t, err)
					require.NoError(t, x.Compact(ctx))
				}
				onGPU("after the same calls uncancelled")
			})
		}
	}
}
