package engine_test

import (
	"context"
	"github.com/umbravec/umbra/internal/testkit"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
)

// openIsolated is an index under Device Auto whose GPU work runs in a child
// process on the software adapter b, with recovery after a short wait.
func openIsolated(t *testing.T, b backend, cfg engine.Config) *engine.Index {
	t.Helper()
	cfg.Adapter, cfg.Isolate = b.adapter, true
	ix, err := engine.NewSoftwareAuto(context.Background(), cfg, 256, 20*time.Millisecond, nil)
	if err != nil || ix.Info().Backend != engine.BackendGPU {
		if requireGPU() {
			t.Fatalf("UMBRA_REQUIRE_GPU=1 but no %s adapter works in a child process: %v", b.name, err)
		}
		t.Skipf("no %s adapter: %v", b.name, err)
	}
	t.Cleanup(func() { ix.Close() })
	require.NotZero(t, engine.GPUChildPID(ix))
	return ix
}

// TestIsolatedGPUCrashLeavesTheCallerStanding runs the GPU work in a child
// process, checks every kind of call against the fallback, then kills the
// child with SIGKILL, as a driver abort would end it: the caller's process
// goes on, the next search is exact (from the fallback), and a new child
// takes over, with every row uploaded again, writes made meanwhile
// included.
//
// A compressed index's child holds the codes and returns their sums; the
// answers must be the same.
func TestIsolatedGPUCrashLeavesTheCallerStanding(t *testing.T) {
	precs := map[string][]engine.Precision{"vulkan": {engine.F32, engine.Int8}, "gl": {engine.F32, engine.F16}}
	for _, b := range backends[1:] {
		for _, prec := range precs[b.name] {
			t.Run(b.name+"/"+prec.String(), func(t *testing.T) {
				r := newRand(t)
				const dim = 14
				ctx := context.Background()
				ix := openIsolated(t, b, engine.Config{Dim: dim, Metric: engine.Dot, Precision: prec})
				ref := open(t, backends[0], engine.Config{Dim: dim, Metric: engine.Dot})
				data := randomVectors(r, 600, dim)
				for _, x := range []*engine.Index{ix, ref} {
					_, err := x.Add(ctx, data)
					require.NoError(t, err)
					require.NoError(t, testkit.ErrOf(x.Upsert(ctx, engine.Vectors(data[10:12]), engine.WithIDs([]uint64{3, 5000}...))))
					require.NoError(t, x.Delete(ctx, engine.WithIDs(7, 8)))
				}
				qs := randomVectors(r, 4, dim)
				same := func(what string) {
					t.Helper()
					for i, q := range qs {
						want, err := ref.Search(ctx, q, 11)
						require.NoError(t, err)
						got, err := ix.Search(ctx, q, 11)
						require.NoError(t, err, "%s: query %d", what, i)
						requireSameHits(t, engine.Dot, want, got, what)
						want, err = ref.Search(ctx, q, 5, engine.Allow(1, 2, 3, 4, 5000, 9, 599))
						require.NoError(t, err)
						got, err = ix.Search(ctx, q, 5, engine.Allow(1, 2, 3, 4, 5000, 9, 599))
						require.NoError(t, err)
						requireSameHits(t, engine.Dot, want, got, what+", filtered")
						// A threshold midway across a clear gap in the ranking.
						ranked, err := ref.Search(ctx, q, 1000)
						require.NoError(t, err)
						j := 20
						for ranked[j].Score-ranked[j+1].Score < 1e-3 {
							j++
						}
						th := (ranked[j].Score + ranked[j+1].Score) / 2
						gotR, err := ix.SearchRange(ctx, q, th)
						require.NoError(t, err)
						requireSameHits(t, engine.Dot, ranked[:j+1], gotR, what+", range")
					}
					all, err := ix.SearchBatch(ctx, qs, 600)
					require.NoError(t, err)
					want, err := ref.SearchBatch(ctx, qs, 600)
					require.NoError(t, err)
					for i := range all {
						requireSameHits(t, engine.Dot, want[i], all[i], what+", batch k=Len")
					}
				}
				var tr engine.Trace
				_, err := ix.Search(engine.WithTrace(ctx, &tr), qs[0], 3)
				require.NoError(t, err)
				require.Equal(t, engine.BackendGPU, tr.Backend)
				same("in the child")

				pid := engine.GPUChildPID(ix)
				require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
				got, err := ix.Search(ctx, qs[1], 11)
				require.NoError(t, err, "the search that meets the dead child is answered on the CPU")
				want, err := ref.Search(ctx, qs[1], 11)
				require.NoError(t, err)
				requireSameHits(t, engine.Dot, want, got, "after the kill")
				require.Contains(t, ix.Info().LastFailure, "child process")

				more := randomVectors(r, 50, dim)
				for _, x := range []*engine.Index{ix, ref} {
					_, err := x.Add(ctx, more)
					require.NoError(t, err)
				}
				require.Eventually(t, func() bool { return ix.Info().Backend == engine.BackendGPU },
					60*time.Second, 5*time.Millisecond, "a new child takes over")
				require.NotEqual(t, pid, engine.GPUChildPID(ix))
				same("in the new child")
				tr = engine.Trace{}
				_, err = ix.Search(engine.WithTrace(ctx, &tr), qs[0], 3)
				require.NoError(t, err)
				require.Equal(t, engine.BackendGPU, tr.Backend)
			})
		}
	}
}
