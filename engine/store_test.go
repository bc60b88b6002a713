package engine_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// model is the plain reference an index is checked against: a map from ID
// to vector, searched by brute force in float64.
type model struct {
	m    umbra.Metric
	vecs map[uint64][]float32
}

func (md *model) ranked(q []float32, keep func(uint64) bool) []ranked {
	var out []ranked
	for id, v := range md.vecs {
		if keep == nil || keep(id) {
			out = append(out, ranked{id, refScore(md.m, v, q)})
		}
	}
	slices.SortFunc(out, func(a, b ranked) int {
		if a.score != b.score {
			if (a.score > b.score) == md.m.HigherIsBetter() {
				return -1
			}
			return 1
		}
		if a.id < b.id {
			return -1
		}
		return 1
	})
	return out
}

// checkAgainst asserts hits are the model's top k (up to near-ties): the
// right count, stored IDs admitted by keep, and the model's ranking by
// sameHitsError.
func (md *model) checkAgainst(t *testing.T, q []float32, k int, keep func(uint64) bool, hits []umbra.Hit, what string) {
	t.Helper()
	ref := md.ranked(q, keep)
	want := make([]umbra.Hit, min(k, len(ref)))
	for i := range want {
		want[i] = umbra.Hit{ID: ref[i].id, Score: float32(ref[i].score)}
	}
	for i, h := range hits {
		require.True(t, keep == nil || keep(h.ID), "%s: hit %d (ID %d) is filtered out", what, i, h.ID)
	}
	require.NoError(t, sameHitsError(md.m, md.row, q, want, hits), what)
}

// row is the vector the model holds under id.
func (md *model) row(id uint64) ([]float32, error) {
	if v, ok := md.vecs[id]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("ID %d is not stored", id)
}

