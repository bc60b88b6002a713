package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/storefile/faultfs"
	"github.com/umbravec/umbra/internal/testkit"
)

// storeModel is what a store must hold: every acknowledged write applied,
// every refused one not.
type storeModel map[uint64][]float32

func (m storeModel) check(t *testing.T, ix *engine.Index, what string) {
	t.Helper()
	want := make([]uint64, 0, len(m))
	for id := range m {
		want = append(want, id)
	}
	slices.Sort(want)
	require.Equal(t, want, ix.IDs(), "%s: IDs", what)
	for id, v := range m {
		got, err := ix.Vector(id)
		require.NoError(t, err, what)
		require.Equal(t, v, got, "%s: vector of ID %d", what, id)
	}
}

// writeOnce runs one write of each kind against ix and the model: an
// AddWithIDs of a new ID, an Upsert of a stored one and a Delete of
// another. A write that returns nil is applied to the model; one that
// fails is not. It returns how many were acknowledged.
func (m storeModel) writeOnce(t *testing.T, r *rand.Rand, ix *engine.Index, next *uint64, dim int) int {
	t.Helper()
	ctx := context.Background()
	acked := 0
	id := *next
	*next++
	v := testkit.Vectors(r, 1, dim)[0]
	if _, err := ix.Add(ctx, umbra.Vectors([][]float32{v}), umbra.WithIDs([]uint64{id}...)); err == nil {
		m[id] = v
		acked++
	}
	stored := make([]uint64, 0, len(m))
	for id := range m {
		stored = append(stored, id)
	}
	slices.Sort(stored)
	if len(stored) >= 2 {
		up := stored[r.IntN(len(stored))]
		w := testkit.Vectors(r, 1, dim)[0]
		if _, err := ix.Upsert(ctx, umbra.Vectors([][]float32{w}), umbra.WithIDs([]uint64{up}...)); err == nil {
			m[up] = w
			acked++
		}
		del := stored[r.IntN(len(stored))]
		if err := ix.Delete(ctx, umbra.WithIDs(del)); err == nil {
			delete(m, del)
			acked++
		}
	}
	return acked
}

// newModelStore opens a Dot store (vectors kept as given, so the model
// compares exactly) at a fresh path, adds n rows and checkpoints.
func newModelStore(t *testing.T, r *rand.Rand, dir string, n, dim int, b backend, opts ...engine.OpenOption) (*engine.Index, storeModel, uint64, string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(dir, "s.umbra")
	ix, err := engine.OpenWith(ctx, path, engine.Config{Dim: dim, Metric: umbra.Dot, Device: b.device, Adapters: []engine.AdapterSelect{b.adapter}}, opts...)
	if err != nil && b.device == engine.GPU {
		testkit.NoGPU(t, "no %s adapter works: %v", b.name, err)
	}
	require.NoError(t, err)
	m := storeModel{}
	ids := make([]uint64, n)
	vs := testkit.Vectors(r, n, dim)
	for i := range ids {
		ids[i] = uint64(i)
		m[ids[i]] = vs[i]
	}
	require.NoError(t, testkit.ErrOf(ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...))))
	require.NoError(t, ix.Checkpoint(ctx))
	return ix, m, uint64(n), path
}

// reopened checks the store at path against the model twice: as the files
// lie now (read-only, beside the open writer) and through a fresh Open.
func (m storeModel) reopened(t *testing.T, path string, live *engine.Index, what string) {
	t.Helper()
	ctx := context.Background()
	ro, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU, ReadOnly: true})
	require.NoError(t, err, what)
	m.check(t, ro, what+", read-only beside the writer")
	require.NoError(t, ro.Close())
	if live == nil {
		return // the writer still holds the store
	}
	require.NoError(t, live.Close(), what)
	ix, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err, what)
	m.check(t, ix, what+", reopened")
	require.NoError(t, ix.Close())
}

