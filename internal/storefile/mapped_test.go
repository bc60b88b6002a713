package storefile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

func TestMapBaseMatchesReadBase(t *testing.T) {
	r := testkit.Rand(t)
	path := filepath.Join(t.TempDir(), "m")
	for i := range 10 {
		s := randSnapshot(r)
		gen, err := WriteBase(OS, path, s)
		require.NoError(t, err)
		m, err := MapBase(path)
		require.NoError(t, err, "snapshot %d", i)
		assert.Equal(t, gen, m.Generation)
		requireSameSnapshot(t, s, m.Snapshot, "snapshot %d", i)

		// A checkpoint renames a new file over the path; the mapping keeps
		// the old contents.
		_, err = WriteBase(OS, path, randSnapshot(r))
		require.NoError(t, err)
		require.True(t, bytes.Equal(floatBytes(s.Rows), floatBytes(m.Rows)))
		require.NoError(t, m.Close())
		require.NoError(t, m.Close())
		assert.Nil(t, m.Rows)
	}
}

func TestMapBaseChecksRows(t *testing.T) {
	_, good := smallBase(t)
	path := filepath.Join(t.TempDir(), "m")
	for _, pos := range []int{rowsOffset, rowsOffset + 47, rowsOffset + 48, len(good) - 1, 30} {
		b := bytes.Clone(good)
		b[pos] ^= 0x80
		require.NoError(t, os.WriteFile(path, b, 0o644))
		_, err := MapBase(path)
		requireFormatError(t, err, nil, "flip at %d", pos)
	}
}

// TestMapBaseCopyOnWrite: writing to mapped rows changes the process's
// view only, never the file; a checkpoint's rename over the path leaves
// the mapping and Changed alone; a truncation or a rewrite in place is
// what Changed reports.
func TestMapBaseCopyOnWrite(t *testing.T) {
	r := testkit.Rand(t)
	path := filepath.Join(t.TempDir(), "m")
	s := randSnapshot(r)
	for len(s.IDs) == 0 {
		s = randSnapshot(r)
	}
	_, err := WriteBase(OS, path, s)
	require.NoError(t, err)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	m, err := MapBase(path)
	require.NoError(t, err)
	defer m.Close()
	require.True(t, m.Mapped())
	require.True(t, m.Contains(uintptr(unsafe.Pointer(&m.Rows[0]))))
	require.False(t, m.Contains(uintptr(unsafe.Pointer(&s.Rows[0]))))
	for i := range m.Rows {
		m.Rows[i] = float32(i)
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "a write to the mapping reached the file")
	require.NoError(t, m.Changed())

	_, err = WriteBase(OS, path, randSnapshot(r)) // renamed over the path
	require.NoError(t, err)
	require.NoError(t, m.Changed(), "a rename over the path does not change the mapped file")

	m2, err := MapBase(path)
	require.NoError(t, err)
	defer m2.Close()
	if m2.Mapped() {
		old := time.Now().Add(-time.Hour)
		require.NoError(t, os.Chtimes(path, old, old))
		m3, err := MapBase(path)
		require.NoError(t, err)
		defer m3.Close()
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, b, 0o644)) // same bytes, written in place
		require.ErrorIs(t, m3.Changed(), ErrChanged)
		require.NoError(t, os.Truncate(path, rowsOffset))
		require.ErrorIs(t, m2.Changed(), ErrChanged)

		// Rows written in place with the size and the modification time
		// put back: only the status-change time shows it. Wait for the
		// file system's clock to move past the file's last change first
		// (its granularity is the kernel's tick), so the rewrite's stamp
		// can differ at all. A chmod moves that time too, but leaves the
		// rows as they were: not a change.
		_, err = WriteBase(OS, path, s)
		require.NoError(t, err)
		m4, err := MapBase(path)
		require.NoError(t, err)
		defer m4.Close()
		fi, err := os.Stat(path)
		require.NoError(t, err)
		waitForClockPast(t, path)
		require.NoError(t, os.Chmod(path, 0o600))
		require.NoError(t, m4.Changed(), "a chmod leaves the rows as they were")
		require.NoError(t, m4.Changed())

		b, err = os.ReadFile(path)
		require.NoError(t, err)
		b[rowsOffset] ^= 0x40 // one bit of the first row
		waitForClockPast(t, path)
		require.NoError(t, os.WriteFile(path, b, 0o644))
		require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
		fi2, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, fi.Size(), fi2.Size())
		require.True(t, fi.ModTime().Equal(fi2.ModTime()), "the rewrite put the modification time back")
		err = m4.Changed()
		require.ErrorIs(t, err, ErrChanged, "a rewrite with size and modification time restored")
		require.ErrorContains(t, err, "CRC-32C")
	}
}

// waitForClockPast returns once a file written now gets a status-change
// time later than path's (within a few seconds, or the test fails).
func waitForClockPast(t *testing.T, path string) {
	t.Helper()
	ctime := func(p string) time.Time {
		f, err := os.Open(p)
		require.NoError(t, err)
		defer f.Close()
		st, err := changeStamp(f)
		require.NoError(t, err)
		return time.Unix(st[0], st[1])
	}
	ref := ctime(path)
	probe := filepath.Join(filepath.Dir(path), "clock-probe")
	for range 1000 {
		require.NoError(t, os.WriteFile(probe, nil, 0o644))
		if ctime(probe).After(ref) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the file system's clock did not move in 5 s")
}