// TestStoreOperationsMatchAModel runs random sequences of AddWithIDs, Add,
// Upsert, Delete, Compact, filtered and range searches on every backend,
// and after every step compares Len, IDs, Get and the searches with the
// plain model. Each bad call (a repeated ID, an existing ID, an unknown ID)
// must fail with its sentinel and change nothing.
func TestStoreOperationsMatchAModel(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 12
	ctx := context.Background()
	for _, b := range backends {
		for _, m := range metrics {
			t.Run(fmt.Sprintf("%s/%s", b.name, m), func(t *testing.T) {
				ix := open(t, b, engine.Config{Dim: dim, Metric: m}, 64)
				md := &model{m: m, vecs: map[uint64][]float32{}}
				stored := func() []uint64 {
					ids := make([]uint64, 0, len(md.vecs))
					for id := range md.vecs {
						ids = append(ids, id)
					}
					slices.Sort(ids)
					return ids
				}
				pick := func() uint64 {
					ids := stored()
					return ids[r.IntN(len(ids))]
				}
				for step := 0; step < 60; step++ {
					what := fmt.Sprintf("step %d", step)
					switch op := r.IntN(10); {
					case op < 3 || len(md.vecs) < 5: // add under the caller's IDs
						n := 1 + r.IntN(40)
						ids := make([]uint64, n)
						for i := range ids {
							ids[i] = r.Uint64N(1 << 20)
							for md.vecs[ids[i]] != nil || slices.Contains(ids[:i], ids[i]) {
								ids[i] = r.Uint64N(1 << 20)
							}
						}
						vs := testkit.Vectors(r, n, dim)
						require.NoError(t, testkit.ErrOf(ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...))), what)
						for i, id := range ids {
							md.vecs[id] = vs[i]
						}
					case op == 3: // auto IDs: past every stored ID
						vs := testkit.Vectors(r, 1+r.IntN(10), dim)
						ids, err := ix.Add(ctx, umbra.Vectors(vs))
						require.NoError(t, err, what)
						for i, id := range ids {
							require.Nil(t, md.vecs[id], "%s: Add assigned ID %d, which is stored", what, id)
							md.vecs[id] = vs[i]
						}
					case op == 4: // upsert: some stored, some new
						// Each ID once: the first and third may be one pick,
						// and the second (x^1<<30) names a stored ID, even
						// one of the others, when x came from an earlier
						// upsert's second.
						var ids []uint64
						for _, id := range []uint64{pick(), pick() ^ 1<<30, pick()} {
							if !slices.Contains(ids, id) {
								ids = append(ids, id)
							}
						}
						vs := testkit.Vectors(r, len(ids), dim)
						require.NoError(t, testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...))), what)
						for i, id := range ids {
							md.vecs[id] = vs[i]
						}
					case op < 7: // delete a few
						n := min(1+r.IntN(8), len(md.vecs)-1)
						ids := stored()
						r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
						require.NoError(t, ix.Delete(ctx, umbra.WithIDs(ids[:n]...)), what)
						for _, id := range ids[:n] {
							delete(md.vecs, id)
						}
					case op == 7:
						require.NoError(t, ix.Compact(ctx), what)
					default: // every bad call fails with its sentinel, changing nothing
						id := pick()
						v := testkit.Vectors(r, 2, dim)
						require.ErrorIs(t, testkit.ErrOf(ix.Add(ctx, umbra.Vectors(v), umbra.WithIDs([]uint64{id + 1<<40, id + 1<<40}...))), umbra.ErrDuplicateID, what)
						require.ErrorIs(t, testkit.ErrOf(ix.Add(ctx, umbra.Vectors(v), umbra.WithIDs([]uint64{1<<41 + 7, id}...))), umbra.ErrIDExists, what)
						// In increasing order (checked without a map) too.
						require.ErrorIs(t, testkit.ErrOf(ix.Add(ctx, umbra.Vectors(v), umbra.WithIDs([]uint64{id, 1<<41 + 7}...))), umbra.ErrIDExists, what)
						require.ErrorIs(t, ix.Delete(ctx, umbra.WithIDs(id, 1<<42)), umbra.ErrNotFound, what)
						require.ErrorIs(t, ix.Delete(ctx, umbra.WithIDs(id, id)), umbra.ErrDuplicateID, what)
						require.ErrorIs(t, testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors(v), umbra.WithIDs([]uint64{id, id}...))), umbra.ErrDuplicateID, what)
						require.ErrorIs(t, testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors(v), umbra.WithIDs([]uint64{id}...))), umbra.ErrIDCount, what)
						_, err := ix.Vector(1 << 42)
						require.ErrorIs(t, err, umbra.ErrNotFound, what)
					}
					// After every step: contents, then searches.
					require.Equal(t, len(md.vecs), ix.Len(), what)
					require.Equal(t, stored(), ix.IDs(), what)
					id := pick()
					got, err := ix.Vector(id)
					require.NoError(t, err, what)
					want := md.vecs[id]
					if m == umbra.Cosine {
						want = unit(want)
					}
					require.InDeltaSlice(t, want, got, 1e-6, "%s: Get(%d)", what, id)

					q := testkit.Vectors(r, 1, dim)[0]
					for _, k := range []int{1, 7, len(md.vecs)} {
						hits, err := ix.Search(ctx, q, k)
						require.NoError(t, err, what)
						md.checkAgainst(t, q, k, nil, hits, fmt.Sprintf("%s: k=%d", what, k))
					}
					// A filter that admits about one ID in ten, by predicate
					// and by list.
					keep := func(id uint64) bool { return id%10 == 3 }
					hits, err := ix.Search(ctx, q, 5, umbra.AllowFunc(keep))
					require.NoError(t, err, what)
					md.checkAgainst(t, q, 5, keep, hits, what+": AllowFunc")
					var list []uint64
					for _, id := range stored() {
						if keep(id) {
							list = append(list, id)
						}
					}
					list = append(list, 1<<43) // not stored: ignored
					batch, err := ix.SearchBatch(ctx, [][]float32{q, q}, 5, umbra.Allow(list...))
					require.NoError(t, err, what)
					md.checkAgainst(t, q, 5, keep, batch[1], what+": Allow")
					// Range: at the score of the model's 6th best, everything
					// within it and nothing else (away from near-ties).
					ref := md.ranked(q, nil)
					if len(ref) > 8 {
						th := (ref[5].score + ref[6].score) / 2
						if math.Abs(ref[5].score-ref[6].score) > 4*tolerance(m, th) {
							within, err := ix.SearchRange(ctx, q, float32(th))
							require.NoError(t, err, what)
							md.checkAgainst(t, q, 6, nil, within, what+": range")
							capped, err := ix.SearchRange(ctx, q, float32(th), umbra.MaxHits(2))
							require.NoError(t, err, what)
							require.Equal(t, within[:2], capped, what)
						}
					}
				}
			})
		}
	}
}

func unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	// The same arithmetic as the engine's normalisation, so stored rows
	// compare exactly.
	inv := 1 / math.Sqrt(n)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

// TestSearchWithinOneRowInAThousand: a filter admitting a handful of rows
// out of thousands still returns the true top k among them, never fewer
// than are admitted, on every backend.
func TestSearchWithinOneRowInAThousand(t *testing.T) {
	r := testkit.Rand(t)
	const n, dim = 5000, 16
	data := testkit.Vectors(r, n, dim)
	allow := []uint64{7, 1234, 4999, 2500, 3}
	q := testkit.Vectors(r, 1, dim)[0]
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: dim, Metric: umbra.Dot})
			_, err := ix.Add(context.Background(), umbra.Vectors(data))
			require.NoError(t, err)
			md := &model{m: umbra.Dot, vecs: map[uint64][]float32{}}
			for i, v := range data {
				md.vecs[uint64(i)] = v
			}
			keep := func(id uint64) bool { return slices.Contains(allow, id) }
			for _, k := range []int{1, 3, 5, 10} {
				hits, err := ix.Search(context.Background(), q, k, umbra.Allow(allow...))
				require.NoError(t, err)
				md.checkAgainst(t, q, k, keep, hits, fmt.Sprintf("k=%d", k))
			}
		})
	}
}

