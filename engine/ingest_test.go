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

// TestRefusedWritesNameTheFirstBadVector: Add, AddFlat and Upsert (mixing
// replaced and new IDs) check rows while packing them; whichever row is
// bad — among the replaced or the new ones, in a group of four or in the
// tail, past the first progress piece — the error names the first bad
// vector and component, and the index keeps exactly what it held.
func TestRefusedWritesNameTheFirstBadVector(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 9
	for _, m := range metrics {
		t.Run(m.String(), func(t *testing.T) {
			ix := open(t, backends[0], engine.Config{Dim: dim, Metric: m})
			stored := testkit.Vectors(r, 30, dim)
			ids, err := ix.Add(ctx, umbra.Vectors(stored))
			require.NoError(t, err)
			snapshot := func() map[uint64][]float32 {
				out := map[uint64][]float32{}
				for _, id := range ix.IDs() {
					v, err := ix.Vector(id)
					require.NoError(t, err)
					out[id] = v
				}
				return out
			}
			before := snapshot()
			nan, inf := float32(math.NaN()), float32(math.Inf(-1))
			for trial := range 12 {
				n := 2 + r.IntN(9)
				if trial == 0 {
					n = 70_000 // past one progress piece (1<<16 rows)
				}
				vs := testkit.Vectors(r, n, dim)
				bad, col := r.IntN(n), r.IntN(dim)
				if trial == 0 {
					bad = 1<<16 + r.IntN(n-1<<16) // in the second piece
				}
				val := []float32{nan, inf}[r.IntN(2)]
				vs[bad][col] = val
				if later := bad + 1 + r.IntN(n-bad); later < n {
					vs[later][0] = nan // a later bad vector is not the one named
				}
				want := fmt.Sprintf("vector %d, component %d is %v", bad, col, val)
				_, err := ix.Add(ctx, umbra.Vectors(vs))
				require.ErrorIs(t, err, umbra.ErrNonFinite)
				require.Contains(t, err.Error(), want, "Add")
				flat := make([]float32, 0, n*dim)
				for _, v := range vs {
					flat = append(flat, v...)
				}
				_, err = ix.Add(ctx, umbra.Flat(flat, ix.Dim()))
				require.ErrorIs(t, err, umbra.ErrNonFinite)
				require.Contains(t, err.Error(), want, "AddFlat")
				// Upsert: each vector replaces a stored ID or adds a new one.
				up := make([]uint64, n)
				for i := range up {
					if r.IntN(2) == 0 && i < len(ids) {
						up[i] = ids[i]
					} else {
						up[i] = uint64(1_000_000 + i)
					}
				}
				_, err = ix.Upsert(ctx, umbra.Vectors(vs), umbra.WithIDs(up...))
				require.ErrorIs(t, err, umbra.ErrNonFinite)
				require.Contains(t, err.Error(), want, "Upsert")
				require.Equal(t, before, snapshot(), "trial %d: a refused write changed the index", trial)
			}
			if m == umbra.Cosine {
				vs := testkit.Vectors(r, 6, dim)
				vs[4] = make([]float32, dim)
				_, err := ix.Upsert(ctx, umbra.Vectors(vs), umbra.WithIDs([]uint64{ids[0], 5000, ids[1], 5001, 5002, ids[2]}...))
				require.ErrorIs(t, err, umbra.ErrZeroVector)
				require.Contains(t, err.Error(), "vector 4 has norm 0")
				require.Equal(t, before, snapshot())
			}
			// A good upsert of the same shape then goes through.
			vs := testkit.Vectors(r, 3, dim)
			require.NoError(t, testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors(vs), umbra.WithIDs([]uint64{ids[3], 7000, ids[4]}...))))
			require.Equal(t, len(stored)+1, ix.Len())
		})
	}
}

