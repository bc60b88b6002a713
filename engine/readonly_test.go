package engine_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestOpenReadOnlyBesideAWriter: while a writer holds a store, a reader
// opens it without the lock and sees exactly what the writer has
// acknowledged (adds, upserts, deletes, keys), not what comes after; it
// refuses every write with ErrReadOnly and stays as it was; it reads past a
// torn log tail without cutting it off; and a missing store is an error,
// not a new file.
func TestOpenReadOnlyBesideAWriter(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 12
	dir := t.TempDir()
	path := filepath.Join(dir, "mem.umbra")
	w, err := engine.Open(ctx, path, engine.Config{Dim: dim, Device: engine.CPU})
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Add(ctx, umbra.Vectors(testkit.Vectors(r, 40, dim)))
	require.NoError(t, err)
	require.NoError(t, w.Checkpoint(ctx))
	require.NoError(t, testkit.ErrOf(w.Upsert(ctx, umbra.Vectors(testkit.Vectors(r, 2, dim)), umbra.WithIDs([]uint64{3, 1000}...))))
	require.NoError(t, w.Delete(ctx, umbra.WithIDs(5, 6)))
	_, err = w.Add(ctx, umbra.Vectors(testkit.Vectors(r, 2, dim)), umbra.WithKeys([]string{"x", "y"}...))
	require.NoError(t, err)

	_, err = engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.ErrorIs(t, err, engine.ErrLocked, "a second writer")
	ro, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU, ReadOnly: true})
	require.NoError(t, err, "a reader beside the writer")
	defer ro.Close()
	sameContents(t, w, ro, "reader beside the writer")
	q := testkit.Vectors(r, 1, dim)[0]
	want, err := w.Search(ctx, q, 7)
	require.NoError(t, err)
	got, err := ro.Search(ctx, q, 7)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// Every write is refused and changes nothing.
	v := testkit.Vectors(r, 1, dim)
	for name, err := range map[string]error{
		"Add":        func() error { _, err := ro.Add(ctx, umbra.Vectors(v)); return err }(),
		"AddFlat":    func() error { _, err := ro.Add(ctx, umbra.Flat(v[0], ro.Dim())); return err }(),
		"AddWithIDs": testkit.ErrOf(ro.Add(ctx, umbra.Vectors(v), umbra.WithIDs([]uint64{77777}...))),
		"Upsert":     testkit.ErrOf(ro.Upsert(ctx, umbra.Vectors(v), umbra.WithIDs([]uint64{3}...))),
		"Delete":     ro.Delete(ctx, umbra.WithIDs(3)),
		"AddKeys":    func() error { _, err := ro.Add(ctx, umbra.Vectors(v), umbra.WithKeys([]string{"z"}...)); return err }(),
		"UpsertKeys": func() error {
			_, err := ro.Upsert(ctx, umbra.Vectors(v), umbra.WithKeys([]string{"x"}...))
			return err
		}(),
		"DeleteKeys": ro.Delete(ctx, umbra.WithKeys("x")),
		"Compact":    ro.Compact(ctx),
		"Checkpoint": ro.Checkpoint(ctx),
		"Save":       ro.Save(ctx, path),
	} {
		require.ErrorIs(t, err, engine.ErrReadOnly, name)
		require.Contains(t, err.Error(), path, name)
	}
	sameContents(t, w, ro, "after refused writes")

	// A reader is a snapshot: later writes show in a new reader only.
	before := ro.IDs()
	_, err = w.Add(ctx, umbra.Vectors(testkit.Vectors(r, 3, dim)))
	require.NoError(t, err)
	require.Equal(t, before, ro.IDs(), "a reader followed a later write")
	ro2, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU, ReadOnly: true})
	require.NoError(t, err)
	sameContents(t, w, ro2, "a new reader")
	require.NoError(t, ro2.Close())
	// A saved copy of a reader elsewhere is an ordinary store.
	copyPath := filepath.Join(dir, "copy.umbra")
	require.NoError(t, ro.Save(ctx, copyPath))

	// A torn tail: half a record at the end of the log. The reader
	// replays what is whole and leaves the file as it is.
	require.NoError(t, w.Close())
	logPath := path + ".log"
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{200, 0, 0, 0, 1, 2, 3})
	require.NoError(t, err)
	require.NoError(t, f.Close())
	st, err := os.Stat(logPath)
	require.NoError(t, err)
	ro3, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU, ReadOnly: true})
	require.NoError(t, err)
	st2, err := os.Stat(logPath)
	require.NoError(t, err)
	require.Equal(t, st.Size(), st2.Size(), "a reader changed the log")
	sameContents(t, w2(t, path), ro3, "past a torn tail")
	require.NoError(t, ro3.Close())

	missing := filepath.Join(dir, "none.umbra")
	_, err = engine.Open(ctx, missing, engine.Config{Dim: dim, Device: engine.CPU, ReadOnly: true})
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = os.Stat(missing)
	require.ErrorIs(t, err, fs.ErrNotExist, "a reader created a store")
}

// w2 opens the store at path as a writer for comparison, closed at the
// end of the test. Opening it cuts off a torn tail, so call it only after
// the readers that should see the tail.
func w2(t *testing.T, path string) *engine.Index {
	t.Helper()
	ix, err := engine.Open(context.Background(), path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	t.Cleanup(func() { ix.Close() })
	return ix
}

// TestOpenReadOnlyStartsOverAfterACheckpoint: a writer that adds and
// checkpoints while a reader is reading the store (the log the reader
// replayed is folded into a new base and reset) makes the reader start
// over, so it holds the new state, never the old base without its log.
func TestOpenReadOnlyStartsOverAfterACheckpoint(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 8
	path := filepath.Join(t.TempDir(), "cp.umbra")
	w, err := engine.Open(ctx, path, engine.Config{Dim: dim, Device: engine.CPU})
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Add(ctx, umbra.Vectors(testkit.Vectors(r, 20, dim)))
	require.NoError(t, err)
	require.NoError(t, w.Checkpoint(ctx))
	_, err = w.Add(ctx, umbra.Vectors(testkit.Vectors(r, 5, dim))) // in the log only
	require.NoError(t, err)

	loads := 0
	afterLoad := engine.AfterReadOnlyLoad(func() {
		loads++
		if loads == 1 {
			_, err := w.Add(ctx, umbra.Vectors(testkit.Vectors(r, 3, dim)))
			require.NoError(t, err)
			require.NoError(t, w.Checkpoint(ctx))
		}
	})
	ro, err := engine.OpenWith(ctx, path, engine.Config{Device: engine.CPU, ReadOnly: true}, afterLoad)
	require.NoError(t, err)
	defer ro.Close()
	require.Equal(t, 2, loads, "the reader did not start over after the checkpoint")
	sameContents(t, w, ro, "after a checkpoint under the reader")
	require.Equal(t, 28, ro.Len())
}
