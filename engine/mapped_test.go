package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// mappedStore writes a store of n random rows (dimension 37, so rows are
// padded) at a new path, checkpointed so Open maps it, and returns the
// path and an in-memory index holding the same rows.
func mappedStore(t *testing.T, n int, m umbra.Metric, p umbra.Precision) (string, *engine.Index) {
	t.Helper()
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 37
	path := filepath.Join(t.TempDir(), "mem.umbra")
	cfg := engine.Config{Dim: dim, Metric: m, Precision: p, Device: engine.CPU}
	w, err := engine.Open(ctx, path, cfg)
	require.NoError(t, err)
	mem, err := engine.New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { mem.Close() })
	vs := testkit.Vectors(r, n, dim)
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(3*i + 1)
	}
	require.NoError(t, testkit.ErrOf(w.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...))))
	require.NoError(t, testkit.ErrOf(mem.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...))))
	require.NoError(t, w.Close()) // Close checkpoints nothing: the log holds the add
	w, err = engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	require.NoError(t, w.Checkpoint(ctx))
	require.NoError(t, w.Close())
	backdate(t, path)
	return path, mem
}

// backdate sets path's times an hour back, so that a rewrite in place
// within the same clock tick as the write still changes them.
func backdate(t *testing.T, path string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(path, old, old))
}

// writeStore writes a store's base file, and its log when log is not nil,
// at a new path, and returns the path.
func writeStore(t *testing.T, base, log []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "copy.umbra")
	require.NoError(t, os.WriteFile(path, base, 0o644))
	if log != nil {
		require.NoError(t, os.WriteFile(path+".log", log, 0o644))
	}
	return path
}

// sameSearches asserts want and got answer the same batches at several k
// and the same range search.
func sameSearches(t *testing.T, want, got *engine.Index, dim int, what string) {
	t.Helper()
	r := testkit.Rand(t)
	ctx := context.Background()
	qs := testkit.Vectors(r, 5, dim)
	for _, k := range []int{1, 10, want.Len() + 1} {
		a, err := want.SearchBatch(ctx, qs, k)
		require.NoError(t, err, what)
		b, err := got.SearchBatch(ctx, qs, k)
		require.NoError(t, err, what)
		require.Len(t, b, len(a), "%s: k=%d", what, k)
		for i := range a {
			requireEqualSlices(t, a[i], b[i], "%s: k=%d query %d", what, k, i)
		}
	}
	a, err := want.SearchRange(ctx, qs[0], 0.1)
	require.NoError(t, err, what)
	b, err := got.SearchRange(ctx, qs[0], 0.1)
	require.NoError(t, err, what)
	requireEqualSlices(t, a, b, "%s: range", what)
}

