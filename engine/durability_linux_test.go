package engine_test

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// TestCheckpointOutOfInodes is the failure as a disk gives it: a tmpfs
// with room for the new base's inode but not the new log's, on the CPU
// path where the mapped old base keeps its inode alive. The checkpoint
// fails with ENOSPC after the rename; writes after it are refused until
// space returns, then acknowledged, and every acknowledged one survives a
// reopen. Mounting needs root: UMBRA_REQUIRE_MOUNT=1 (CI sets it) makes a
// machine where mounting fails fail the test rather than skip it.
func TestCheckpointOutOfInodes(t *testing.T) {
	dir := mountTmpfs(t, "size=8m,nr_inodes=64")
	r := testkit.Rand(t)
	const dim = 16
	ctx := context.Background()
	ix, m, next, path := newModelStore(t, r, dir, 50, dim, backends[0])
	require.NoError(t, ix.Close())
	ix, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	defer ix.Close()

	// Room for one more inode: the new base's temporary file takes it
	// (the old base lives on, mapped), and the new log's finds none.
	var fs syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &fs))
	used := fs.Files - fs.Ffree
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, fmt.Sprintf("size=8m,nr_inodes=%d", used+1)))
	err = ix.Checkpoint(ctx)
	require.ErrorContains(t, err, "no space left")
	require.Contains(t, err.Error(), "log not reset")
	for range 2 {
		m.writeOnce(t, r, ix, &next, dim) // refused: no inode for the log
	}
	m.check(t, ix, "in memory while the disk is full")

	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=8m,nr_inodes=64"))
	for range 3 {
		require.Equal(t, 3, m.writeOnce(t, r, ix, &next, dim), "writes once space returns")
	}
	m.reopened(t, path, ix, "after the inodes returned")
}

// TestRefusedWriteFixesNoField: an Add and an Upsert whose metadata brings
// a new field, refused because the disk is full when their log record is
// written, leave no trace: not the rows, not their payloads, and not the
// new field's kind, so that once space returns the field takes another.
func TestRefusedWriteFixesNoField(t *testing.T) {
	dir := mountTmpfs(t, "size=1m")
	r := testkit.Rand(t)
	ctx := context.Background()
	path := dir + "/m.umbra"
	ix, err := engine.Open(ctx, path, engine.Config{Dim: 4, Device: engine.CPU})
	require.NoError(t, err)
	defer ix.Close()
	ids, err := ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 2, 4)), umbra.WithMeta(meta.Fields{"user": meta.KeywordOf("a")}, nil))
	require.NoError(t, err)

	// Fill the disk, then write records that cannot fit.
	filler := fillDisk(t, dir)
	big := make([]byte, 200<<10)
	_, err = ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 1, 4)), umbra.WithMeta(meta.Fields{"n": meta.KeywordOf("x")}), umbra.WithPayloads(big))
	require.ErrorContains(t, err, "no space left")
	_, err = ix.Upsert(ctx, umbra.Vectors(testkit.Vectors(r, 1, 4)), umbra.WithIDs(ids[1]), umbra.WithMeta(meta.Fields{"m": meta.KeywordOf("x")}), umbra.WithPayloads(big))
	require.ErrorContains(t, err, "no space left")
	require.Equal(t, 2, ix.Len())
	require.Equal(t, map[string]meta.Kind{"user": meta.Keyword}, ix.Schema())
	f, err := ix.Meta(ids[1])
	require.NoError(t, err)
	require.Nil(t, f, "the refused upsert left the row's metadata as it was")

	require.NoError(t, filler.Close())
	require.NoError(t, os.Remove(dir+"/filler"))
	_, err = ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 1, 4)), umbra.WithMeta(meta.Fields{"n": meta.IntOf(1), "m": meta.FloatOf(2)}))
	require.NoError(t, err, "n and m take their kinds from the first write that was stored")
	require.NoError(t, ix.Close())
	ix, err = engine.Open(ctx, path, engine.Config{})
	require.NoError(t, err)
	require.Equal(t, map[string]meta.Kind{"user": meta.Keyword, "n": meta.Int, "m": meta.Float}, ix.Schema())
	require.Equal(t, 3, ix.Len())
}

