package storefile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

func TestCheckpointFoldsTheLog(t *testing.T) {
	r := testkit.Rand(t)
	path := filepath.Join(t.TempDir(), "s")
	s := randSnapshot(r)
	gen1, err := Checkpoint(OS, path, s)
	require.NoError(t, err)
	l, err := OpenLog(OS, LogPath(path), s.Dim, gen1, SyncEveryCall)
	require.NoError(t, err)
	for range 5 {
		require.NoError(t, l.Append(randRecord(r, s.Dim)))
	}
	require.NoError(t, l.Close())

	s2 := randSnapshot(r)
	s2.Dim = s.Dim
	s2.Stride = (s.Dim+3)&^3 + 4
	s2.Rows = randFloats(r, len(s2.IDs)*s2.Stride)
	gen2, err := Checkpoint(OS, path, s2)
	require.NoError(t, err)
	require.NotEqual(t, gen1, gen2)
	got, gen, err := ReadBase(path)
	require.NoError(t, err)
	assert.Equal(t, gen2, gen)
	requireSameSnapshot(t, s2, got)
	n, torn, err := ReplayLog(LogPath(path), s.Dim, gen2, nil)
	require.NoError(t, err)
	assert.Zero(t, n, "the new log starts empty")
	assert.False(t, torn)
}

// The exact crash Checkpoint must survive: the new base is renamed into
// place, and the process dies before the log is reset.
func TestStaleLogAfterCrashInCheckpointIsIgnored(t *testing.T) {
	r := testkit.Rand(t)
	path := filepath.Join(t.TempDir(), "s")
	s := randSnapshot(r)
	gen1, err := Checkpoint(OS, path, s)
	require.NoError(t, err)
	l, err := OpenLog(OS, LogPath(path), s.Dim, gen1, SyncEveryCall)
	require.NoError(t, err)
	old := []Record{randRecord(r, s.Dim), randRecord(r, s.Dim)}
	for _, rec := range old {
		require.NoError(t, l.Append(rec))
	}
	require.NoError(t, l.Close())

	// Checkpoint's first step alone, then "crash".
	gen2, err := WriteBase(OS, path, s)
	require.NoError(t, err)
	// A temporary file of the log reset that never got renamed.
	stray := filepath.Join(filepath.Dir(path), tempPrefix(LogPath(path))+"dead")
	require.NoError(t, os.WriteFile(stray, []byte("UMBRALOG half"), 0o644))

	n, torn, err := ReplayLog(LogPath(path), s.Dim, gen2, func(Record) error {
		t.Fatal("a stale log's records are already in the base")
		return nil
	})
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.False(t, torn)
	// The old records are still there for the old base: nothing was lost.
	got, _, err := replayAll(t, LogPath(path), s.Dim, gen1)
	require.NoError(t, err)
	require.Len(t, got, len(old))

	// Opening the log for the new base replaces it.
	l, err = OpenLog(OS, LogPath(path), s.Dim, gen2, SyncEveryCall)
	require.NoError(t, err)
	rec := randRecord(r, s.Dim)
	require.NoError(t, l.Append(rec))
	require.NoError(t, l.Close())
	got, _, err = replayAll(t, LogPath(path), s.Dim, gen2)
	require.NoError(t, err)
	require.Len(t, got, 1)
	requireSameRecord(t, rec, got[0])
	require.NoError(t, RemoveTemps(OS, path))
	_, err = os.Stat(stray)
	assert.True(t, os.IsNotExist(err))
}

func TestReplayCallbackErrorStopsReplay(t *testing.T) {
	r := testkit.Rand(t)
	path := filepath.Join(t.TempDir(), "s.log")
	require.NoError(t, os.WriteFile(path, encodeLog(2, 5, []Record{randRecord(r, 2), randRecord(r, 2)}), 0o644))
	stop := assert.AnError
	n, _, err := ReplayLog(path, 2, 5, func(Record) error { return stop })
	assert.ErrorIs(t, err, stop)
	assert.Zero(t, n)
}
