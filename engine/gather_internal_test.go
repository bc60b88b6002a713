package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/umbravec/umbra"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// newSubsetIndex is New on the CPU with every filtered search forced onto
// path (subsetMeasured: the measured choice).
func newSubsetIndex(t *testing.T, cfg Config, path subsetPath) *Index {
	t.Helper()
	cfg.Device = CPU
	return newSubsetIndexOn(t, cfg, path)
}

// newSubsetIndexOn is newSubsetIndex on cfg's device; a GPU index (on
// Vulkan, at most 512 rows a device buffer) is skipped where no adapter
// works, unless UMBRA_REQUIRE_GPU=1.
func newSubsetIndexOn(t *testing.T, cfg Config, path subsetPath) *Index {
	t.Helper()
	hooks := &testHooks{subset: path}
	if cfg.Device == GPU {
		cfg.Adapters = []AdapterSelect{{Backend: "vulkan"}}
		hooks.maxChunkRows = 512
	}
	ix, err := newIndex(context.Background(), cfg, hooks)
	if err != nil && cfg.Device == GPU {
		testkit.NoGPU(t, "no Vulkan adapter works: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { ix.Close() })
	if cfg.Device == GPU {
		require.True(t, ix.onGPU())
	}
	return ix
}

// gatherModel is the rows a model index holds: vector and user by ID.
type gatherModel struct {
	vec  map[uint64][]float32
	user map[uint64]string
}

// ranking is the model's float64 answer among the IDs keep admits, top k
// by score then lower ID, and the reference of every ID it scored.
func (m gatherModel) ranking(metric umbra.Metric, q []float32, k int, keep func(id uint64) bool) ([]testkit.Hit, map[uint64]testkit.Ref) {
	tm := map[umbra.Metric]testkit.Metric{umbra.Cosine: testkit.Cosine, umbra.Dot: testkit.Dot, umbra.L2: testkit.L2}[metric]
	refs := map[uint64]testkit.Ref{}
	var all []testkit.Ref
	for id, v := range m.vec {
		if keep(id) {
			ref := testkit.Score(tm, id, v, q)
			refs[id] = ref
			all = append(all, ref)
		}
	}
	slices.SortFunc(all, func(a, b testkit.Ref) int {
		sa, sb := a.Score, b.Score
		if metric == umbra.L2 {
			sa, sb = -sa, -sb
		}
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return int(a.ID) - int(b.ID)
	})
	want := []testkit.Hit{}
	for _, r := range all[:min(k, len(all))] {
		want = append(want, testkit.Hit{ID: r.ID, Score: float32(r.Score)})
	}
	return want, refs
}

func kitHits(hits []umbra.Hit) []testkit.Hit {
	out := make([]testkit.Hit, len(hits))
	for i, h := range hits {
		out[i] = testkit.Hit{ID: h.ID, Score: h.Score}
	}
	return out
}

// TestFilteredSearchGatherEqualsScan holds a filtered search to one answer
// whichever way it meets its filter: three indexes take the same writes
// (IDs that do not follow the rows, duplicate vectors so scores tie,
// metadata whose users own one row, a few rows, half the rows, or none,
// upserts, and deletes inside the subsets), one forced to scan, one
// forced to gather, one choosing by its measured costs, and every umbra.Where,
// umbra.Allow and umbra.AllowFunc search, top k and range, with k from 1 past the
// subset's size, must give the same hits and score bits on all three, be
// the float64 reference's top k of the subset (within float32's rounding
// of near ties), and say in its trace which path ran. Every precision and
// metric.
func TestFilteredSearchGatherEqualsScan(t *testing.T) {
	type run struct {
		device Device
		prec   umbra.Precision
		metric umbra.Metric
	}
	var runs []run
	for _, prec := range []umbra.Precision{umbra.F32, umbra.Int8, umbra.F16} {
		for _, metric := range []umbra.Metric{umbra.Dot, umbra.L2, umbra.Cosine} {
			runs = append(runs, run{CPU, prec, metric})
		}
	}
	// On the GPU the gather is gather.wgsl's (float32; a compressed index
	// scans on its device), held to the device's own scan.
	runs = append(runs, run{GPU, umbra.F32, umbra.Dot}, run{GPU, umbra.F32, umbra.L2}, run{GPU, umbra.F32, umbra.Cosine}, run{GPU, umbra.Int8, umbra.Dot})
	for _, rn := range runs {
		prec, metric := rn.prec, rn.metric
		{
			t.Run(fmt.Sprintf("%v/%v/%v", rn.device, prec, metric), func(t *testing.T) {
				r := testkit.Rand(t)
				ctx := context.Background()
				dim := []int{8, 96, 520}[r.IntN(3)]
				cfg := Config{Dim: dim, Metric: metric, Precision: prec, Device: rn.device}
				paths := []subsetPath{subsetScan, subsetGather, subsetMeasured}
				ixs := make([]*Index, len(paths))
				for i, p := range paths {
					ixs[i] = newSubsetIndexOn(t, cfg, p)
				}
				model := gatherModel{vec: map[uint64][]float32{}, user: map[uint64]string{}}
				n := 600 + r.IntN(600)
				ids := make([]uint64, n)
				for i, p := range r.Perm(4 * n)[:n] {
					ids[i] = uint64(p)
				}
				vs := testkit.Vectors(r, n, dim)
				users := make([]meta.Fields, n)
				for i := range n {
					if i > 0 && r.IntN(8) == 0 {
						vs[i] = vs[r.IntN(i)] // a duplicate: scores tie
					}
					u := fmt.Sprint("u", 3+r.IntN(40))
					switch {
					case i == 7:
						u = "one"
					case i%97 == 5:
						u = "few"
					case r.IntN(2) == 0:
						u = "half"
					}
					users[i] = meta.Fields{"user": meta.KeywordOf(u)}
					model.vec[ids[i]], model.user[ids[i]] = vs[i], u
				}
				for _, ix := range ixs {
					_, err := ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...), umbra.WithMeta(users...))
					require.NoError(t, err)
				}
				// Upserts and deletes, some inside the small subsets.
				var up []uint64
				for range 20 {
					if id := ids[r.IntN(n)]; !slices.Contains(up, id) {
						up = append(up, id)
					}
				}
				upVs := testkit.Vectors(r, len(up), dim)
				upUsers := make([]meta.Fields, len(up))
				for i, id := range up {
					u := []string{"few", "half", "u9"}[r.IntN(3)]
					upUsers[i] = meta.Fields{"user": meta.KeywordOf(u)}
					model.vec[id], model.user[id] = upVs[i], u
				}
				var del []uint64
				for id, u := range model.user {
					if (u == "few" && r.IntN(3) == 0) || r.IntN(20) == 0 {
						del = append(del, id)
					}
				}
				for _, ix := range ixs {
					_, err := ix.Upsert(ctx, umbra.Vectors(upVs), umbra.WithIDs(up...), umbra.WithMeta(upUsers...))
					require.NoError(t, err)
					require.NoError(t, ix.Delete(ctx, umbra.WithIDs(del...)))
				}
				for _, id := range del {
					delete(model.vec, id)
					delete(model.user, id)
				}
				allowSome := make([]uint64, 0, 40)
				for range 40 {
					allowSome = append(allowSome, uint64(r.IntN(4*n))) // some not stored, some deleted
				}
				type filter struct {
					name string
					opts []umbra.SearchOption
					keep func(id uint64) bool
				}
				userIs := func(u string) filter {
					return filter{"user " + u, []umbra.SearchOption{umbra.Where(meta.Eq("user", meta.KeywordOf(u)))},
						func(id uint64) bool { return model.user[id] == u }}
				}
				filters := []filter{
					userIs("one"), userIs("few"), userIs("half"), userIs("nobody"), userIs("u9"),
					{"not half", []umbra.SearchOption{umbra.Where(meta.Not(meta.Eq("user", meta.KeywordOf("half"))))},
						func(id uint64) bool { return model.user[id] != "half" }},
					{"allow", []umbra.SearchOption{umbra.Allow(allowSome...)},
						func(id uint64) bool { return slices.Contains(allowSome, id) }},
					{"allow func", []umbra.SearchOption{umbra.AllowFunc(func(id uint64) bool { return id%5 == 0 })},
						func(id uint64) bool { return id%5 == 0 }},
					{"where and allow", []umbra.SearchOption{umbra.Where(meta.Eq("user", meta.KeywordOf("half"))), umbra.Allow(allowSome...)},
						func(id uint64) bool { return model.user[id] == "half" && slices.Contains(allowSome, id) }},
				}
				for _, f := range filters {
					admitted := 0
					for id := range model.vec {
						if f.keep(id) {
							admitted++
						}
					}
					q := testkit.Vector(r, dim)
					for _, k := range []int{1, 7, admitted + 3} {
						var answers [][]umbra.Hit
						for i, ix := range ixs {
							var tr diag.Trace
							got, err := ix.Search(diag.WithTrace(ctx, &tr), q, k, f.opts...)
							require.NoError(t, err)
							answers = append(answers, got)
							require.Equal(t, int64(admitted), tr.Admitted, "%s k %d: admitted", f.name, k)
							switch {
							case paths[i] == subsetScan:
								require.Equal(t, "scan", tr.Subset, f.name)
							case paths[i] == subsetGather && (rn.device == CPU || prec == umbra.F32 || admitted == 0):
								require.Equal(t, "gather", tr.Subset, f.name)
							default:
								require.Contains(t, []string{"scan", "gather"}, tr.Subset, f.name)
							}
							if rn.device == GPU && admitted > 0 {
								require.Equal(t, "gpu", tr.Device, "%s: path %v", f.name, paths[i])
							}
						}
						require.Equal(t, answers[0], answers[1], "%s k %d (%d admitted): gather against scan", f.name, k, admitted)
						require.Equal(t, answers[0], answers[2], "%s k %d: measured choice against scan", f.name, k)
						want, refs := model.ranking(metric, q, k, f.keep)
						require.NoError(t, testkit.SameRanking(want, kitHits(answers[1]), func(id uint64) (testkit.Ref, error) {
							ref, ok := refs[id]
							if !ok {
								return ref, fmt.Errorf("ID %d is not in the subset", id)
							}
							return ref, nil
						}), "%s k %d", f.name, k)
					}
					// A batch and a range search, the same way.
					qs := testkit.Vectors(r, 3, dim)
					var batches [][][]umbra.Hit
					var ranges [][]umbra.Hit
					for _, ix := range ixs {
						b, err := ix.SearchBatch(ctx, qs, 5, f.opts...)
						require.NoError(t, err)
						batches = append(batches, b)
						th := float32(0)
						if metric == umbra.L2 {
							th = float32(dim) / 3
						}
						rg, err := ix.SearchRange(ctx, qs[0], th, f.opts...)
						require.NoError(t, err)
						ranges = append(ranges, rg)
					}
					require.Equal(t, batches[0], batches[1], "%s: batch", f.name)
					require.Equal(t, batches[0], batches[2], "%s: batch", f.name)
					require.Equal(t, ranges[0], ranges[1], "%s: range", f.name)
					require.Equal(t, ranges[0], ranges[2], "%s: range", f.name)
				}
			})
		}
	}
}