// TestCheckpointFailingAtEveryStep fails a checkpoint at each step of
// its base write and of its log reset, then writes while the fault holds
// and after it is gone. Every write that returned nil must be in the store
// the files reopen to, and none that failed: before this, a checkpoint
// whose new log could not be made left the index appending to a log the
// new base made stale, so acknowledged writes vanished on reopen.
func TestCheckpointFailingAtEveryStep(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 8
	for _, b := range backends[:2] { // the CPU, whose base is mapped, and lavapipe
		for _, target := range []string{"base", "log"} {
			for _, step := range faultfs.Steps() {
				for _, lasting := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s/%s/lasting=%v", b.name, target, step, lasting)
					t.Run(name, func(t *testing.T) {
						ctx := context.Background()
						fsys := faultfs.New(nil, nil)
						ix, m, next, path := newModelStore(t, r, t.TempDir(), 20, dim, b, engine.WithFS(fsys))
						m.writeOnce(t, r, ix, &next, dim)
						suffix := ""
						if target == "log" {
							suffix = ".log"
						}
						fault := errors.New("injected: no space left on device")
						var armed sync.Mutex
						fsys.Set(func(s, p string) error {
							armed.Lock()
							defer armed.Unlock()
							if s == step && strings.HasSuffix(p, ".umbra"+suffix) {
								return fault
							}
							return nil
						})
						err := ix.Checkpoint(ctx)
						require.ErrorIs(t, err, fault)
						if lasting {
							// Writes while the disk is still full: each is
							// refused or acknowledged, and the store agrees.
							for range 3 {
								m.writeOnce(t, r, ix, &next, dim)
							}
							m.check(t, ix, name+", in memory while failing")
							m.reopened(t, path, nil, name+", while failing")
						}
						fsys.Set(nil)
						// Space is back: writes are acknowledged again.
						for range 3 {
							require.Equal(t, 3, m.writeOnce(t, r, ix, &next, dim), "%s: writes after the fault", name)
						}
						m.check(t, ix, name+", in memory")
						m.reopened(t, path, ix, name)
					})
				}
			}
		}
	}
}

// TestStoreThroughSymlink opens, writes and checkpoints a store through a
// symbolic link: the log and the lock are the real file's, so the link and
// the file are one store with one writer, and a checkpoint replaces the
// file, leaving the link a link.
func TestStoreThroughSymlink(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	dir := t.TempDir()
	const dim = 8
	ix, m, next, path := newModelStore(t, r, dir, 5, dim, backends[0])
	for range 2 {
		m.writeOnce(t, r, ix, &next, dim) // these live only in the log
	}
	require.NoError(t, ix.Close())
	other := t.TempDir()
	link := filepath.Join(other, "link.umbra")
	require.NoError(t, os.Symlink(path, link))

	for _, open := range []func() (*engine.Index, error){
		func() (*engine.Index, error) { return engine.Open(ctx, link, engine.Config{Device: engine.CPU}) },
		func() (*engine.Index, error) {
			return engine.Open(ctx, link, engine.Config{Device: engine.CPU, ReadOnly: true})
		},
	} {
		ix, err := open()
		require.NoError(t, err)
		m.check(t, ix, "opened through the link")
		require.NoError(t, ix.Close())
	}

	// One writer between the link and the file.
	w, err := engine.Open(ctx, link, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	_, err = engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.ErrorIs(t, err, engine.ErrLocked)
	m.writeOnce(t, r, w, &next, dim)
	require.NoError(t, w.Checkpoint(ctx))
	m.writeOnce(t, r, w, &next, dim)
	require.NoError(t, w.Close())
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeSymlink, "the checkpoint left the link a link")
	_, err = os.Stat(filepath.Join(other, "link.umbra.log"))
	require.ErrorIs(t, err, os.ErrNotExist, "no log beside the link")
	entries, err := os.ReadDir(other)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing but the link in its directory")
	m.reopened(t, path, nil, "the real file after writes through the link")

	// Save through a link replaces the file it points at.
	mem, err := engine.New(ctx, engine.Config{Dim: dim, Metric: umbra.Dot, Device: engine.CPU})
	require.NoError(t, err)
	defer mem.Close()
	require.NoError(t, testkit.ErrOf(mem.Add(ctx, umbra.Vectors(testkit.Vectors(r, 1, dim)), umbra.WithIDs([]uint64{7}...))))
	saved := filepath.Join(dir, "saved.umbra")
	savedLink := filepath.Join(other, "saved-link.umbra")
	require.NoError(t, os.WriteFile(saved, nil, 0o644))
	require.NoError(t, os.Symlink(saved, savedLink))
	require.NoError(t, mem.Save(ctx, savedLink))
	fi, err = os.Lstat(savedLink)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeSymlink)
	back, err := engine.Open(ctx, saved, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	sameContents(t, mem, back, "saved through a link")
	require.NoError(t, back.Close())

	// A link to nothing is not a place to create a store.
	dangling := filepath.Join(other, "dangling.umbra")
	require.NoError(t, os.Symlink(filepath.Join(dir, "missing.umbra"), dangling))
	_, err = engine.Open(ctx, dangling, engine.Config{Dim: dim, Device: engine.CPU})
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Contains(t, err.Error(), "symbolic link")
}