// TestAdoptFlatStoresWhatAddFlatStores: AdoptFlat into an empty index
// (data becomes the storage) and into one holding rows (a copy) stores
// exactly what AddFlat stores, and a bad row is named with nothing stored.
func TestAdoptFlatStoresWhatAddFlatStores(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	for _, dim := range []int{8, 10} { // 10: padded rows, never adopted
		for _, m := range metrics {
			vs := testkit.Vectors(r, 50, dim)
			flat := func() []float32 {
				var f []float32
				for _, v := range vs {
					f = append(f, v...)
				}
				return f
			}
			want := open(t, backends[0], engine.Config{Dim: dim, Metric: m})
			_, err := want.Add(ctx, umbra.Flat(flat(), want.Dim()))
			require.NoError(t, err)
			_, err = want.Add(ctx, umbra.Flat(flat()[:10*dim], want.Dim()))
			require.NoError(t, err)

			got := open(t, backends[0], engine.Config{Dim: dim, Metric: m})
			bad := flat()
			bad[37*dim+dim/2] = float32(math.NaN())
			_, err = got.Add(ctx, umbra.Flat(bad, got.Dim()))
			require.ErrorIs(t, err, umbra.ErrNonFinite)
			require.Contains(t, err.Error(), fmt.Sprintf("vector 37, component %d is NaN", dim/2))
			require.Zero(t, got.Len())
			ids, err := got.Add(ctx, umbra.Flat(flat(), got.Dim()))
			require.NoError(t, err)
			require.Len(t, ids, 50)
			_, err = got.Add(ctx, umbra.Flat(flat()[:10*dim], got.Dim())) // not empty: copied
			require.NoError(t, err)
			sameContents(t, want, got, fmt.Sprintf("dim %d %s", dim, m))
		}
	}
}

// TestParallelPackingMatchesOnePass: rows packed by several goroutines
// are stored bit for bit as one goroutine stores them, and when several
// parts hold bad rows the error names the first bad row of the call, with
// nothing stored.
func TestParallelPackingMatchesOnePass(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim, n = 33, 40_000
	flat := make([]float32, n*dim)
	for i := range flat {
		flat[i] = r.Float32()*2 - 1
	}
	for _, m := range metrics {
		one := open(t, backends[0], engine.Config{Dim: dim, Metric: m, Workers: 1})
		many := open(t, backends[0], engine.Config{Dim: dim, Metric: m, Workers: 7})
		_, err := one.Add(ctx, umbra.Flat(flat, one.Dim()))
		require.NoError(t, err)
		_, err = many.Add(ctx, umbra.Flat(flat, many.Dim()))
		require.NoError(t, err)
		sameRows := func(what string) {
			t.Helper()
			for _, id := range []uint64{0, 1, n / 7, n/2 + 3, n - 1} {
				a, err := one.Vector(id)
				require.NoError(t, err)
				b, err := many.Vector(id)
				require.NoError(t, err)
				for j := range a {
					require.Equal(t, math.Float32bits(a[j]), math.Float32bits(b[j]), "%s %s: ID %d component %d", m, what, id, j)
				}
			}
		}
		sameRows("AddFlat")
		// Bad rows in the last, a middle and (the one to name) an early part.
		bad := slices.Clone(flat)
		first := n/7 - 5
		for _, at := range []int{n - 2, n / 2, first} {
			bad[at*dim+4] = float32(math.NaN())
		}
		fresh := open(t, backends[0], engine.Config{Dim: dim, Metric: m, Workers: 7})
		_, err = fresh.Add(ctx, umbra.Flat(bad, fresh.Dim()))
		require.ErrorIs(t, err, umbra.ErrNonFinite)
		require.ErrorContains(t, err, fmt.Sprintf("vector %d, component 4", first))
		require.Equal(t, 0, fresh.Len())

		// Upsert replacing every row, checked and written in place in
		// parts: the same bytes as one pass, and a refused call names its
		// first bad vector and changes nothing.
		ids := make([]uint64, n)
		again := make([][]float32, n)
		for i := range ids {
			ids[i] = uint64(n - 1 - i) // every row replaced, in reverse
			again[i] = flat[((i+1)%n)*dim : ((i+1)%n+1)*dim]
		}
		require.NoError(t, testkit.ErrOf(one.Upsert(ctx, umbra.Vectors(again), umbra.WithIDs(ids...))))
		require.NoError(t, testkit.ErrOf(many.Upsert(ctx, umbra.Vectors(again), umbra.WithIDs(ids...))))
		sameRows("Upsert")
		before, err := many.Vector(n / 2)
		require.NoError(t, err)
		badRows := slices.Clone(again)
		for _, at := range []int{n - 2, n / 2, first} {
			badRows[at] = bad[at*dim : (at+1)*dim]
		}
		_, err = many.Upsert(ctx, umbra.Vectors(badRows), umbra.WithIDs(ids...))
		require.ErrorIs(t, err, umbra.ErrNonFinite)
		require.ErrorContains(t, err, fmt.Sprintf("vector %d, component 4", first))
		after, err := many.Vector(n / 2)
		require.NoError(t, err)
		require.Equal(t, before, after, "a refused Upsert changed a row")
	}
}
