package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// sameContents asserts two indexes hold the same IDs, vectors and keys.
func sameContents(t *testing.T, want, got *engine.Index, what string) {
	t.Helper()
	ids := want.IDs()
	requireEqualSlices(t, ids, got.IDs(), what)
	require.Equal(t, want.Dim(), got.Dim(), what)
	require.Equal(t, want.Metric(), got.Metric(), what)
	for _, id := range ids {
		a, err := want.Vector(id)
		require.NoError(t, err)
		b, err := got.Vector(id)
		require.NoError(t, err)
		requireEqualSlices(t, a, b, "%s: ID %d", what, id)
		ka, oka := want.KeyOf(id)
		kb, okb := got.KeyOf(id)
		if oka != okb || ka != kb {
			t.Fatalf("%s: key of %d: %q (%v) against %q (%v)", what, id, ka, oka, kb, okb)
		}
	}
}

// TestStoreSurvivesReopen: a store opened, written (adds, upserts, keys,
// deletes), closed and opened again — from its log, then from a
// checkpoint, then from a Save elsewhere — holds exactly what was
// acknowledged, and searches the same, on every backend.
func TestStoreSurvivesReopen(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 10
	for _, b := range backends {
		for _, m := range metrics {
			t.Run(fmt.Sprintf("%s/%s", b.name, m), func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "mem.umbra")
				cfg := engine.Config{Dim: dim, Metric: m, Device: b.device, Adapters: []engine.AdapterSelect{b.adapter}}
				st, err := engine.Open(ctx, path, cfg)
				if err != nil && b.device == engine.GPU {
					testkit.NoGPU(t, "no %s adapter works: %v", b.name, err)
				}
				require.NoError(t, err)
				// The reference: an in-memory index given the same calls.
				ref := open(t, backends[0], engine.Config{Dim: dim, Metric: m})
				both := func(f func(ix *engine.Index) error) {
					require.NoError(t, f(st))
					require.NoError(t, f(ref))
				}
				vs := testkit.Vectors(r, 50, dim)
				both(func(ix *engine.Index) error { _, err := ix.Add(ctx, umbra.Vectors(vs)); return err })
				ids := []uint64{1 << 33, 7, 1 << 34}
				up := testkit.Vectors(r, 3, dim)
				both(func(ix *engine.Index) error {
					return testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors(up), umbra.WithIDs(ids...)))
				})
				both(func(ix *engine.Index) error { return ix.Delete(ctx, umbra.WithIDs(3, 9, 1<<33)) })
				// An ID deleted and added again: a dead row and a live one share it.
				again9 := testkit.Vectors(r, 1, dim)
				both(func(ix *engine.Index) error {
					return testkit.ErrOf(ix.Add(ctx, umbra.Vectors(again9), umbra.WithIDs([]uint64{9}...)))
				})
				keys := testkit.Vectors(r, 2, dim)
				both(func(ix *engine.Index) error {
					_, err := ix.Add(ctx, umbra.Vectors(keys), umbra.WithKeys([]string{"a", "b"}...))
					return err
				})
				// A failed call is not logged.
				require.ErrorIs(t, st.Delete(ctx, umbra.WithIDs(12345)), umbra.ErrNotFound)
				require.NoError(t, st.Close())

				check := func(what string) *engine.Index {
					again, err := engine.Open(ctx, path, engine.Config{Device: b.device, Adapters: []engine.AdapterSelect{b.adapter}})
					require.NoError(t, err, what)
					sameContents(t, ref, again, what)
					q := testkit.Vectors(r, 1, dim)[0]
					want, err := ref.Search(ctx, q, 5, umbra.AllowFunc(func(id uint64) bool { return id%2 == 1 }))
					require.NoError(t, err)
					got, err := again.Search(ctx, q, 5, umbra.AllowFunc(func(id uint64) bool { return id%2 == 1 }))
					require.NoError(t, err)
					requireSameHits(t, m, ref.Vector, q, want, got, what)
					return again
				}
				again := check("replayed from the log")
				// A second writer is refused while the store is open.
				_, err = engine.Open(ctx, path, cfg)
				require.ErrorIs(t, err, engine.ErrLocked)
				more := testkit.Vectors(r, 5, dim)
				require.NoError(t, testkit.ErrOf(again.Add(ctx, umbra.Vectors(more), umbra.WithIDs([]uint64{100, 101, 102, 103, 104}...))))
				require.NoError(t, testkit.ErrOf(ref.Add(ctx, umbra.Vectors(more), umbra.WithIDs([]uint64{100, 101, 102, 103, 104}...))))
				require.NoError(t, again.Checkpoint(ctx))
				require.NoError(t, again.Delete(ctx, umbra.WithIDs(101)))
				require.NoError(t, ref.Delete(ctx, umbra.WithIDs(101)))
				require.NoError(t, again.Close())
				again = check("from a checkpoint and its log")
				require.NoError(t, again.Close())

				// Save from an in-memory index, then Open that file.
				saved := filepath.Join(dir, "saved.umbra")
				require.NoError(t, ref.Save(ctx, saved))
				loaded, err := engine.Open(ctx, saved, engine.Config{})
				require.NoError(t, err)
				sameContents(t, ref, loaded, "saved")
				require.NoError(t, loaded.Close())
			})
		}
	}
}

// TestBadStoreFiles: a store file with any byte flipped, cut short, or not
// a store at all fails Open with ErrBadStore (never a panic or a silent
// partial load), and a wrong Dim is refused.
func TestBadStoreFiles(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "good.umbra")
	ix, err := engine.New(ctx, engine.Config{Dim: 6, Device: engine.CPU})
	require.NoError(t, err)
	_, err = ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 40, 6)))
	require.NoError(t, err)
	_, err = ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 1, 6)), umbra.WithKeys([]string{"k"}...))
	require.NoError(t, err)
	require.NoError(t, ix.Delete(ctx, umbra.WithIDs(5)))
	require.NoError(t, ix.Save(ctx, path))
	good, err := os.ReadFile(path)
	require.NoError(t, err)

	bad := filepath.Join(dir, "bad.umbra")
	try := func(data []byte, what string) {
		require.NoError(t, os.WriteFile(bad, data, 0o644))
		got, err := engine.Open(ctx, bad, engine.Config{Device: engine.CPU})
		if err == nil {
			got.Close()
		}
		require.ErrorIs(t, err, engine.ErrBadStore, what)
	}
	positions := []int{0, 8, 12, 20, 40, 100, len(good) / 2, len(good) - 1}
	for i := 0; i < 40; i++ {
		positions = append(positions, r.IntN(len(good)))
	}
	slices.Sort(positions)
	for _, pos := range slices.Compact(positions) {
		flipped := slices.Clone(good)
		flipped[pos] ^= 1 << r.IntN(8)
		try(flipped, fmt.Sprintf("byte %d flipped", pos))
	}
	for _, n := range []int{0, 7, 64, len(good) / 3, len(good) - 1} {
		try(good[:n], fmt.Sprintf("cut to %d bytes", n))
	}
	try([]byte("not a store file at all, just text\n"), "text")

	_, err = engine.Open(ctx, path, engine.Config{Dim: 7, Device: engine.CPU})
	require.ErrorIs(t, err, umbra.ErrInvalidConfig)
	opened, err := engine.Open(ctx, path, engine.Config{Dim: 6, Device: engine.CPU})
	require.NoError(t, err)
	sameContents(t, ix, opened, "good file")
	require.NoError(t, opened.Close())
}
