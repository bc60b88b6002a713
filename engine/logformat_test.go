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
	ix, err := engine.New(ctx, engine.Config{Dim: 3, Metric: umbra.Cosine, Device: engine.CPU})
	require.NoError(t, err)
	t.Cleanup(func() { ix.Close() })
	_, err = ix.Add(ctx, umbra.Vectors([][]float32{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}))
	require.NoError(t, err)
	require.NoError(t, testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors([][]float32{{1, 1, 0}}), umbra.WithIDs([]uint64{1}...))))
	require.NoError(t, testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors([][]float32{{1, 2, 0}}), umbra.WithIDs([]uint64{1}...))))
	_, err = ix.Add(ctx, umbra.Vectors([][]float32{{3, 2, 1}}), umbra.WithKeys([]string{"k"}...))
	require.NoError(t, err)
	require.NoError(t, ix.Delete(ctx, umbra.WithIDs(2)))
	return ix
}

// TestOpensAVersion1Store: a store whose log the version-1 writer wrote
// opens, read-only and for writing, to the state it held, and keeps
// taking writes that survive a reopen.
func TestOpensAVersion1Store(t *testing.T) {
	ctx := context.Background()
	want := v1StoreWant(t)
	path := copyStore(t, "testdata/v1/store.umbra")

	ro, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU, ReadOnly: true})
	require.NoError(t, err)
	sameContents(t, want, ro, "read-only")
	require.NoError(t, ro.Close())

	ix, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	sameContents(t, want, ix, "writer")
	require.NoError(t, testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors([][]float32{{0, 3, 4}}), umbra.WithIDs([]uint64{0}...))))
	require.NoError(t, testkit.ErrOf(want.Upsert(ctx, umbra.Vectors([][]float32{{0, 3, 4}}), umbra.WithIDs([]uint64{0}...))))
	require.NoError(t, ix.Close())

	again, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	sameContents(t, want, again, "reopened after a write")
	require.NoError(t, again.Checkpoint(ctx))
	require.NoError(t, testkit.ErrOf(again.Upsert(ctx, umbra.Vectors([][]float32{{1, 1, 1}}), umbra.WithIDs([]uint64{3}...))))
	require.NoError(t, testkit.ErrOf(want.Upsert(ctx, umbra.Vectors([][]float32{{1, 1, 1}}), umbra.WithIDs([]uint64{3}...))))
	require.NoError(t, again.Close())

	last, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	sameContents(t, want, last, "reopened after a checkpoint")
	require.NoError(t, last.Close())
}

// TestMovedLogRecordsAreBadStore: a store whose log had a whole record
// duplicated over the next (every checksum still holding), two records
// swapped, or a record of the log an earlier checkpoint replaced put in
// place of one, fails Open and OpenReadOnly with ErrBadStore instead of
// opening without the upsert the damage replaced, and Open leaves the
// log as it was.
func TestMovedLogRecordsAreBadStore(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim, n = 4, 5
	cfg := engine.Config{Dim: dim, Metric: umbra.L2, Device: engine.CPU}
	path := filepath.Join(t.TempDir(), "s.umbra")
	ix, err := engine.Open(ctx, path, cfg)
	require.NoError(t, err)
	_, err = ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 3, dim)))
	require.NoError(t, err)
	// Upserts of one ID: log records of one length.
	upserts := func() [][]float32 {
		vs := testkit.Vectors(r, n, dim)
		for _, v := range vs {
			require.NoError(t, testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors([][]float32{v}), umbra.WithIDs([]uint64{1}...))))
		}
		return vs
	}
	require.NoError(t, ix.Checkpoint(ctx))
	upserts()
	older, err := os.ReadFile(path + ".log")
	require.NoError(t, err)
	require.NoError(t, ix.Checkpoint(ctx))
	vs := upserts()
	require.NoError(t, ix.Close())
	good, err := os.ReadFile(path + ".log")
	require.NoError(t, err)

	const header = 32
	require.Zero(t, (len(good)-header)%n)
	require.Equal(t, len(good), len(older), "both logs hold %d records of one length", n)
	flen := (len(good) - header) / n
	at := func(i int) int { return header + i*flen }

	// Undamaged, the store holds the last upsert.
	ro, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU, ReadOnly: true})
	require.NoError(t, err)
	got, err := ro.Vector(1)
	require.NoError(t, err)
	require.Equal(t, vs[n-1], got)
	require.NoError(t, ro.Close())

	try := func(log []byte, what string, args ...any) {
		t.Helper()
		what = fmt.Sprintf(what, args...)
		damaged := copyStore(t, path)
		require.NoError(t, os.WriteFile(damaged+".log", log, 0o644))
		for _, readOnly := range []bool{false, true} {
			var ix *engine.Index
			var err error
			if readOnly {
				ix, err = engine.Open(ctx, damaged, engine.Config{Device: engine.CPU, ReadOnly: true})
			} else {
				ix, err = engine.Open(ctx, damaged, engine.Config{Device: engine.CPU})
			}
			if err == nil {
				v, _ := ix.Vector(1)
				ix.Close()
				t.Fatalf("%s: opened (read-only %v) with ID 1 = %v; the last upsert was %v", what, readOnly, v, vs[n-1])
			}
			require.ErrorIs(t, err, engine.ErrBadStore, "%s (read-only %v)", what, readOnly)
		}
		after, err := os.ReadFile(damaged + ".log")
		require.NoError(t, err)
		require.Equal(t, log, after, "%s: the log was changed", what)
	}
	for i := 0; i+1 < n; i++ {
		b := slices.Clone(good)
		copy(b[at(i+1):], good[at(i):at(i)+flen])
		try(b, "record %d copied over record %d", i, i+1)

		b = slices.Clone(good)
		copy(b[at(i):], good[at(i+1):at(i+1)+flen])
		copy(b[at(i+1):], good[at(i):at(i)+flen])
		try(b, "records %d and %d swapped", i, i+1)
	}
	for i := range n {
		b := slices.Clone(good)
		copy(b[at(i):], older[at(i):at(i)+flen])
		try(b, "record %d of the log the last checkpoint replaced", i)
	}
}