// TestOpenMapsOnCPU: a store opened on the CPU path reads its rows from a
// private mapping of the base file and answers exactly as an in-memory
// index of the same rows; an Upsert writes into the mapped rows without
// changing the file (copy-on-write), the log and a checkpoint carry it;
// an Add moves the rows to the heap and releases the mapping.
func TestOpenMapsOnCPU(t *testing.T) {
	ctx := context.Background()
	r := testkit.Rand(t)
	for _, p := range []umbra.Precision{umbra.F32, umbra.F16} {
		for _, m := range metrics {
			t.Run(fmt.Sprintf("%s/%s", p, m), func(t *testing.T) {
				path, mem := mappedStore(t, 3000, m, p)
				before, err := os.ReadFile(path)
				require.NoError(t, err)

				ro, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU, ReadOnly: true})
				require.NoError(t, err)
				defer ro.Close()
				require.True(t, engine.Mapped(ro), "OpenReadOnly maps on the CPU path")
				sameContents(t, mem, ro, "read-only")
				sameSearches(t, mem, ro, 37, "read-only")

				ix, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
				require.NoError(t, err)
				defer ix.Close()
				require.True(t, engine.Mapped(ix), "Open maps on the CPU path")
				sameSearches(t, mem, ix, 37, "opened")

				// Upsert rows in place, and delete some: the mapping stays,
				// the file does not change.
				ids := []uint64{1, 4, 3*1500 + 1, 3*2999 + 1}
				vs := testkit.Vectors(r, len(ids), 37)
				require.NoError(t, testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...))))
				require.NoError(t, testkit.ErrOf(mem.Upsert(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...))))
				require.NoError(t, ix.Delete(ctx, umbra.WithIDs(7, 10)))
				require.NoError(t, mem.Delete(ctx, umbra.WithIDs(7, 10)))
				require.True(t, engine.Mapped(ix), "an upsert keeps the mapping")
				sameContents(t, mem, ix, "after upsert")
				sameSearches(t, mem, ix, 37, "after upsert")
				after, err := os.ReadFile(path)
				require.NoError(t, err)
				require.True(t, bytes.Equal(before, after), "an upsert into mapped rows reached the file")
				// The reader mapped the same file and sees none of it.
				sameSearches(t, mustOpenMem(t, before, p), ro, 37, "reader beside an upserting writer")

				// A checkpoint replaces the file; the writer's mapping and
				// the reader's keep the old one, and reopening gives the
				// upserted rows.
				require.NoError(t, ix.Checkpoint(ctx))
				sameSearches(t, mem, ix, 37, "after checkpoint")
				sameSearches(t, mustOpenMem(t, before, p), ro, 37, "reader after a checkpoint")
				require.NoError(t, ix.Close())
				ix, err = engine.Open(ctx, path, engine.Config{Device: engine.CPU})
				require.NoError(t, err)
				require.True(t, engine.Mapped(ix))
				sameContents(t, mem, ix, "reopened")
				sameSearches(t, mem, ix, 37, "reopened")

				// An Add grows the rows into the heap: the mapping goes.
				add := testkit.Vectors(r, 3, 37)
				_, err = ix.Add(ctx, umbra.Vectors(add))
				require.NoError(t, err)
				_, err = mem.Add(ctx, umbra.Vectors(add))
				require.NoError(t, err)
				require.False(t, engine.Mapped(ix), "an add moves the rows to the heap")
				sameSearches(t, mem, ix, 37, "after add")
				require.NoError(t, ix.Close())
			})
		}
	}
}

