package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
)

// copyStore copies the base and log of the store at from to a new
// directory and returns the copy's path.
func copyStore(t *testing.T, from string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), filepath.Base(from))
	for _, suffix := range []string{"", ".log"} {
		b, err := os.ReadFile(from + suffix)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path+suffix, b, 0o644))
	}
	return path
}

// v1StoreWant is testdata/v1/store.umbra's contents: an in-memory index
// given the calls that wrote it (the base holds the first Add, checkpointed;
// the log, written by the version-1 log writer, the rest).
func v1StoreWant(t *testing.T) *engine.Index {
	ctx := context.Background()
	ix, err := engine.New(ctx, engine.Config{Dim: 3, Metric: engine.Cosine, Device: engine.CPU})
	require.NoError(t, err)
	t.Cleanup(func() { ix.Close() })
	_, err = ix.Add(ctx, [][]float32{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}})
	require.NoError(t, err)
	require.NoError(t, ix.Upsert(ctx, []uint64{1}, [][]float32{{1, 1, 0}}))
	require.NoError(t, ix.Upsert(ctx, []uint64{1}, [][]float32{{1, 2, 0}}))
	_, err = ix.AddKeys(ctx, []string{"k"}, [][]float32{{3, 2, 1}})
	require.NoError(t, err)
	require.NoError(t, ix.Delete(ctx, 2))
	return ix
}

// TestOpensAVersion1Store: a store whose log the version-1 writer wrote
// opens, read-only and for writing, to the state it held, and keeps
// taking writes that survive a reopen.
func TestOpensAVersion1Store(t *testing.T) {
	ctx := context.Background()
	want := v1StoreWant(t)
	path := copyStore(t, "testdata/v1/store.umbra")

	ro, err := engine.OpenReadOnly(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	sameContents(t, want, ro, "read-only")
	require.NoError(t, ro.Close())

	ix, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	sameContents(t, want, ix, "writer")
	require.NoError(t, ix.Upsert(ctx, []uint64{0}, [][]float32{{0, 3, 4}}))
	require.NoError(t, want.Upsert(ctx, []uint64{0}, [][]float32{{0, 3, 4}}))
	require.NoError(t, ix.Close())

	again, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	sameContents(t, want, again, "reopened after a write")
	require.NoError(t, again.Checkpoint(ctx))
	require.NoError(t, again.Upsert(ctx, []uint64{3}, [][]float32{{1, 1, 1}}))
	require.NoError(t, want.Upsert(ctx, []uint64{3}, [][]float32{{1, 1, 1}}))
	require.NoError(t, again.Close())

	last, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	sameContents(t, want, last, "reopened after a checkpoint")
	require.NoError(t, last.Close())
}
