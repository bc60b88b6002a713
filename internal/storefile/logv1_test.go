package storefile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The version-1 fixture: a log written by the version-1 writer (before
// frames carried their position), with these records, under SyncEveryCall.
const (
	v1FixturePath = "testdata/v1/dim3-gen1122334455667788.log"
	v1FixtureDim  = 3
	v1FixtureGen  = 0x1122334455667788
)

func v1FixtureRecords() []Record {
	return []Record{
		{Op: OpAdd, IDs: []uint64{1, 2}, Rows: []float32{1, 2, 3, 4, 5, 6}},
		{Op: OpUpsert, IDs: []uint64{2}, Rows: []float32{-1, -2, -3}},
		{Op: OpUpsert, IDs: []uint64{2}, Rows: []float32{7, 8, 9}},
		{Op: OpSetKey, IDs: []uint64{1}, Keys: []string{"one"}},
		{Op: OpDelete, IDs: []uint64{1}},
		{Op: OpUpsertKeys, IDs: []uint64{1 << 40, 3}, Rows: []float32{0.5, 0.25, 0.125, 10, 20, 30}, Keys: []string{"big", ""}},
	}
}

// copyV1Fixture copies the fixture into a temporary directory.
func copyV1Fixture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(v1FixturePath)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "s.log")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// TestVersion1LogStillReplays: a log written by the version-1 writer
// replays, and a Log opened on it keeps appending records that replay
// after the old ones.
func TestVersion1LogStillReplays(t *testing.T) {
	r := newRand(t)
	want := v1FixtureRecords()
	path := copyV1Fixture(t)
	got, torn, err := replayAll(t, path, v1FixtureDim, v1FixtureGen)
	require.NoError(t, err)
	require.False(t, torn)
	require.Len(t, got, len(want))
	for i := range want {
		requireSameRecord(t, want[i], got[i], "fixture record %d", i)
	}

	l, err := OpenLog(path, v1FixtureDim, v1FixtureGen, SyncEveryCall)
	require.NoError(t, err)
	for range 3 {
		rec := randRecord(r, v1FixtureDim)
		require.NoError(t, l.Append(rec))
		want = append(want, rec)
	}
	require.NoError(t, l.Close())
	got, torn, err = replayAll(t, path, v1FixtureDim, v1FixtureGen)
	require.NoError(t, err)
	require.False(t, torn)
	require.Len(t, got, len(want))
	for i := range want {
		requireSameRecord(t, want[i], got[i], "record %d after appending", i)
	}
}