// TestStringKeys: vectors stored under string keys get IDs that hits name
// and KeyOf maps back; UpsertKeys replaces in place, DeleteKeys removes,
// and a repeated, stored or unknown key fails with nothing changed.
func TestStringKeys(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			// L2: a stored vector is its own nearest neighbour (under dot a
			// longer one can outscore it).
			ix := open(t, b, engine.Config{Dim: 8, Metric: umbra.L2})
			keys := []string{"notes/a.md", "550e8400-e29b-41d4-a716-446655440000", " spaced, and commas ", "ü"}
			vs := testkit.Vectors(r, len(keys), 8)
			ids, err := ix.Add(ctx, umbra.Vectors(vs), umbra.WithKeys(keys...))
			require.NoError(t, err)
			for i, key := range keys {
				id, ok := ix.Lookup(key)
				require.True(t, ok, key)
				require.Equal(t, ids[i], id)
				back, ok := ix.KeyOf(id)
				require.True(t, ok)
				require.Equal(t, key, back)
			}
			hits, err := ix.Search(ctx, vs[1], 1)
			require.NoError(t, err)
			key, _ := ix.KeyOf(hits[0].ID)
			require.Equal(t, keys[1], key)

			_, err = ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 2, 8)), umbra.WithKeys([]string{"x", "x"}...))
			require.ErrorIs(t, err, umbra.ErrDuplicateID)
			_, err = ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 2, 8)), umbra.WithKeys([]string{"y", keys[0]}...))
			require.ErrorIs(t, err, umbra.ErrKeyExists)
			require.ErrorIs(t, ix.Delete(ctx, umbra.WithKeys(keys[0], "nope")), umbra.ErrNotFound)
			require.Equal(t, len(keys), ix.Len(), "failed calls changed nothing")
			_, ok := ix.Lookup("y")
			require.False(t, ok)

			nv := testkit.Vectors(r, 2, 8)
			up, err := ix.Upsert(ctx, umbra.Vectors(nv), umbra.WithKeys([]string{keys[2], "new"}...))
			require.NoError(t, err)
			require.Equal(t, ids[2], up[0], "a stored key keeps its ID")
			got, err := ix.Vector(up[0])
			require.NoError(t, err)
			require.Equal(t, nv[0], got)
			require.Equal(t, len(keys)+1, ix.Len())

			require.NoError(t, ix.Delete(ctx, umbra.WithKeys(keys[0], "new")))
			_, ok = ix.Lookup(keys[0])
			require.False(t, ok)
			_, ok = ix.KeyOf(ids[0])
			require.False(t, ok)
			require.Equal(t, len(keys)-1, ix.Len())
		})
	}
}

// TestCancelledAddStoresNothing: an Add whose context is cancelled while it
// validates or uploads returns the context's error and stores nothing; the
// index then takes the same rows normally. Info after Close names no device.
func TestCancelledAddStoresNothing(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 8
	flat := make([]float32, 300_000*dim)
	for i := range flat {
		flat[i] = r.Float32() - 0.5
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: dim, Metric: umbra.Dot})
			_, err := ix.Add(context.Background(), umbra.Flat(flat[:10*dim], ix.Dim()))
			require.NoError(t, err)
			for _, stage := range []string{"validate", "upload"} {
				ctx, cancel := context.WithCancel(context.Background())
				ctx = engine.WithProgress(ctx, func(s string, done, total int) {
					if s == stage {
						cancel()
					}
				})
				_, err := ix.Add(ctx, umbra.Flat(flat, ix.Dim()))
				cancel()
				if stage == "upload" && b.device == engine.CPU {
					require.NoError(t, err, "the CPU path has no upload to cancel")
					require.NoError(t, ix.Delete(context.Background(), umbra.WithIDs(ix.IDs()[10:]...)))
					require.NoError(t, ix.Compact(context.Background()))
					continue
				}
				require.ErrorIs(t, err, context.Canceled, stage)
				require.Equal(t, 10, ix.Len(), "%s: a cancelled Add stored rows", stage)
			}
			ids, err := ix.Add(context.Background(), umbra.Flat(flat[:50*dim], ix.Dim()))
			require.NoError(t, err)
			require.Len(t, ids, 50)
			hits, err := ix.Search(context.Background(), flat[20*dim:21*dim], 60)
			require.NoError(t, err)
			require.Len(t, hits, 60)
			require.NoError(t, ix.Close())
			info := ix.Info()
			require.Equal(t, engine.CPU, info.Device, "after Close")
		})
	}
}
