package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/storefile/faultfs"
	"github.com/umbravec/umbra/internal/testkit"
)

// writeBytes is a write callback that emits b.
func writeBytes(b []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(b); return err }
}

// assertOnly checks that dir holds exactly the named entries: no temporary
// file was left behind.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	assert.ElementsMatch(t, names, got, "directory %s", dir)
}

func randomBytes(t *testing.T, n int) []byte {
	rng := testkit.Rand(t)
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func TestWriteFileAtomicPermissions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix permission bits")
	}
	content := randomBytes(t, 3000)
	dir := t.TempDir()

	t.Run("existing 0600 stays 0600", func(t *testing.T) {
		path := filepath.Join(dir, "secret.npy")
		require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
		require.NoError(t, os.Chmod(path, 0o600))
		require.NoError(t, Write(path, 0o644, writeBytes(content)))
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, content, got)
	})
	t.Run("existing 0664 stays 0664 whatever the umask", func(t *testing.T) {
		path := filepath.Join(dir, "shared.npy")
		require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
		require.NoError(t, os.Chmod(path, 0o664)) // chmod ignores the umask
		require.NoError(t, Write(path, 0o600, writeBytes(content)))
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o664), fi.Mode().Perm())
	})
	t.Run("new file gets perm less the umask", func(t *testing.T) {
		// What the kernel makes of 0644 under this process's umask, learnt
		// the same way a plain create would.
		probe := filepath.Join(t.TempDir(), "probe")
		f, err := os.OpenFile(probe, os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		want, err := os.Stat(probe)
		require.NoError(t, err)

		path := filepath.Join(dir, "new.fvecs")
		require.NoError(t, Write(path, 0o644, writeBytes(content)))
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, want.Mode().Perm(), fi.Mode().Perm())
	})
	assertOnly(t, dir, "secret.npy", "shared.npy", "new.fvecs")
}

// TestWriteFileAtomicOrder: the data is fsynced before the rename and the
// directory after it; anything else can lose the file in a crash.
func TestWriteFileAtomicOrder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "v.npy")
	var steps []string
	var tmp string
	fsys := faultfs.New(nil, func(step, p string) error {
		require.Equal(t, path, p)
		names := dirNames(t, dir)
		switch step {
		case faultfs.StepSync, faultfs.StepRename:
			// The data is fsynced, then renamed, from one temporary file.
			require.Len(t, names, 1, "%s: %q", step, names)
			if tmp == "" {
				tmp = names[0]
			}
			assert.Equal(t, tmp, names[0], step)
		case faultfs.StepSyncDir:
			// The directory is fsynced after the rename.
			assert.Equal(t, []string{"v.npy"}, names, step)
		}
		steps = append(steps, step)
		return nil
	})
	require.NoError(t, writeFS(fsys, path, 0o644, writeBytes(randomBytes(t, 100))))
	assert.Equal(t, faultfs.Steps(), steps)
	assert.Regexp(t, `^\.v\.npy\.tmp-[0-9a-f]{16}$`, tmp, "temporary name")
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestWriteFileAtomicFailures: whichever step fails, the old content stays
// and no temporary file is left.
func TestWriteFileAtomicFailures(t *testing.T) {
	errBoom := errors.New("boom")
	old := randomBytes(t, 500)
	cases := []struct {
		name  string
		fail  faultfs.Fail
		write func(io.Writer) error
	}{
		{"write fails", nil, func(w io.Writer) error {
			_, _ = w.Write([]byte("partial"))
			return errBoom
		}},
		{"create fails", faultfs.FailAt(faultfs.StepCreate, errBoom), writeBytes([]byte("new"))},
		{"the file's write fails", faultfs.FailAt(faultfs.StepWrite, errBoom), writeBytes([]byte("new"))},
		{"sync fails", faultfs.FailAt(faultfs.StepSync, errBoom), writeBytes([]byte("new"))},
		{"close fails", faultfs.FailAt(faultfs.StepClose, errBoom), writeBytes([]byte("new"))},
		{"rename fails", faultfs.FailAt(faultfs.StepRename, errBoom), writeBytes([]byte("new"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "v.npy")
			require.NoError(t, os.WriteFile(path, old, 0o644))
			err := writeFS(faultfs.New(nil, tc.fail), path, 0o644, tc.write)
			assert.ErrorIs(t, err, errBoom)
			got, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			assert.Equal(t, old, got)
			assertOnly(t, dir, "v.npy")
		})
	}
	t.Run("write panics", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "v.npy")
		assert.Panics(t, func() {
			_ = Write(path, 0o644, func(io.Writer) error { panic("boom") })
		})
		assertOnly(t, dir)
	})
	t.Run("directory sync fails after the rename", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "v.npy")
		fsys := faultfs.New(nil, faultfs.FailAt(faultfs.StepSyncDir, errBoom))
		err := writeFS(fsys, path, 0o644, writeBytes([]byte("new")))
		assert.ErrorIs(t, err, errBoom)
		assert.Contains(t, err.Error(), "after renaming")
		assertOnly(t, dir, "v.npy") // in place, but its durability is not promised
	})
	t.Run("not a regular file", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "d.npy")
		require.NoError(t, os.Mkdir(path, 0o755))
		err := Write(path, 0o644, writeBytes([]byte("new")))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not a regular file")
		assertOnly(t, dir, "d.npy")
	})
}

