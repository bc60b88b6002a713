//go:build cgo && !nogpu

package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/testkit"
)

// tombPair is a GPU index and a CPU index kept holding the same rows.
type tombPair struct {
	gpu, cpu *engine.Index
	ctx      context.Context // every search's: the select path it forces
}

func (p tombPair) both(t *testing.T, f func(ix *engine.Index) error) {
	t.Helper()
	require.NoError(t, f(p.gpu), "gpu")
	require.NoError(t, f(p.cpu), "cpu")
}

// same asserts the GPU index answers every unfiltered search, single and
// batched, as the CPU one does, over k from 1 to every row (the fused
// select, the radix select and the host's selection).
func (p tombPair) same(t *testing.T, m umbra.Metric, queries [][]float32, what string) {
	t.Helper()
	ctx := p.ctx
	require.Equal(t, p.cpu.Len(), p.gpu.Len(), what)
	for _, k := range []int{1, 10, 300, p.cpu.Len() / 2, p.cpu.Len() + 5} {
		want, err := p.cpu.SearchBatch(ctx, queries, k)
		require.NoError(t, err)
		got, err := p.gpu.SearchBatch(ctx, queries, k)
		require.NoError(t, err, "%s: k=%d", what, k)
		for qi := range want {
			requireSameHits(t, m, p.cpu.Vector, queries[qi], want[qi], got[qi], fmt.Sprintf("%s: k=%d query %d", what, k, qi))
		}
		one, err := p.gpu.Search(ctx, queries[0], k)
		require.NoError(t, err, "%s: k=%d", what, k)
		requireSameHits(t, m, p.cpu.Vector, queries[0], want[0], one, fmt.Sprintf("%s: single k=%d", what, k))
	}
}

// TestResidentTombstones: deletes reach the GPU as tombstones resident on
// the device — a delete writes just the words it changes, and an
// unfiltered search sends no bitmap (its bytes up are those of a search
// of an index with nothing deleted) — and every search after deletes,
// adds, upserts and a compaction answers as the fallback does, with the
// fused and with the radix select. A filtered search still sends its
// bitmap.
func TestResidentTombstones(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 24
	ctx := context.Background()
	queries := testkit.Vectors(r, 5, dim)
	metricOf := map[string]umbra.Metric{"vulkan": umbra.Cosine, "gl": umbra.L2}
	for _, b := range backends[1:] {
		for _, path := range []gpu.SelectPath{gpu.SelectAuto, gpu.SelectRadix} {
			m := metricOf[b.name]
			t.Run(fmt.Sprintf("%s/%s/select=%d", b.name, m, path), func(t *testing.T) {
				ctx := gpu.WithSelectPath(ctx, path)
				p := tombPair{
					gpu: open(t, b, engine.Config{Dim: dim, Metric: m}, 700),
					cpu: open(t, backends[0], engine.Config{Dim: dim, Metric: m}),
					ctx: ctx,
				}
				base := testkit.Vectors(r, 2000, dim)
				p.both(t, func(ix *engine.Index) error { _, err := ix.Add(ctx, umbra.Vectors(base)); return err })
				traced := func(opts ...umbra.SearchOption) int64 {
					var tr diag.Trace
					_, err := p.gpu.Search(diag.WithTrace(ctx, &tr), queries[1], 10, opts...)
					require.NoError(t, err)
					require.Equal(t, "gpu", tr.Device)
					if path == gpu.SelectRadix {
						require.Equal(t, "radix", tr.SelectPath, "the select path the context forces")
					}
					return tr.BytesUp
				}
				clean := traced()

				// Deletes in calls of 1, 7 and 200 IDs, across both chunks.
				ids := r.Perm(2000)[:208]
				for _, part := range [][]int{ids[:1], ids[1:8], ids[8:]} {
					del := make([]uint64, len(part))
					for i, id := range part {
						del[i] = uint64(id)
					}
					p.both(t, func(ix *engine.Index) error { return ix.Delete(ctx, umbra.WithIDs(del...)) })
				}
				p.same(t, m, queries, "after deletes")
				require.Equal(t, clean, traced(), "an unfiltered search after deletes sends no bitmap")
				keep := umbra.AllowFunc(func(id uint64) bool { return id%2 == 0 })
				require.GreaterOrEqual(t, traced(keep), clean+2000/8, "a filtered search sends its bitmap")
				require.Equal(t, clean, traced(), "a filtered search leaves the tombstones resident")

				// One more delete: the changed word is written by Delete.
				var one uint64
				for one = 0; !p.cpu.Has(one); one++ {
				}
				p.both(t, func(ix *engine.Index) error { return ix.Delete(ctx, umbra.WithIDs(one)) })
				require.Equal(t, clean, traced(), "a delete writes its word, not the search")
				p.same(t, m, queries, "after one more delete")

				// Adds past the resident tombstones, an upsert of a deleted
				// ID (a new row) and of live ones (in place), deletes of
				// new rows.
				more := testkit.Vectors(r, 900, dim)
				p.both(t, func(ix *engine.Index) error { _, err := ix.Add(ctx, umbra.Vectors(more)); return err })
				up := testkit.Vectors(r, 3, dim)
				upIDs := []uint64{one, 2000, 2001}
				p.both(t, func(ix *engine.Index) error {
					return testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors(up), umbra.WithIDs(upIDs...)))
				})
				p.both(t, func(ix *engine.Index) error { return ix.Delete(ctx, umbra.WithIDs(2002, 2899)) })
				p.same(t, m, queries, "after adds, upserts and deletes of new rows")

				// Compaction moves every row: the new device side holds no
				// tombstones, and deletes after it mark the new rows.
				p.both(t, func(ix *engine.Index) error { return ix.Compact(ctx) })
				p.same(t, m, queries, "after compaction")
				p.both(t, func(ix *engine.Index) error { return ix.Delete(ctx, umbra.WithIDs(2003, 2004, 2500)) })
				p.same(t, m, queries, "after deletes past compaction")
			})
		}
	}
}

