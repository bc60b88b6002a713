//go:build cgo && !nogpu

package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

var errInjected = errors.New("injected fault")

// TestEveryGPUFailureThenExactSearches fails, one at a time, every wgpu call
// that an Add, a single search, a batch, a search for every row (selected
// on the host), a traced search, an upsert, a filtered and a range search
// go through, on each software adapter (metrics spread over them). The failing call must return ErrGPU (an Add then stores
// nothing), and afterwards the same index must answer every ordinary
// search exactly as the fallback does: a failure may never leave state
// behind that makes a later answer wrong.
func TestEveryGPUFailureThenExactSearches(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 20
	base := testkit.Vectors(r, 600, dim)
	more := testkit.Vectors(r, 300, dim) // grows chunk 0 (a device copy) and opens chunk 1
	queries := testkit.Vectors(r, 11, dim)
	ctx := context.Background()

	// Every step is failed on each adapter; the metrics are spread over
	// the adapters (the state handling under test does not depend on the
	// metric, and each sweep costs a fresh index per step).
	// The compressed precisions' device path (codes on the device, sums
	// read back, bounds and rescore on the host) is swept too.
	// qsel forces the compressed searches' device-side candidate
	// selection (engine.SetQuantCap), which small indexes otherwise skip.
	type sweep struct {
		m    umbra.Metric
		p    umbra.Precision
		qsel bool
	}
	sweeps := map[string][]sweep{
		"vulkan": {{umbra.Cosine, umbra.F32, false}, {umbra.L2, umbra.F32, false}, {umbra.Dot, umbra.Int8, false},
			{umbra.L2, umbra.F16, true}},
		"gl": {{umbra.Dot, umbra.F32, false}, {umbra.L2, umbra.F16, false}, {umbra.Dot, umbra.Int8, true}},
	}
	if !testkit.Whole() {
		// The README's test command (and CI's race run) sweeps one metric
		// and precision on Vulkan (a fresh index per failed step is most
		// of its time); CI (UMBRA_FULL=1, without -race) sweeps them all,
		// on both adapters.
		sweeps = map[string][]sweep{"vulkan": sweeps["vulkan"][:1]}
	}
	for _, b := range backends[1:] {
		for _, sw := range sweeps[b.name] {
			m := sw.m
			// pair is a GPU index and a CPU index that hold the same rows.
			type pair struct{ gpu, cpu *engine.Index }
			fresh := func(t *testing.T) pair {
				p := pair{
					gpu: open(t, b, engine.Config{Dim: dim, Metric: m, Precision: sw.p}, 768),
					cpu: open(t, backends[0], engine.Config{Dim: dim, Metric: m}),
				}
				if sw.qsel {
					engine.SetQuantCap(p.gpu, 48)
				}
				for _, ix := range []*engine.Index{p.gpu, p.cpu} {
					_, err := ix.Add(context.Background(), umbra.Vectors(base))
					require.NoError(t, err)
				}
				return p
			}
			// ops are the calls a fault is injected into; each returns the
			// GPU's error, and keeps the CPU index in step on success.
			ops := func(p pair) []error {
				var errs []error
				before := p.gpu.Len()
				_, err := p.gpu.Add(context.Background(), umbra.Vectors(more))
				if err == nil {
					_, cerr := p.cpu.Add(context.Background(), umbra.Vectors(more))
					require.NoError(t, cerr)
				} else {
					require.Equal(t, before, p.gpu.Len(), "a failed Add stored rows")
				}
				errs = append(errs, err)
				_, err = p.gpu.Search(ctx, queries[0], 5)
				errs = append(errs, err)
				_, err = p.gpu.SearchBatch(ctx, queries, 9)
				errs = append(errs, err)
				_, err = p.gpu.Search(ctx, queries[1], p.gpu.Len())
				errs = append(errs, err)
				var tr diag.Trace
				_, err = p.gpu.Search(diag.WithTrace(ctx, &tr), queries[2], 3)
				errs = append(errs, err)
				// An upsert that replaces two rows in place and adds one,
				// then a delete, a filtered search and a range search.
				ids, vs := []uint64{3, 17, 1 << 40}, queries[4:7]
				if _, err = p.gpu.Upsert(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...)); err == nil {
					require.NoError(t, testkit.ErrOf(p.cpu.Upsert(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...))))
				}
				errs = append(errs, err)
				require.NoError(t, p.gpu.Delete(ctx, umbra.WithIDs(5)))
				require.NoError(t, p.cpu.Delete(ctx, umbra.WithIDs(5)))
				_, err = p.gpu.Search(ctx, queries[7], 4, umbra.AllowFunc(func(id uint64) bool { return id%3 == 0 }))
				errs = append(errs, err)
				_, err = p.gpu.SearchRange(ctx, queries[8], 0.5)
				return append(errs, err)
			}
			check := func(t *testing.T, p pair, what string) {
				require.Equal(t, p.cpu.Len(), p.gpu.Len(), what)
				for _, k := range []int{1, 10, p.cpu.Len()} {
					want, err := p.cpu.SearchBatch(ctx, queries, k)
					require.NoError(t, err)
					got, err := p.gpu.SearchBatch(ctx, queries, k)
					require.NoError(t, err, "%s: the search after the failure", what)
					for qi := range want {
						requireSameHits(t, m, p.cpu.Vector, queries[qi], want[qi], got[qi], fmt.Sprintf("%s: k=%d query %d", what, k, qi))
					}
					one, err := p.gpu.Search(ctx, queries[3], k)
					require.NoError(t, err)
					requireSameHits(t, m, p.cpu.Vector, queries[3], want[3], one, fmt.Sprintf("%s: single search k=%d", what, k))
					even := umbra.AllowFunc(func(id uint64) bool { return id%2 == 0 })
					wantEven, err := p.cpu.Search(ctx, queries[3], k, even)
					require.NoError(t, err)
					gotEven, err := p.gpu.Search(ctx, queries[3], k, even)
					require.NoError(t, err)
					requireSameHits(t, m, p.cpu.Vector, queries[3], wantEven, gotEven, fmt.Sprintf("%s: filtered k=%d", what, k))
				}
			}

			name := fmt.Sprintf("%s/%s/%s", b.name, m, sw.p)
			if sw.qsel {
				name += "/qselect"
			}
			t.Run(name, func(t *testing.T) {
				// Record the steps the calls take when nothing fails.
				p := fresh(t)
				var steps []string
				engine.SetGPUFault(p.gpu, func(s string) error { steps = append(steps, s); return nil })
				for _, err := range ops(p) {
					require.NoError(t, err)
				}
				engine.SetGPUFault(p.gpu, nil)
				check(t, p, "no fault")
				require.Greater(t, len(steps), 20, "the calls went through the device")
				if sw.qsel {
					require.Contains(t, steps, "write qselect coefs", "the candidates were selected on the device")
				}

				seen := map[string]int{}
				for _, step := range steps {
					seen[step]++
					nth := seen[step]
					what := fmt.Sprintf("fault at %q #%d", step, nth)
					p := fresh(t)
					count, fired := 0, false
					engine.SetGPUFault(p.gpu, func(s string) error {
						if s != step {
							return nil
						}
						count++
						if count == nth {
							fired = true
							return errInjected
						}
						return nil
					})
					failed := 0
					for _, err := range ops(p) {
						if err != nil {
							require.ErrorIs(t, err, engine.ErrGPU, what)
							failed++
						}
					}
					engine.SetGPUFault(p.gpu, nil)
					require.True(t, fired, "%s: the step was not reached", what)
					require.Equal(t, 1, failed, "%s: one call fails, no other", what)
					require.Equal(t, engine.GPU, p.gpu.Info().Device, what)
					check(t, p, what)
					// Twice: a failure must not be waiting for the second call.
					check(t, p, what+", again")
					require.NoError(t, p.gpu.Close())
				}
				t.Logf("%d steps failed one at a time, each followed by exact searches", len(steps))
			})
		}
	}
}