func TestWriteFileAtomicSymlink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on Windows")
	}
	content := randomBytes(t, 700)
	t.Run("relative link in another directory", func(t *testing.T) {
		root := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(root, "data"), 0o755))
		require.NoError(t, os.Mkdir(filepath.Join(root, "links"), 0o755))
		target := filepath.Join(root, "data", "real.npy")
		require.NoError(t, os.WriteFile(target, []byte("old"), 0o600))
		link := filepath.Join(root, "links", "v.npy")
		require.NoError(t, os.Symlink("../data/real.npy", link))

		require.NoError(t, Write(link, 0o644, writeBytes(content)))
		fi, err := os.Lstat(link)
		require.NoError(t, err)
		assert.NotZero(t, fi.Mode()&fs.ModeSymlink, "the link was replaced by a regular file")
		got, err := os.ReadFile(target)
		require.NoError(t, err)
		assert.Equal(t, content, got)
		fi, err = os.Stat(target)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
		assertOnly(t, filepath.Join(root, "links"), "v.npy")
		assertOnly(t, filepath.Join(root, "data"), "real.npy")
	})
	t.Run("chain of links", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(dir, "real.npy")
		require.NoError(t, os.WriteFile(target, []byte("old"), 0o644))
		require.NoError(t, os.Symlink(target, filepath.Join(dir, "b.npy")))
		require.NoError(t, os.Symlink("b.npy", filepath.Join(dir, "a.npy")))
		require.NoError(t, Write(filepath.Join(dir, "a.npy"), 0o644, writeBytes(content)))
		got, err := os.ReadFile(target)
		require.NoError(t, err)
		assert.Equal(t, content, got)
		for _, l := range []string{"a.npy", "b.npy"} {
			fi, err := os.Lstat(filepath.Join(dir, l))
			require.NoError(t, err)
			assert.NotZero(t, fi.Mode()&fs.ModeSymlink, l)
		}
	})
	t.Run("dangling link creates its target", func(t *testing.T) {
		dir := t.TempDir()
		link := filepath.Join(dir, "v.npy")
		require.NoError(t, os.Symlink("made.npy", link))
		require.NoError(t, Write(link, 0o644, writeBytes(content)))
		got, err := os.ReadFile(filepath.Join(dir, "made.npy"))
		require.NoError(t, err)
		assert.Equal(t, content, got)
	})
	t.Run("loop", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Symlink("b.npy", filepath.Join(dir, "a.npy")))
		require.NoError(t, os.Symlink("a.npy", filepath.Join(dir, "b.npy")))
		err := Write(filepath.Join(dir, "a.npy"), 0o644, writeBytes(content))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "too many levels of symbolic links")
	})
}

func ExampleWrite() {
	dir, err := os.MkdirTemp("", "umbra-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "notes.txt")
	err = Write(path, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, "all or nothing\n")
		return err
	})
	if err != nil {
		panic(err)
	}
	b, _ := os.ReadFile(path)
	fmt.Print(string(b))
	// Output: all or nothing
}
