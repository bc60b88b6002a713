package storefile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
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
	r := testkit.Rand(t)
	want := v1FixtureRecords()
	path := copyV1Fixture(t)
	got, torn, err := replayAll(t, path, v1FixtureDim, v1FixtureGen)
	require.NoError(t, err)
	require.False(t, torn)
	require.Len(t, got, len(want))
	for i := range want {
		requireSameRecord(t, want[i], got[i], "fixture record %d", i)
	}

	l, err := OpenLog(OS, path, v1FixtureDim, v1FixtureGen, SyncEveryCall)
	require.NoError(t, err)
	for range 3 {
		rec := randRecord(r, v1FixtureDim)
		require.NoError(t, l.Append(rec))
		want = append(want, rec)
	}
	require.NoError(t, l.Close())
	requireLogVersion(t, path, 1) // not mixed: the old records keep their layout
	got, torn, err = replayAll(t, path, v1FixtureDim, v1FixtureGen)
	require.NoError(t, err)
	require.False(t, torn)
	require.Len(t, got, len(want))
	for i := range want {
		requireSameRecord(t, want[i], got[i], "record %d after appending", i)
	}
}

// requireLogVersion requires the log at path to have a header of version.
func requireLogVersion(t *testing.T, path string, version uint32) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), logHeaderLen)
	require.Equal(t, version, binary.LittleEndian.Uint32(b[8:]), "version of %s", path)
}

// TestVersion1TornTailAndCorruption: a version-1 log keeps the version-1
// rules: cut anywhere, it replays its whole records and OpenLog cuts the
// rest; a flipped byte in a record a later one vouches for is corruption.
func TestVersion1TornTailAndCorruption(t *testing.T) {
	full, err := os.ReadFile(v1FixturePath)
	require.NoError(t, err)
	recs := v1FixtureRecords()
	var ends []int
	for pos := logHeaderLen; pos < len(full); {
		pos += frameLenV1 + int(binary.LittleEndian.Uint32(full[pos:]))
		ends = append(ends, pos)
	}
	require.Len(t, ends, len(recs))
	require.Equal(t, len(full), ends[len(ends)-1])
	for l := logHeaderLen; l <= len(full); l++ {
		complete := 0
		for complete < len(ends) && ends[complete] <= l {
			complete++
		}
		res, err := scanLog(bytes.NewReader(full[:l]), int64(l), "mem", v1FixtureDim, v1FixtureGen, nil)
		require.NoError(t, err, "length %d", l)
		require.Equal(t, complete, res.records, "length %d", l)
		require.Equal(t, uint32(1), res.version)
	}
	cut := ends[2] + 9
	path := filepath.Join(t.TempDir(), "s.log")
	require.NoError(t, os.WriteFile(path, full[:cut], 0o644))
	l, err := OpenLog(OS, path, v1FixtureDim, v1FixtureGen, SyncEveryCall)
	require.NoError(t, err)
	require.Equal(t, int64(ends[2]), l.Size(), "torn tail cut")
	require.NoError(t, l.Append(recs[5]))
	require.NoError(t, l.Close())
	requireLogVersion(t, path, 1)
	got, torn, err := replayAll(t, path, v1FixtureDim, v1FixtureGen)
	require.NoError(t, err)
	require.False(t, torn)
	require.Len(t, got, 4)
	requireSameRecord(t, recs[5], got[3])

	for rec := range len(recs) - 1 {
		b := bytes.Clone(full)
		b[ends[rec]-1] ^= 0x08 // the last payload byte of record rec
		_, err := scanLog(bytes.NewReader(b), int64(len(b)), "mem", v1FixtureDim, v1FixtureGen, nil)
		fe := requireFormatError(t, err, ErrCorrupt, "flip in record %d", rec)
		require.Equal(t, fmt.Sprintf("log record %d", rec), fe.Section)
	}
}

// TestEmptyVersion1LogBecomesVersion2: a version-1 log with no records
// (a checkpoint's, or one whose only record was torn) holds nothing to
// keep, so OpenLog replaces it with an empty version-2 log; and a
// checkpoint of a store with a version-1 log starts a version-2 one.
func TestEmptyVersion1LogBecomesVersion2(t *testing.T) {
	r := testkit.Rand(t)
	full, err := os.ReadFile(v1FixturePath)
	require.NoError(t, err)
	for _, n := range []int{logHeaderLen, logHeaderLen + 7} { // empty; a torn first record
		path := filepath.Join(t.TempDir(), "s.log")
		require.NoError(t, os.WriteFile(path, full[:n], 0o644))
		l, err := OpenLog(OS, path, v1FixtureDim, v1FixtureGen, SyncEveryCall)
		require.NoError(t, err)
		rec := randRecord(r, v1FixtureDim)
		require.NoError(t, l.Append(rec))
		require.NoError(t, l.Close())
		requireLogVersion(t, path, logVersion)
		got, torn, err := replayAll(t, path, v1FixtureDim, v1FixtureGen)
		require.NoError(t, err)
		require.False(t, torn)
		require.Len(t, got, 1)
		requireSameRecord(t, rec, got[0])
	}

	store := filepath.Join(t.TempDir(), "store")
	require.NoError(t, os.WriteFile(LogPath(store), full, 0o644))
	gen, err := Checkpoint(OS, store, &Snapshot{Dim: v1FixtureDim, Stride: 4})
	require.NoError(t, err)
	requireLogVersion(t, LogPath(store), logVersion)
	n, _, err := ReplayLog(LogPath(store), v1FixtureDim, gen, nil)
	require.NoError(t, err)
	require.Zero(t, n)
}