// TestFailedTombstoneWrite: a failed write of the resident tombstones —
// by Delete, or by the search that then writes them again — never leaves
// a deleted row in an answer: the search fails with ErrGPU (Device GPU)
// while the fault lasts, and once it is gone every search answers as the
// fallback does.
func TestFailedTombstoneWrite(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 16
	ctx := context.Background()
	queries := testkit.Vectors(r, 4, dim)
	for _, b := range backends[1:] {
		for _, lasting := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lasting=%v", b.name, lasting), func(t *testing.T) {
				p := tombPair{
					gpu: open(t, b, engine.Config{Dim: dim, Metric: umbra.Dot}, 700),
					cpu: open(t, backends[0], engine.Config{Dim: dim, Metric: umbra.Dot}),
					ctx: ctx,
				}
				base := testkit.Vectors(r, 1500, dim)
				p.both(t, func(ix *engine.Index) error { _, err := ix.Add(ctx, umbra.Vectors(base)); return err })
				p.both(t, func(ix *engine.Index) error { return ix.Delete(ctx, umbra.WithIDs(1, 2, 3)) })
				p.same(t, umbra.Dot, queries, "before the fault") // tombstones resident now

				// Delete the best rows of query 0, so a stale tombstone
				// would show.
				best, err := p.cpu.Search(ctx, queries[0], 5)
				require.NoError(t, err)
				del := []uint64{best[0].ID, best[2].ID, best[4].ID}
				fired := 0
				engine.SetGPUFault(p.gpu, func(step string) error {
					if step == "write tombstones" && (lasting || fired == 0) {
						fired++
						return errInjected
					}
					return nil
				})
				p.both(t, func(ix *engine.Index) error { return ix.Delete(ctx, umbra.WithIDs(del...)) })
				require.Equal(t, 1, fired, "Delete wrote the changed word")
				got, err := p.gpu.Search(ctx, queries[0], 5)
				if lasting {
					require.ErrorIs(t, err, engine.ErrGPU, "the search that could not write the tombstones")
					require.Equal(t, 2, fired)
				} else {
					require.NoError(t, err)
					want, err := p.cpu.Search(ctx, queries[0], 5)
					require.NoError(t, err)
					requireSameHits(t, umbra.Dot, p.cpu.Vector, queries[0], want, got, "the search after a failed delete write")
				}
				for _, h := range got {
					require.NotContains(t, del, h.ID, "a deleted row in an answer")
				}
				engine.SetGPUFault(p.gpu, nil)
				p.same(t, umbra.Dot, queries, "after the fault")
			})
		}
	}
}
