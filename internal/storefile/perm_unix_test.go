//go:build unix

package storefile

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

func TestWriteBaseKeepsPermissionsAndCleansUp(t *testing.T) {
	r := testkit.Rand(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "p")

	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	_, err := WriteBase(OS, path, randSnapshot(r))
	require.NoError(t, err)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o644), st.Mode().Perm(), "new base: 0644 less umask")

	require.NoError(t, os.Chmod(path, 0o600))
	_, err = WriteBase(OS, path, randSnapshot(r))
	require.NoError(t, err)
	st, err = os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), st.Mode().Perm(), "replaced base keeps its mode")

	// A directory where the base would go is refused before any file is
	// made.
	sub := filepath.Join(dir, "isdir")
	require.NoError(t, os.Mkdir(sub, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "x"), nil, 0o644))
	_, err = WriteBase(OS, sub, randSnapshot(r))
	require.ErrorContains(t, err, "not a regular file")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.Contains(e.Name(), tempInfix), "temporary file %s left behind", e.Name())
	}

	// RemoveTemps clears what a killed writer leaves, and only that.
	stray := filepath.Join(dir, tempPrefix(path)+"0123")
	strayLog := filepath.Join(dir, tempPrefix(path+".log")+"4567")
	other := filepath.Join(dir, ".q.tmp-1")
	// Files whose names start like p's temporary files: a neighbour
	// "p.tmp-x" and its own temporary file, and a hidden ".p.tmp-x".
	lookalike := filepath.Join(dir, filepath.Base(path)+tempInfix+"x")
	lookalikeTemp := filepath.Join(dir, tempPrefix(lookalike)+"89abcdef01234567")
	hidden := filepath.Join(dir, tempPrefix(path)+"x")
	for _, p := range []string{stray, strayLog, other, lookalike, lookalikeTemp, hidden} {
		require.NoError(t, os.WriteFile(p, []byte("half"), 0o644))
	}
	require.NoError(t, RemoveTemps(OS, path))
	for _, p := range []string{stray, strayLog} {
		_, err := os.Stat(p)
		assert.ErrorIs(t, err, fs.ErrNotExist, p)
	}
	for _, p := range []string{other, lookalike, lookalikeTemp, hidden} {
		_, err = os.Stat(p)
		assert.NoError(t, err, "%s: another file's files are not touched", filepath.Base(p))
	}
}
