package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestStressMixedLoad runs 64 goroutines against one index, each for a
// fixed number of operations (so what it covers does not depend on the
// machine's load): 8 writers (Add, Upsert, Delete, now and then Compact,
// some with contexts cancelled at random points) each owning its own IDs,
// and 56 searchers (single, batch, filtered, range). A stable set of rows is never
// written, so every answer can be checked while writes race with it:
//   - a search filtered to stable rows equals the answer computed alone;
//   - in an unfiltered search the stable hits are exactly the best stable
//     rows, in order (the rows written meanwhile may sit between them), and
//     every hit's score is that of a vector its ID held at some point;
//   - a range search returns every stable row within the threshold.
//
// On the GPU backends the index runs under Device Auto on the software
// adapter with a fault armed that fails a random one of the next wgpu
// calls, armed again each time the GPU has come back: each failed call
// must still be answered exactly (from the fallback), and the GPU comes
// back in the background. However many faults the load met, searches
// alone then go on until stressFaults have been injected, each recovered
// from, the last one too. Afterwards the GPU is back, the index holds
// exactly what the writers' models say, and its searches equal a fresh
// index built from them. UMBRA_STRESS=n runs n times the operations.
func TestStressMixedLoad(t *testing.T) {
	scale := 1
	if s := os.Getenv("UMBRA_STRESS"); s != "" {
		var err error
		scale, err = strconv.Atoi(s)
		require.NoError(t, err, "UMBRA_STRESS: want a whole number of times the operations")
		require.Positive(t, scale, "UMBRA_STRESS")
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { stress(t, b, scale) })
	}
}

const (
	stressDim      = 16
	stressStable   = 600
	stressWriters  = 8
	stressSearch   = 56
	stressK        = 12
	stressIDsPerW  = 1 << 20
	stressVolatile = 1 << 30 // first volatile ID
	// The operations of each writer and each searcher, times UMBRA_STRESS.
	stressWrites   = 8
	stressSearches = 50
	// On a GPU, the faults injected and recovered from (times UMBRA_STRESS).
	stressFaults = 3
)