// TestGatherUnderConcurrentWrites searches one user's rows by gather while
// other goroutines add and delete rows, the user's among them: every
// answer must be the user's rows only, ranked best first with ties by
// lower ID, each score its row's own, and it must hold every row of the
// user that lived through the whole search and beats its last hit.
func TestGatherUnderConcurrentWrites(t *testing.T) {
	for _, rn := range []struct {
		device Device
		prec   umbra.Precision
	}{{CPU, umbra.F32}, {CPU, umbra.Int8}, {GPU, umbra.F32}} {
		prec := rn.prec
		t.Run(fmt.Sprintf("%v/%v", rn.device, prec), func(t *testing.T) {
			r := testkit.Rand(t)
			ctx := context.Background()
			const dim = 32
			ix := newSubsetIndexOn(t, Config{Dim: dim, Metric: umbra.Dot, Precision: prec, Device: rn.device}, subsetGather)
			var mu sync.Mutex
			vecs := map[uint64][]float32{}
			isAlice := map[uint64]bool{}
			stable := map[uint64]bool{} // the user's rows never deleted
			var next atomic.Uint64
			add := func(r *rand.Rand, n int, alice bool) []uint64 {
				vs := testkit.Vectors(r, n, dim)
				ids := make([]uint64, n)
				users := make([]meta.Fields, n)
				mu.Lock()
				for i := range ids {
					ids[i] = next.Add(1)
					u := "bob"
					if alice {
						u = "alice"
					}
					users[i] = meta.Fields{"user": meta.KeywordOf(u)}
					vecs[ids[i]], isAlice[ids[i]] = vs[i], alice
				}
				mu.Unlock()
				_, err := ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...), umbra.WithMeta(users...))
				require.NoError(t, err)
				return ids
			}
			for _, id := range add(r, 50, true) {
				stable[id] = true
			}
			add(r, 2000, false)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var writes atomic.Int64
			// The writer's stream is seeded here: r is the searches'.
			wr := rand.New(rand.NewPCG(r.Uint64(), 1))
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					ids := add(wr, 1+wr.IntN(20), wr.IntN(2) == 0)
					if wr.IntN(2) == 0 {
						require.NoError(t, ix.Delete(ctx, umbra.WithIDs(ids[:1+wr.IntN(len(ids))]...)))
					}
					writes.Add(1)
				}
			})
			where := umbra.Where(meta.Eq("user", meta.KeywordOf("alice")))
			for i := 0; i < 200 || writes.Load() < 100; i++ {
				q := testkit.Vector(r, dim)
				k := 1 + r.IntN(60)
				var tr diag.Trace
				hits, err := ix.Search(diag.WithTrace(ctx, &tr), q, k, where)
				require.NoError(t, err)
				require.Equal(t, "gather", tr.Subset)
				require.LessOrEqual(t, len(hits), k)
				mu.Lock()
				for j, h := range hits {
					v, ok := vecs[h.ID]
					require.True(t, ok && isAlice[h.ID], "hit %d: ID %d is not one of the user's rows", j, h.ID)
					ref := testkit.Score(testkit.Dot, h.ID, v, q)
					require.InDelta(t, ref.Score, float64(h.Score), ref.Tol, "hit %d: ID %d's score", j, h.ID)
					if j > 0 {
						p := hits[j-1]
						require.True(t, p.Score > h.Score || p.Score == h.Score && p.ID < h.ID, "hits %d and %d out of order: %v", j-1, j, hits)
					}
				}
				got := map[uint64]bool{}
				for _, h := range hits {
					got[h.ID] = true
				}
				if len(hits) == k {
					last := hits[k-1]
					for id := range stable {
						ref := testkit.Score(testkit.Dot, id, vecs[id], q)
						if !got[id] && ref.Score > float64(last.Score)+ref.Tol {
							t.Fatalf("query %d: stable row %d (%g) beats the last hit %v and is missing", i, id, ref.Score, last)
						}
					}
				} else {
					for id := range stable {
						require.True(t, got[id], "query %d: %d hits of k %d miss stable row %d", i, len(hits), k, id)
					}
				}
				mu.Unlock()
			}
			close(stop)
			wg.Wait()
		})
	}
}

