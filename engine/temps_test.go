package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/storefile/faultfs"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestOpenRemovesCrashTemps: a writer killed in the middle of a checkpoint
// leaves its temporary file beside the store. A read-only open takes no
// lock (a live writer's temporary file could be there) and leaves it; the
// next Open, under the writer's lock, removes it and only it: a
// neighbour's temporary file, named like the store's, stays.
func TestOpenRemovesCrashTemps(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.umbra")
	const dim, n = 8, 20
	cfg := engine.Config{Dim: dim, Device: engine.CPU}
	fsys := faultfs.New(nil, nil)
	ix, err := engine.OpenWith(ctx, path, cfg, engine.WithFS(fsys))
	require.NoError(t, err)
	data := make([]float32, n*dim)
	for i := range data {
		data[i] = r.Float32()*2 - 1
	}
	_, err = ix.Add(ctx, umbra.Flat(data, dim))
	require.NoError(t, err)

	// The crash: when the checkpoint's new base is complete and about to
	// be renamed into place, a hard link keeps its temporary file past the
	// write's own clean-up; it goes back under its name afterwards, as a
	// process killed before the rename leaves it.
	var temps []string
	fsys.Set(func(step, p string) error {
		if step != faultfs.StepRename {
			return nil
		}
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "."+filepath.Base(p)+".tmp-") {
				require.NoError(t, os.Link(filepath.Join(dir, e.Name()), filepath.Join(dir, "kept-"+e.Name())))
				temps = append(temps, e.Name())
			}
		}
		return errors.New("killed before the rename")
	})
	err = ix.Checkpoint(ctx)
	fsys.Set(nil)
	require.Error(t, err)
	require.NoError(t, ix.Close())
	require.NotEmpty(t, temps)
	for _, name := range temps {
		require.NoError(t, os.Rename(filepath.Join(dir, "kept-"+name), filepath.Join(dir, name)))
	}
	// The temporary file of a file "s.umbra.tmp-x" beside the store starts
	// like the store's own.
	neighbour := filepath.Join(dir, ".s.umbra.tmp-x.tmp-0123456789abcdef")
	require.NoError(t, os.WriteFile(neighbour, []byte("someone else's"), 0o644))

	ro, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU, ReadOnly: true})
	require.NoError(t, err)
	require.Equal(t, n, ro.Len())
	require.NoError(t, ro.Close())
	for _, name := range temps {
		require.FileExists(t, filepath.Join(dir, name), "a read-only open deletes nothing")
	}

	w, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	require.Equal(t, n, w.Len())
	for _, name := range temps {
		require.NoFileExists(t, filepath.Join(dir, name), "Open removes what the crash left")
	}
	require.FileExists(t, neighbour, "only the store's own temporary files")
	require.NoError(t, w.Close())
}