// TestDeleteKeysRacesIDWrites: DeleteKeys("a") racing Delete(X) then
// AddWithIDs(X) (X the ID "a" named) must be one of the serial orders, in
// none of which all three succeed; before, DeleteKeys looked the key up,
// let go of the lock and could delete the vector re-added under X.
func TestDeleteKeysRacesIDWrites(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 4
	for _, dir := range []string{"", t.TempDir()} {
		for i := range 300 {
			var ix *engine.Index
			var err error
			if dir == "" {
				ix, err = engine.New(ctx, engine.Config{Dim: dim, Device: engine.CPU})
			} else {
				ix, err = engine.Open(ctx, filepath.Join(dir, fmt.Sprintf("s%d.umbra", i)), engine.Config{Dim: dim, Device: engine.CPU, LogSync: 1 << 30})
			}
			require.NoError(t, err)
			ids, err := ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 1, dim)), umbra.WithKeys([]string{"a"}...))
			require.NoError(t, err)
			x := ids[0]
			var errA, errDel, errAdd error
			var wg sync.WaitGroup
			wg.Go(func() { errA = ix.Delete(ctx, umbra.WithKeys("a")) })
			wg.Go(func() {
				if errDel = ix.Delete(ctx, umbra.WithIDs(x)); errDel == nil {
					_, errAdd = ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 1, dim)), umbra.WithIDs([]uint64{x}...))
				}
			})
			wg.Wait()
			require.False(t, errA == nil && errDel == nil && errAdd == nil,
				"try %d: DeleteKeys, Delete and the re-add all succeeded: no serial order allows it", i)
			if errDel == nil && errAdd == nil {
				require.True(t, ix.Has(x), "try %d: the re-added vector was deleted", i)
			}
			require.NoError(t, ix.Close())
		}
	}
}

// TestEmptyWritesAreNoOps: a write of no vectors changes nothing and
// succeeds alike in memory and on a store (it was "record without IDs" on
// a store).
func TestEmptyWritesAreNoOps(t *testing.T) {
	ctx := context.Background()
	mem, err := engine.New(ctx, engine.Config{Dim: 4, Device: engine.CPU})
	require.NoError(t, err)
	defer mem.Close()
	st, err := engine.Open(ctx, filepath.Join(t.TempDir(), "s.umbra"), engine.Config{Dim: 4, Device: engine.CPU})
	require.NoError(t, err)
	defer st.Close()
	for _, ix := range []*engine.Index{mem, st} {
		require.NoError(t, testkit.ErrOf(ix.Add(ctx, umbra.Vectors(nil), umbra.WithIDs(nil...))))
		require.NoError(t, testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors([][]float32{}), umbra.WithIDs([]uint64{}...))))
		_, err := ix.Add(ctx, umbra.Vectors(nil), umbra.WithKeys(nil...))
		require.NoError(t, err)
		_, err = ix.Upsert(ctx, umbra.Vectors(nil), umbra.WithKeys(nil...))
		require.NoError(t, err)
		require.NoError(t, ix.Delete(ctx, umbra.WithIDs()))
		require.NoError(t, ix.Delete(ctx, umbra.WithKeys()))
		require.Zero(t, ix.Len())
	}
}

// TestFailedOpenLeavesNoLock: opening a file that is not a store fails and
// leaves nothing beside it.
func TestFailedOpenLeavesNoLock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(path, []byte("not a store at all, just some text\n"), 0o644))
	_, err := engine.Open(context.Background(), path, engine.Config{Device: engine.CPU})
	require.ErrorIs(t, err, engine.ErrBadStore)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the file itself")
}

// TestCloseOfNilIndex: what a failed New or Open returns can be closed.
func TestCloseOfNilIndex(t *testing.T) {
	ix, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "missing", "s.umbra"), engine.Config{Dim: 4, Device: engine.CPU})
	require.Error(t, err)
	require.Nil(t, ix)
	require.NoError(t, ix.Close())
}