// mustOpenMem opens a copy of a base file's bytes as a new store and
// returns its index: what a reader that mapped those bytes must answer.
func mustOpenMem(t *testing.T, base []byte, p umbra.Precision) *engine.Index {
	t.Helper()
	ix, err := engine.Open(context.Background(), writeStore(t, base, nil), engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	t.Cleanup(func() { ix.Close() })
	return ix
}

// TestMappedStoreChangedUnderneath: a mapped store whose file another
// process truncates or rewrites in place gives ErrStoreChanged from every
// later call — search, range search, Get, writes, checkpoint — never a
// crash and never an answer from the changed bytes. With the size and time
// check off, a truncation reaches the rows and faults (SIGBUS); the fault
// is recovered in whichever goroutine took it (the caller's or a
// fallback worker's) into the same error.
func TestMappedStoreChangedUnderneath(t *testing.T) {
	ctx := context.Background()
	r := testkit.Rand(t)
	q := testkit.Vectors(r, 1, 37)[0]
	type change struct {
		name   string
		noStat bool
		do     func(path string) error
	}
	changes := []change{
		{"truncated", false, func(path string) error { return os.Truncate(path, 4096+37*4) }},
		{"rewritten", false, func(path string) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i := 4096; i < len(b); i += 3 {
				b[i] ^= 0x55
			}
			return os.WriteFile(path, b, 0o644) // truncates, then writes in place
		}},
		{"truncated, faulting", true, func(path string) error { return os.Truncate(path, 4096+37*4) }},
	}
	calls := map[string]func(ix *engine.Index) error{
		"Search":      func(ix *engine.Index) error { _, err := ix.Search(ctx, q, 5); return err },
		"SearchBatch": func(ix *engine.Index) error { _, err := ix.SearchBatch(ctx, [][]float32{q, q}, 5); return err },
		"SearchRange": func(ix *engine.Index) error { _, err := ix.SearchRange(ctx, q, -1e9); return err },
		"Get":         func(ix *engine.Index) error { _, err := ix.Vector(3*2000 + 1); return err },
		"Upsert": func(ix *engine.Index) error {
			return testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors([][]float32{q}), umbra.WithIDs([]uint64{3*2000 + 1}...)))
		},
		"Add":        func(ix *engine.Index) error { _, err := ix.Add(ctx, umbra.Vectors([][]float32{q})); return err },
		"Checkpoint": func(ix *engine.Index) error { return ix.Checkpoint(ctx) },
		"Compact":    func(ix *engine.Index) error { return ix.Compact(ctx) },
	}
	for _, p := range []umbra.Precision{umbra.F32, umbra.F16} {
		// One store a precision, copied into each case's own file (built
		// anew for each of the 48 cases, it was half the test's time).
		built, _ := mappedStore(t, 3000, umbra.Dot, p)
		base, err := os.ReadFile(built)
		require.NoError(t, err)
		log, err := os.ReadFile(built + ".log") // empty after the checkpoint
		require.NoError(t, err)
		for _, c := range changes {
			for first, call := range calls {
				for _, workers := range []int{1, 4} {
					t.Run(fmt.Sprintf("%s/%s/%s/workers=%d", p, c.name, first, workers), func(t *testing.T) {
						path := writeStore(t, base, log)
						backdate(t, path) // as mappedStore leaves it
						var opts []engine.OpenOption
						if c.noStat {
							opts = append(opts, engine.SkipMappedStat())
						}
						ix, err := engine.OpenWith(ctx, path, engine.Config{Device: engine.CPU, Workers: workers}, opts...)
						require.NoError(t, err)
						defer ix.Close()
						require.True(t, engine.Mapped(ix))
						// Every page is read once before the change, and
						// a row deleted so Compact has work to do.
						_, err = ix.Search(ctx, q, 5)
						require.NoError(t, err, "before the change")
						require.NoError(t, ix.Delete(ctx, umbra.WithIDs(1)))
						require.NoError(t, c.do(path))
						// The first call after it notices, by the file's
						// size and time or by the fault.
						err = call(ix)
						require.ErrorIs(t, err, engine.ErrStoreChanged, "%s after the change", first)
						if c.noStat {
							require.ErrorContains(t, err, "faulted", "%s: the fault itself", first)
						}
						// Once the rows have been touched, every call
						// refuses.
						_, err = ix.Search(ctx, q, 5)
						require.ErrorIs(t, err, engine.ErrStoreChanged, "search after %s", first)
						for name, other := range calls {
							require.ErrorIs(t, other(ix), engine.ErrStoreChanged, "%s after %s", name, first)
						}
						require.NoError(t, ix.Close())
					})
				}
			}
		}
	}
}

// sigbusChild opens the store at path mapped, with the size and time
// check off, truncates the file under it and searches: the search must
// fault into ErrStoreChanged, which it prints; a crash exits otherwise.
func sigbusChild(path string) error {
	ctx := context.Background()
	ix, err := engine.OpenWith(ctx, path, engine.Config{Device: engine.CPU, Workers: 2, ReadOnly: true}, engine.SkipMappedStat())
	if err != nil {
		return err
	}
	defer ix.Close()
	if !engine.Mapped(ix) {
		return fmt.Errorf("the store was not mapped")
	}
	q := make([]float32, ix.Dim())
	q[0] = 1
	if _, err := ix.Search(ctx, q, 3); err != nil {
		return err
	}
	if err := os.Truncate(path, 4096); err != nil {
		return err
	}
	_, err = ix.Search(ctx, q, 3)
	if !errors.Is(err, engine.ErrStoreChanged) {
		return fmt.Errorf("search after the truncation: %v, want ErrStoreChanged", err)
	}
	fmt.Println("refused:", err)
	return nil
}

// TestMappedFaultInAChildProcess: a process whose mapped store is
// truncated under a search keeps running and gets ErrStoreChanged — run
// in a child, so that were the fault ever fatal again it would fail this
// test, not end the test binary.
func TestMappedFaultInAChildProcess(t *testing.T) {
	path, _ := mappedStore(t, 3000, umbra.Dot, umbra.F32)
	out := testkit.Run(t, testkit.Child("sigbus", "UMBRA_SIGBUS_CHILD="+path))
	require.Zero(t, out.Code, "the child: %+v", out)
	require.Contains(t, out.Stdout, "refused:")
	require.Contains(t, out.Stdout, "faulted", "the truncation reached the rows and faulted")
	t.Logf("child: %s", strings.TrimSpace(out.Stdout))
}