// TestGatherCostsMeasured: the costs the choice is made by are measured
// and positive for every precision, and they choose the gather for a
// subset of one row in a million and the scan for every row.
func TestGatherCostsMeasured(t *testing.T) {
	for _, f := range []func() (gatherCosts, error){gatherCostsF32, gatherCostsI8, gatherCostsF16} {
		c, err := f()
		require.NoError(t, err)
		t.Logf("%+v", c)
		require.Greater(t, c.ScanRow+c.ScanByte, 0.0)
		require.Greater(t, c.GatherRow+c.GatherByte, 0.0)
		require.True(t, c.pays(1, 1_000_000, 3072, 1, 0))
		require.True(t, c.pays(1, 1_000_000, 384, 1, 0))
		require.False(t, c.pays(1_000_000, 1_000_000, 3072, 1, 0), "nothing to skip")
	}
	// A gather of more than a quarter of the rows is not taken however
	// cheap the calibration (in cache) prices it: its rows come from
	// memory (gatherMaxShare).
	c := gatherCosts{ScanRow: 1, GatherRow: 0.1}
	require.False(t, c.pays(500_000, 1_000_000, 512, 1, 0), "a gather of half the rows")
	require.False(t, c.pays(250_001, 1_000_000, 512, 1, 0), "a gather of just over a quarter")
	require.True(t, c.pays(250_000, 1_000_000, 512, 1, 0), "a gather of a quarter")
}

