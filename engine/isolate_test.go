package engine_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// openIsolated is an index under Device Auto whose GPU work runs in a child
// process on the software adapter b, with recovery after a short wait.
func openIsolated(t *testing.T, b backend, cfg engine.Config) *engine.Index {
	t.Helper()
	cfg.Adapters, cfg.Isolate = []engine.AdapterSelect{b.adapter}, true
	ix, err := engine.NewSoftwareAuto(context.Background(), cfg, 256, 20*time.Millisecond, nil)
	if err != nil || ix.Info().Device != engine.GPU {
		testkit.NoGPU(t, "no %s adapter works in a child process: %v", b.name, err)
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
	precs := map[string][]umbra.Precision{"vulkan": {umbra.F32, umbra.Int8}, "gl": {umbra.F32, umbra.F16}}
	if !testkit.Whole() {
		// CI without -race (UMBRA_FULL=1) kills every pairing; the
		// README's command and CI's race run one child, on the adapter the
		// seed picks, float32 on Vulkan or a compressed index on GL (each
		// child probes its adapter: the package's longest test under
		// load).
		precs = map[string][]umbra.Precision{"vulkan": {umbra.F32}, "gl": {umbra.F16}}
		keep := []string{"vulkan", "gl"}[testkit.Rand(t).IntN(2)]
		precs = map[string][]umbra.Precision{keep: precs[keep]}
	}
	for _, b := range backends[1:] {
		for _, prec := range precs[b.name] {
			t.Run(b.name+"/"+prec.String(), func(t *testing.T) {
				r := testkit.Rand(t)
				const dim = 14
				ctx := context.Background()
				ix := openIsolated(t, b, engine.Config{Dim: dim, Metric: umbra.Dot, Precision: prec})
				ref := open(t, backends[0], engine.Config{Dim: dim, Metric: umbra.Dot})
				data := testkit.Vectors(r, 600, dim)
				for _, x := range []*engine.Index{ix, ref} {
					_, err := x.Add(ctx, umbra.Vectors(data))
					require.NoError(t, err)
					require.NoError(t, testkit.ErrOf(x.Upsert(ctx, umbra.Vectors(data[10:12]), umbra.WithIDs([]uint64{3, 5000}...))))
					require.NoError(t, x.Delete(ctx, umbra.WithIDs(7, 8)))
				}
				qs := testkit.Vectors(r, 4, dim)
				same := func(what string) {
					t.Helper()
					for i, q := range qs {
						want, err := ref.Search(ctx, q, 11)
						require.NoError(t, err)
						got, err := ix.Search(ctx, q, 11)
						require.NoError(t, err, "%s: query %d", what, i)
						requireSameHits(t, umbra.Dot, ref.Vector, q, want, got, what)
						want, err = ref.Search(ctx, q, 5, umbra.Allow(1, 2, 3, 4, 5000, 9, 599))
						require.NoError(t, err)
						got, err = ix.Search(ctx, q, 5, umbra.Allow(1, 2, 3, 4, 5000, 9, 599))
						require.NoError(t, err)
						requireSameHits(t, umbra.Dot, ref.Vector, q, want, got, what+", filtered")
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
						requireSameHits(t, umbra.Dot, ref.Vector, q, ranked[:j+1], gotR, what+", range")
					}
					all, err := ix.SearchBatch(ctx, qs, 600)
					require.NoError(t, err)
					want, err := ref.SearchBatch(ctx, qs, 600)
					require.NoError(t, err)
					for i := range all {
						requireSameHits(t, umbra.Dot, ref.Vector, qs[i], want[i], all[i], what+", batch k=Len")
					}
				}
				var tr diag.Trace
				_, err := ix.Search(diag.WithTrace(ctx, &tr), qs[0], 3)
				require.NoError(t, err)
				require.Equal(t, "gpu", tr.Device)
				same("in the child")

				pid := engine.GPUChildPID(ix)
				p, err := os.FindProcess(pid)
				require.NoError(t, err)
				require.NoError(t, p.Kill()) // SIGKILL
				got, err := ix.Search(ctx, qs[1], 11)
				require.NoError(t, err, "the search that meets the dead child is answered on the CPU")
				want, err := ref.Search(ctx, qs[1], 11)
				require.NoError(t, err)
				requireSameHits(t, umbra.Dot, ref.Vector, qs[1], want, got, "after the kill")
				require.Contains(t, ix.Info().LastFailure, "child process")

				more := testkit.Vectors(r, 50, dim)
				for _, x := range []*engine.Index{ix, ref} {
					_, err := x.Add(ctx, umbra.Vectors(more))
					require.NoError(t, err)
				}
				require.Eventually(t, func() bool { return ix.Info().Device == engine.GPU },
					60*time.Second, 5*time.Millisecond, "a new child takes over")
				require.NotEqual(t, pid, engine.GPUChildPID(ix))
				same("in the new child")
				tr = diag.Trace{}
				_, err = ix.Search(diag.WithTrace(ctx, &tr), qs[0], 3)
				require.NoError(t, err)
				require.Equal(t, "gpu", tr.Device)
			})
		}
	}
}

// unservedEnv makes a GPU child of this test binary behave as one of a
// program that never calls engine.ServeGPUChildIfRequested: "exit" ends at
// once, "hang" runs on without a word.
const unservedEnv = "UMBRA_TEST_UNSERVED_CHILD"

// unservedChild plays such a child when unservedEnv says so.
func unservedChild() {
	if os.Getenv("UMBRA_GPU_CHILD") != "1" {
		return
	}
	switch os.Getenv(unservedEnv) {
	case "exit":
		os.Exit(0)
	case "hang":
		time.Sleep(time.Hour)
		os.Exit(0)
	}
}

// TestGPUChildHandshake: a child that serves answers (here an adapter
// that does not exist is refused with ErrNoAdapter, so no GPU is needed);
// one whose program never calls ServeGPUChildIfRequested, whether it exits
// or runs on, fails with ErrGPU and an error that names the function; and
// a child that runs the program's main does not start children of its own.
func TestGPUChildHandshake(t *testing.T) {
	ctx := context.Background()
	const none = "no adapter is called this"
	err := engine.StartGPUChild(ctx, none, 30*time.Second)
	require.Error(t, err)
	if !errors.Is(err, engine.ErrNoGPUSupport) {
		require.ErrorIs(t, err, engine.ErrNoAdapter)
	}
	require.NotContains(t, err.Error(), "ServeGPUChildIfRequested")

	for _, mode := range []string{"exit", "hang"} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv(unservedEnv, mode)
			start := time.Now()
			err := engine.StartGPUChild(ctx, none, 2*time.Second)
			require.ErrorIs(t, err, engine.ErrGPU)
			require.Contains(t, err.Error(), "engine.ServeGPUChildIfRequested() at the top of its main")
			if mode == "hang" {
				require.Contains(t, err.Error(), "did not answer within 2s")
				require.Less(t, time.Since(start), 20*time.Second)
			} else {
				require.Contains(t, err.Error(), "exited without answering")
			}
		})
	}

	t.Run("no grandchildren", func(t *testing.T) {
		t.Setenv("UMBRA_GPU_CHILD", "1")
		err := engine.StartGPUChild(ctx, none, 30*time.Second)
		require.ErrorIs(t, err, engine.ErrGPU)
		require.Contains(t, err.Error(), "ServeGPUChildIfRequested")
	})
}