func stress(t *testing.T, b backend, scale int) {
	r := testkit.Rand(t)
	seed := r.Uint64()
	ctx := context.Background()
	cfg := engine.Config{Dim: stressDim, Metric: umbra.Dot}
	var ix *engine.Index
	faults := b.device == engine.GPU
	if faults {
		cfg.Adapters = []engine.AdapterSelect{b.adapter}
		var err error
		ix, err = engine.NewSoftwareAuto(ctx, cfg, 512, 5*time.Millisecond, nil)
		if err != nil || ix.Info().Device != engine.GPU {
			testkit.NoGPU(t, "no %s adapter works: %v", b.name, err)
		}
		t.Cleanup(func() { ix.Close() })
	} else {
		ix = open(t, b, cfg)
	}
	ref := open(t, backends[0], engine.Config{Dim: stressDim, Metric: umbra.Dot})

	// The stable rows, and each query's answers over them alone.
	stable := testkit.Vectors(r, stressStable, stressDim)
	stableIDs := make([]uint64, stressStable)
	for i := range stableIDs {
		stableIDs[i] = uint64(i) * 3 // not consecutive, not row numbers
	}
	require.NoError(t, testkit.ErrOf(ix.Add(ctx, umbra.Vectors(stable), umbra.WithIDs(stableIDs...))))
	require.NoError(t, testkit.ErrOf(ref.Add(ctx, umbra.Vectors(stable), umbra.WithIDs(stableIDs...))))
	queries := testkit.Vectors(r, 32, stressDim)
	allowSome := slices.Clone(stableIDs[:stressStable/3])
	type expected struct {
		top, filtered []umbra.Hit // best stable rows; best among allowSome
		threshold     float32
		inRange       []umbra.Hit
	}
	want := make([]expected, len(queries))
	for i, q := range queries {
		top, err := ref.Search(ctx, q, stressStable)
		require.NoError(t, err)
		filtered, err := ref.Search(ctx, q, stressK, umbra.Allow(allowSome...))
		require.NoError(t, err)
		// A threshold between two ranks far enough apart that float32
		// rounding on any path keeps them on their own sides.
		j := 40
		for math.Abs(float64(top[j].Score-top[j+1].Score)) <= 4*tolerance(umbra.Dot, float64(top[j].Score)) {
			j++
		}
		th := (top[j].Score + top[j+1].Score) / 2
		inRange, err := ref.SearchRange(ctx, q, th)
		require.NoError(t, err)
		want[i] = expected{top: top, filtered: filtered, threshold: th, inRange: inRange}
	}
	// versions holds every vector each ID ever had, for the score check.
	var versions sync.Map // uint64 → [][]float32 (append-only, guarded by vmu)
	var vmu sync.Mutex
	addVersion := func(id uint64, v []float32) {
		vmu.Lock()
		defer vmu.Unlock()
		old, _ := versions.Load(id)
		list, _ := old.([][]float32)
		versions.Store(id, append(slices.Clip(list), v))
	}
	stableRows := map[uint64][]float32{}
	for i, id := range stableIDs {
		addVersion(id, stable[i])
		stableRows[id] = stable[i]
	}
	stableRow := func(id uint64) ([]float32, error) {
		if v, ok := stableRows[id]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("ID %d is not a stable row", id)
	}
	isStable := func(id uint64) bool { return id < stressVolatile }
	// scoreOK: the score is q·v for a vector id held at some point.
	scoreOK := func(id uint64, q []float32, score float32) bool {
		got, ok := versions.Load(id)
		if !ok {
			return false
		}
		for _, v := range got.([][]float32) {
			if ref := refOf(umbra.Dot, id, v, q); math.Abs(ref.Score-float64(score)) <= ref.Tol {
				return true
			}
		}
		return false
	}

	var failures atomic.Int64
	var firstMu sync.Mutex
	var first []string
	fail := func(format string, args ...any) {
		failures.Add(1)
		firstMu.Lock()
		if len(first) < 8 {
			first = append(first, fmt.Sprintf(format, args...))
		}
		firstMu.Unlock()
	}
	// sameTop checks got against the stable answer want for query qi,
	// allowing only near-ties to swap (sameHitsError).
	sameTop := func(qi int, want, got []umbra.Hit) error {
		return sameHitsError(umbra.Dot, stableRow, queries[qi], want, got)
	}
	// checkUnfiltered: the stable hits are the best stable rows in order.
	checkUnfiltered := func(qi int, hits []umbra.Hit) error {
		var stableHits []umbra.Hit
		for i, h := range hits {
			if !scoreOK(h.ID, queries[qi], h.Score) {
				return fmt.Errorf("hit %d: ID %d scores %v, which no vector it held gives", i, h.ID, h.Score)
			}
			if i > 0 && hits[i-1].Score < h.Score {
				return fmt.Errorf("hits %d and %d out of order", i-1, i)
			}
			if isStable(h.ID) {
				stableHits = append(stableHits, h)
			}
		}
		return sameTop(qi, want[qi].top[:len(stableHits)], stableHits)
	}

	// A fault fails the n-th wgpu call from when it is armed, whatever
	// stage that is; the first is armed before the load, and the next each
	// time a search finds that the GPU has come back since (the device
	// side a recovery brings back has none).
	var injected, armed atomic.Int64
	var faultMu sync.Mutex
	armedAt := int64(-1) // the recoveries when the last fault was armed
	fr := rand.New(rand.NewPCG(seed, 99))
	// setFault makes one of the next 30 wgpu calls of ix's device side
	// fail (the seed picks which), counted in injected. The caller holds
	// faultMu or runs alone.
	setFault := func() {
		n := int64(1 + fr.IntN(30))
		var calls atomic.Int64
		engine.SetGPUFault(ix, func(step string) error {
			if calls.Add(1) == n {
				injected.Add(1)
				return fmt.Errorf("injected fault at %q", step)
			}
			return nil
		})
	}
	armFault := func() {
		faultMu.Lock()
		defer faultMu.Unlock()
		back := int64(ix.Info().Recoveries)
		if back == armedAt || armed.Load() == int64(stressFaults*scale) {
			return
		}
		armedAt = back
		setFault()
		armed.Add(1)
	}
	if faults {
		armFault()
	}
	var wg sync.WaitGroup
	models := make([]map[uint64][]float32, stressWriters)
	var writes, cancels, searches atomic.Int64
	for w := 0; w < stressWriters; w++ {
		models[w] = map[uint64][]float32{}
		wr := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			model, next := models[w], uint64(stressVolatile+w*stressIDsPerW)
			for range stressWrites * scale {
				octx, cancel := context.WithCancel(ctx)
				if wr.IntN(6) == 0 { // cancelled at a random point of the call
					time.AfterFunc(time.Duration(wr.IntN(300))*time.Microsecond, cancel)
				}
				var err error
				var apply func()
				switch op := wr.IntN(10); {
				case op < 4 || len(model) == 0:
					n := 1 + wr.IntN(40)
					ids, vs := make([]uint64, n), testkit.Vectors(wr, n, stressDim)
					for i := range ids {
						ids[i] = next + uint64(i)
					}
					for i, id := range ids {
						addVersion(id, vs[i]) // before any search can see it
					}
					_, err = ix.Add(octx, umbra.Vectors(vs), umbra.WithIDs(ids...))
					apply = func() {
						next += uint64(n)
						for i, id := range ids {
							model[id] = vs[i]
						}
					}
				case op < 7:
					ids := pickIDs(wr, model, 1+wr.IntN(8))
					if wr.IntN(3) == 0 {
						ids = append(ids, next)
					}
					vs := testkit.Vectors(wr, len(ids), stressDim)
					for i, id := range ids {
						addVersion(id, vs[i])
					}
					_, err = ix.Upsert(octx, umbra.Vectors(vs), umbra.WithIDs(ids...))
					apply = func() {
						for i, id := range ids {
							model[id] = vs[i]
							if id == next {
								next++
							}
						}
					}
				case op < 9:
					ids := pickIDs(wr, model, 1+wr.IntN(8))
					err = ix.Delete(octx, umbra.WithIDs(ids...))
					apply = func() {
						for _, id := range ids {
							delete(model, id)
						}
					}
				default:
					err = ix.Compact(octx)
					apply = func() {}
				}
				cancel()
				switch {
				case err == nil:
					apply()
					writes.Add(1)
				case errors.Is(err, context.Canceled):
					cancels.Add(1)
				default:
					fail("writer %d: %v", w, err)
				}
			}
		}()
	}
	for s := 0; s < stressSearch; s++ {
		sr := rand.New(rand.NewPCG(seed, uint64(1000+s)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range stressSearches * scale {
				if faults {
					armFault()
				}
				searches.Add(1)
				qi := sr.IntN(len(queries))
				q := queries[qi]
				switch kind := s % 4; kind {
				case 0, 1: // single searches: the ones coalesced
					hits, err := ix.Search(ctx, q, stressK)
					if err != nil {
						fail("search: %v", err)
					} else if err := checkUnfiltered(qi, hits); err != nil {
						fail("search query %d: %v", qi, err)
					}
				case 2:
					if sr.IntN(2) == 0 {
						hits, err := ix.Search(ctx, q, stressK, umbra.Allow(allowSome...))
						if err != nil {
							fail("filtered search: %v", err)
						} else if err := sameTop(qi, want[qi].filtered, hits); err != nil {
							fail("filtered search query %d: %v", qi, err)
						}
						continue
					}
					hits, err := ix.SearchRange(ctx, q, want[qi].threshold)
					if err != nil {
						fail("range search: %v", err)
						continue
					}
					var got []umbra.Hit
					for _, h := range hits {
						if isStable(h.ID) {
							got = append(got, h)
						}
					}
					if err := sameTop(qi, want[qi].inRange, got); err != nil {
						fail("range search query %d: %v", qi, err)
					}
				case 3:
					qis := []int{qi, sr.IntN(len(queries)), sr.IntN(len(queries))}
					qs := [][]float32{queries[qis[0]], queries[qis[1]], queries[qis[2]]}
					all, err := ix.SearchBatch(ctx, qs, stressK)
					if err != nil {
						fail("batch search: %v", err)
						continue
					}
					for i, hits := range all {
						if err := checkUnfiltered(qis[i], hits); err != nil {
							fail("batch search query %d: %v", qis[i], err)
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%s: %d searches, %d writes, %d writes cancelled, %d GPU faults injected, %d recoveries; backend now %s (last failure: %s)",
		b.name, searches.Load(), writes.Load(), cancels.Load(), injected.Load(), ix.Info().Recoveries, ix.Info().Device, ix.Info().LastFailure)
	require.Zero(t, failures.Load(), "wrong answers or errors under load, first ones: %v", first)
	require.Positive(t, writes.Load(), "every write was cancelled")
	if faults {
		// The faults the load did not meet, one at a time and with no
		// other call running: wait for the GPU to come back, arm a fault
		// on the device side it came back with (replacing one the load
		// armed and never met), search until it fires. Each such fault
		// fails a live search, so each moves the index to the CPU and
		// each must be recovered from. (A fault of the load may fail a
		// call whose context was cancelled: that says nothing about the
		// device, which the index keeps, so the load's faults are not
		// each owed a recovery.)
		back := func() {
			require.Eventually(t, func() bool { return ix.Info().Device == engine.GPU }, time.Minute, time.Millisecond,
				"the GPU did not come back: %s", ix.Info().Reason)
		}
		back()
		recovered0, injected0 := ix.Info().Recoveries, injected.Load()
		fired := injected0
		for i := 0; injected.Load() < stressFaults*int64(scale); i++ {
			require.Less(t, i, 10_000, "%d searches and the armed fault did not fire", i)
			if i == 0 || injected.Load() > fired {
				fired = injected.Load()
				back()
				setFault()
			}
			qi := i % len(queries)
			hits, err := ix.Search(ctx, queries[qi], stressK)
			require.NoError(t, err, "the search the fault failed is answered on the CPU")
			require.NoError(t, checkUnfiltered(qi, hits))
		}
		back()
		engine.SetGPUFault(ix, nil)
		require.Equal(t, stressFaults*int64(scale), injected.Load())
		require.Equal(t, injected.Load()-injected0, int64(ix.Info().Recoveries-recovered0),
			"a recovery from every fault that failed a live search")
		t.Logf("%s: then %d GPU faults injected, %d recoveries in all", b.name, injected.Load(), ix.Info().Recoveries)
	}

	// The index holds exactly what the models say.
	all := map[uint64][]float32{}
	for i, id := range stableIDs {
		all[id] = stable[i]
	}
	for _, m := range models {
		for id, v := range m {
			all[id] = v
		}
	}
	require.Equal(t, len(all), ix.Len())
	ids := ix.IDs()
	require.Len(t, ids, len(all))
	fresh := open(t, backends[0], engine.Config{Dim: stressDim, Metric: umbra.Dot})
	vs := make([][]float32, len(ids))
	for i, id := range ids {
		v, err := ix.Vector(id)
		require.NoError(t, err)
		require.Equal(t, all[id], v, "ID %d", id)
		vs[i] = v
	}
	require.NoError(t, testkit.ErrOf(fresh.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...))))
	for i, q := range queries {
		want, err := fresh.Search(ctx, q, stressK)
		require.NoError(t, err)
		got, err := ix.Search(ctx, q, stressK)
		require.NoError(t, err)
		requireSameHits(t, umbra.Dot, fresh.Vector, q, want, got, fmt.Sprintf("query %d after the load", i))
	}
}

// pickIDs returns up to n distinct IDs of model, at random.
func pickIDs(r *rand.Rand, model map[uint64][]float32, n int) []uint64 {
	var out []uint64
	for id := range model {
		if len(out) == n {
			break
		}
		if r.IntN(2) == 0 || len(model) <= n {
			out = append(out, id)
		}
	}
	return out
}