// TestListMaskEqualsBitmap: a selective equality's rows come straight
// from its posting list (listMask), skipping deleted rows, and make the
// mask the bitmap evaluation makes — the same bits, count and words —
// while a filter Rows does not answer goes the bitmap way.
func TestListMaskEqualsBitmap(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	ix := newSubsetIndex(t, Config{Dim: 4, Metric: umbra.Dot}, subsetMeasured)
	n := 3000 + r.IntN(3000)
	users := make([]meta.Fields, n)
	for i := range users {
		u := "many"
		if r.IntN(50) == 0 {
			u = fmt.Sprint("rare", r.IntN(3))
		}
		users[i] = meta.Fields{"user": meta.KeywordOf(u)}
	}
	_, err := ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, n, 4)), umbra.WithMeta(users...))
	require.NoError(t, err)
	var del []uint64
	for range n / 10 {
		del = append(del, uint64(r.IntN(n)))
	}
	slices.Sort(del)
	require.NoError(t, ix.Delete(ctx, umbra.WithIDs(slices.Compact(del)...)))
	maskOf := func(f meta.Filter) rowMask {
		o, err := collect("Search", []umbra.SearchOption{umbra.Where(f)})
		require.NoError(t, err)
		ix.mu.RLock()
		defer ix.mu.RUnlock()
		m, err := ix.mask(&o)
		require.NoError(t, err)
		c := rowMask{bits: slices.Clone(m.bits), n: m.n, words: slices.Clone(m.words), rows: slices.Clone(m.rows)}
		m.release()
		return c
	}
	for _, u := range []string{"rare0", "rare1", "rare2", "nobody"} {
		eq := meta.Eq("user", meta.KeywordOf(u))
		list := maskOf(eq)
		require.NotNil(t, list.rows, "%s: listed", u)
		bitmap := maskOf(meta.Or(eq, meta.Eq("user", meta.KeywordOf("absent too"))))
		require.Nil(t, bitmap.rows, "%s: an Or is evaluated as a bitmap", u)
		require.Equal(t, bitmap.bits, list.bits, u)
		require.Equal(t, bitmap.n, list.n, u)
		require.Equal(t, len(list.rows), list.n, u)
		require.Equal(t, maskRows(bitmap.bits, bitmap.words, bitmap.n, n), list.rows, u)
		if bitmap.n > 0 {
			require.Equal(t, bitmap.words, list.words, u)
		}
		for _, row := range list.rows {
			require.False(t, ix.rid.isDead(int(row)), "%s: deleted row %d listed", u, row)
		}
	}
	require.Nil(t, maskOf(meta.Eq("user", meta.KeywordOf("many"))).rows, "a bitmap posting is evaluated")
}