// TestCompressedAddBesideItsLogIsAtomic: an Add of enough rows that its
// compressed copy is made beside its log write (Int8 and F16, under keys,
// on a store on the CPU) is stored whole when the log takes it and not at
// all when the disk is full: the rows, their compressed copies and their
// keys stay as they were (every search exact over the acknowledged rows,
// the refused keys free), the next Add after space returns is stored
// where the refused one would have been, and a reopen finds the
// acknowledged rows alone.
func TestCompressedAddBesideItsLogIsAtomic(t *testing.T) {
	for _, prec := range []umbra.Precision{umbra.Int8, umbra.F16} {
		t.Run(prec.String(), func(t *testing.T) {
			dir := mountTmpfs(t, "size=4m")
			r := testkit.Rand(t)
			ctx := context.Background()
			const dim, n = 32, 300 // n past the rows an Add compresses beside its log
			path := dir + "/c.umbra"
			ix, err := engine.Open(ctx, path, engine.Config{Dim: dim, Device: engine.CPU, Precision: prec})
			require.NoError(t, err)
			defer func() { ix.Close() }()
			var data [][]float32
			add := func(tag string) error {
				vs := testkit.Vectors(r, n, dim)
				keys := make([]string, n)
				for i := range keys {
					keys[i] = fmt.Sprintf("%s-%d", tag, i)
				}
				ids, err := ix.Add(ctx, umbra.Vectors(vs), umbra.WithKeys(keys...))
				if err != nil {
					return err
				}
				for i, id := range ids {
					require.Equal(t, uint64(len(data)+i), id, "IDs follow the acknowledged rows")
				}
				data = append(data, vs...)
				return nil
			}
			check := func(what string) {
				t.Helper()
				require.Equal(t, len(data), ix.Len(), what)
				for range 5 {
					q := testkit.Vector(r, dim)
					hits, err := ix.Search(ctx, q, 10)
					require.NoError(t, err, what)
					checkHits(t, umbra.Cosine, data, q, 10, hits)
				}
			}
			require.NoError(t, add("a"))
			check("after the first add")

			filler := fillDisk(t, dir)
			require.ErrorContains(t, add("b"), "no space left")
			check("after the refused add")
			require.NoError(t, filler.Close())
			require.NoError(t, os.Remove(dir+"/filler"))

			require.NoError(t, add("b"), "the refused add's keys are free")
			check("after space returned")
			require.NoError(t, ix.Close())
			ix, err = engine.Open(ctx, path, engine.Config{Device: engine.CPU})
			require.NoError(t, err)
			check("reopened")
		})
	}
}

// mountTmpfs mounts a tmpfs with opts on a fresh directory, unmounted at
// the test's end, and returns it. Mounting needs root: without it the
// test skips, unless UMBRA_REQUIRE_MOUNT=1 (CI sets it) makes that a
// failure.
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		if os.Getenv("UMBRA_REQUIRE_MOUNT") == "1" {
			t.Fatalf("UMBRA_REQUIRE_MOUNT=1 but a tmpfs cannot be mounted: %v", err)
		}
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { require.NoError(t, syscall.Unmount(dir, syscall.MNT_DETACH)) })
	return dir
}

// fillDisk writes dir/filler until the file system under dir is full,
// and returns it open: closing and removing it gives the space back.
func fillDisk(t *testing.T, dir string) *os.File {
	t.Helper()
	filler, err := os.Create(dir + "/filler")
	require.NoError(t, err)
	chunk := make([]byte, 16<<10)
	for {
		if _, err := filler.Write(chunk); err != nil {
			return filler
		}
	}
}
