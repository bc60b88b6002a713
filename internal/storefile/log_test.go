package storefile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

func replayAll(t testing.TB, path string, dim int, gen uint64) ([]Record, bool, error) {
	t.Helper()
	var recs []Record
	n, torn, err := ReplayLog(path, dim, gen, func(r Record) error {
		recs = append(recs, r)
		return nil
	})
	require.Equal(t, len(recs), n)
	return recs, torn, err
}

func TestLogRoundTrip(t *testing.T) {
	r := testkit.Rand(t)
	for round := range 8 {
		dim := 1 + r.IntN(20)
		gen := 1 + r.Uint64()>>1
		path := filepath.Join(t.TempDir(), "s.log")
		policy := SyncEveryCall
		if round%2 == 1 {
			policy = SyncInterval(time.Hour) // only Close syncs
		}
		var want []Record
		// Several sessions, each reopening the log and appending more.
		for range 1 + r.IntN(3) {
			l, err := OpenLog(OS, path, dim, gen, policy)
			require.NoError(t, err)
			for range r.IntN(15) {
				rec := randRecord(r, dim)
				require.NoError(t, l.Append(rec))
				want = append(want, rec)
			}
			require.NoError(t, l.Close())
			require.NoError(t, l.Close(), "second Close")
			require.ErrorIs(t, l.Append(randRecord(r, dim)), ErrClosed)
		}
		got, torn, err := replayAll(t, path, dim, gen)
		require.NoError(t, err)
		require.False(t, torn)
		require.Len(t, got, len(want))
		for i := range want {
			requireSameRecord(t, want[i], got[i], "round %d record %d", round, i)
		}
		// Opening a log changes no file: sessions that appended nothing
		// left none.
		if len(want) == 0 {
			_, err := os.Stat(path)
			require.ErrorIs(t, err, os.ErrNotExist, "round %d: a log nothing was appended to made a file", round)
			continue
		}
		// What a Log writes is what encodeLog (the fuzz oracle) writes.
		if policy == SyncEveryCall {
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, encodeLog(dim, gen, want), raw)
		}
	}
}

func TestReplayMissingLogIsEmpty(t *testing.T) {
	n, torn, err := ReplayLog(filepath.Join(t.TempDir(), "none.log"), 3, 1, nil)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.False(t, torn)
}

func TestAppendRejectsInvalidRecords(t *testing.T) {
	l, err := OpenLog(OS, filepath.Join(t.TempDir(), "s.log"), 3, 5, SyncEveryCall)
	require.NoError(t, err)
	defer l.Close()
	for name, rec := range map[string]Record{
		"no IDs":           {Op: OpDelete},
		"short rows":       {Op: OpAdd, IDs: []uint64{1}, Rows: []float32{1, 2}},
		"padded rows":      {Op: OpUpsert, IDs: []uint64{1}, Rows: []float32{1, 2, 3, 0}},
		"delete with rows": {Op: OpDelete, IDs: []uint64{1}, Rows: []float32{1, 2, 3}},
		"keys mismatch":    {Op: OpSetKey, IDs: []uint64{1, 2}, Keys: []string{"a"}},
		"unknown op":       {Op: 9, IDs: []uint64{1}},
	} {
		assert.ErrorIs(t, l.Append(rec), ErrInvalid, name)
	}
	assert.Equal(t, int64(logHeaderLen), l.Size(), "nothing written")
}

// recordEnds returns the byte offset where each record of a log ends.
func recordEnds(dim int, gen uint64, recs []Record) []int {
	var ends []int
	b := encodeLogHeader(dim, gen)
	for i := range recs {
		b = appendFrame(b, &recs[i], logVersion, gen, int64(len(b)), int64(len(b)))
		ends = append(ends, len(b))
	}
	return ends
}

func TestReplayStopsCleanlyAtEveryTornLength(t *testing.T) {
	r := testkit.Rand(t)
	const dim, gen = 3, 77
	recs := make([]Record, 5)
	for i := range recs {
		recs[i] = randRecord(r, dim)
	}
	full := encodeLog(dim, gen, recs)
	ends := recordEnds(dim, gen, recs)
	path := filepath.Join(t.TempDir(), "s.log")
	for l := logHeaderLen; l <= len(full); l++ {
		complete := 0
		for complete < len(ends) && ends[complete] <= l {
			complete++
		}
		atBoundary := l == logHeaderLen || (complete > 0 && ends[complete-1] == l)
		res, err := scanLog(bytes.NewReader(full[:l]), int64(l), "mem", dim, gen, nil)
		require.NoError(t, err, "length %d", l)
		require.Equal(t, complete, res.records, "length %d", l)
		require.Equal(t, !atBoundary, res.torn, "length %d", l)

		if l%7 != 0 && l != len(full)-1 {
			continue
		}
		// Through the file: replay reports the torn tail, OpenLog cuts
		// it, and the next record follows the last good one.
		require.NoError(t, os.WriteFile(path, full[:l], 0o644))
		log, err := OpenLog(OS, path, dim, gen, SyncEveryCall)
		require.NoError(t, err)
		extra := randRecord(r, dim)
		require.NoError(t, log.Append(extra))
		require.NoError(t, log.Close())
		got, torn, err := replayAll(t, path, dim, gen)
		require.NoError(t, err, "length %d", l)
		require.False(t, torn)
		require.Len(t, got, complete+1, "length %d", l)
		requireSameRecord(t, extra, got[complete])
	}
}

func TestReplayTreatsZeroOrGarbageTailAsTorn(t *testing.T) {
	r := testkit.Rand(t)
	const dim, gen = 2, 9
	recs := []Record{randRecord(r, dim), randRecord(r, dim)}
	full := encodeLog(dim, gen, recs)
	garbage := make([]byte, 300)
	for i := range garbage {
		garbage[i] = byte(r.Uint32())
	}
	for name, tail := range map[string][]byte{"zeros": make([]byte, 4096), "garbage": garbage} {
		b := append(bytes.Clone(full), tail...)
		res, err := scanLog(bytes.NewReader(b), int64(len(b)), "mem", dim, gen, nil)
		require.NoError(t, err, name)
		assert.Equal(t, 2, res.records, name)
		assert.True(t, res.torn, name)
		assert.Equal(t, int64(len(full)), res.end, name)
	}
}

func TestReplayFlippedByteIsCorruptUnlessInTheLastRecord(t *testing.T) {
	r := testkit.Rand(t)
	const dim, gen = 2, 11
	recs := make([]Record, 4)
	for i := range recs {
		recs[i] = randRecord(r, dim)
	}
	full := encodeLog(dim, gen, recs)
	ends := recordEnds(dim, gen, recs)
	for pos := range full {
		b := bytes.Clone(full)
		b[pos] ^= byte(1 + r.IntN(255))
		res, err := scanLog(bytes.NewReader(b), int64(len(b)), "mem", dim, gen, nil)
		rec := 0
		for rec < len(ends) && ends[rec] <= pos {
			rec++
		}
		switch {
		case pos < logHeaderLen:
			requireFormatError(t, err, nil, "flip at %d", pos)
			// A flipped generation makes the log look stale rather than
			// corrupt: its header CRC catches that first.
		case rec == len(recs)-1:
			// Damage to the last record looks exactly like a torn write:
			// nothing written after it can vouch for it.
			require.NoError(t, err, "flip at %d", pos)
			require.True(t, res.torn)
			require.Equal(t, len(recs)-1, res.records)
		default:
			fe := requireFormatError(t, err, ErrCorrupt, "flip at %d in record %d", pos, rec)
			require.Equal(t, fmt.Sprintf("log record %d", rec), fe.Section)
		}
	}
}

func TestReplayUnsyncedHoleUnderSyncIntervalIsTorn(t *testing.T) {
	r := testkit.Rand(t)
	const dim, gen = 2, 13
	path := filepath.Join(t.TempDir(), "s.log")
	l, err := OpenLog(OS, path, dim, gen, SyncInterval(time.Hour))
	require.NoError(t, err)
	recs := []Record{randRecord(r, dim), randRecord(r, dim), randRecord(r, dim)}
	for _, rec := range recs {
		require.NoError(t, l.Append(rec))
	}
	require.NoError(t, l.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	// A power loss may persist record 2's page and not record 1's. No
	// fsync happened between them, so this is a crash, not corruption.
	ends := recordEnds(dim, gen, recs)
	b[ends[0]+frameLen+2] ^= 0xff
	require.NoError(t, os.WriteFile(path, b, 0o644))
	got, torn, err := replayAll(t, path, dim, gen)
	require.NoError(t, err)
	assert.True(t, torn)
	require.Len(t, got, 1)
	requireSameRecord(t, recs[0], got[0])
}

func TestSyncIntervalSyncsInTheBackground(t *testing.T) {
	r := testkit.Rand(t)
	l, err := OpenLog(OS, filepath.Join(t.TempDir(), "s.log"), 4, 3, SyncInterval(time.Millisecond))
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, l.Append(randRecord(r, 4)))
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.synced == l.off
	}, 10*time.Second, time.Millisecond, "the timer fsyncs without another call")
	require.NoError(t, l.Append(randRecord(r, 4)))
	require.NoError(t, l.Sync())
	l.mu.Lock()
	assert.Equal(t, l.off, l.synced)
	l.mu.Unlock()
}

func TestLogHeaderDamage(t *testing.T) {
	const dim, gen = 3, 21
	good := encodeLog(dim, gen, nil)
	cases := []struct {
		name string
		b    []byte
		dim  int
		want error
	}{
		{"empty file", []byte{}, dim, ErrTruncated},
		{"cut header", good[:20], dim, ErrTruncated},
		{"base file", []byte(baseMagic + "xxxxxxxxxxxxxxxxxxxxxxxx"), dim, ErrMagic},
		{"future version", func() []byte {
			b := bytes.Clone(good)
			binary.LittleEndian.PutUint32(b[8:], 7)
			return b
		}(), dim, ErrVersion},
		{"flipped dim", func() []byte { b := bytes.Clone(good); b[12] ^= 1; return b }(), dim, ErrCorrupt},
		{"other dim", good, dim + 1, ErrCorrupt},
	}
	path := filepath.Join(t.TempDir(), "s.log")
	for _, c := range cases {
		require.NoError(t, os.WriteFile(path, c.b, 0o644))
		_, _, err := ReplayLog(path, c.dim, gen, nil)
		fe := requireFormatError(t, err, c.want, "%s", c.name)
		assert.Equal(t, "log header", fe.Section, c.name)
		_, err = OpenLog(OS, path, c.dim, gen, SyncEveryCall)
		requireFormatError(t, err, c.want, "%s: OpenLog refuses too", c.name)
		after, rerr := os.ReadFile(path)
		require.NoError(t, rerr)
		assert.Equal(t, c.b, after, "%s: a refused log is left as it was", c.name)
	}
}

func TestCorruptLogIsNotTruncatedByOpenLog(t *testing.T) {
	r := testkit.Rand(t)
	const dim, gen = 2, 31
	recs := []Record{randRecord(r, dim), randRecord(r, dim), randRecord(r, dim)}
	b := encodeLog(dim, gen, recs)
	b[logHeaderLen+frameLen] ^= 0x10 // first record's payload
	path := filepath.Join(t.TempDir(), "s.log")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	_, err := OpenLog(OS, path, dim, gen, SyncEveryCall)
	fe := requireFormatError(t, err, ErrCorrupt, "open corrupt log")
	assert.Equal(t, "log record 0", fe.Section)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, b, after)
}

// TestOpenLogChangesNothing: opening a log and closing it without an
// Append leaves the directory byte for byte as it was — no log made where
// there was none, a stale or empty version-1 log not replaced, a torn tail
// not cut — and the first Append does each of those, durably.
func TestOpenLogChangesNothing(t *testing.T) {
	r := testkit.Rand(t)
	const dim, gen = 3, 77
	recs := []Record{randRecord(r, dim), randRecord(r, dim), randRecord(r, dim)}
	full := encodeLog(dim, gen, recs)
	v1, err := os.ReadFile(v1FixturePath)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		log  []byte // nil: none
		gen  uint64
		dim  int
		keep int // records left before the new one
	}{
		{"no log", nil, gen, dim, 0},
		{"an empty log", full[:logHeaderLen], gen, dim, 0},
		{"a log with records", full, gen, dim, 3},
		{"a torn tail", full[:len(full)-5], gen, dim, 2},
		{"a stale log", full, gen + 1, dim, 0},
		{"an empty version-1 log", v1[:logHeaderLen], v1FixtureGen, v1FixtureDim, 0},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "s.log")
		if c.log != nil {
			require.NoError(t, os.WriteFile(path, c.log, 0o644))
		}
		before := testkit.DirFiles(t, dir)
		l, err := OpenLog(OS, path, c.dim, c.gen, SyncEveryCall)
		require.NoError(t, err, c.name)
		require.NoError(t, l.Sync(), c.name)
		require.NoError(t, l.Close(), c.name)
		require.Equal(t, before, testkit.DirFiles(t, dir), "%s: opened and closed without a record", c.name)
		require.ErrorIs(t, l.Append(randRecord(r, c.dim)), ErrClosed, c.name)

		l, err = OpenLog(OS, path, c.dim, c.gen, SyncEveryCall)
		require.NoError(t, err, c.name)
		rec := randRecord(r, c.dim)
		require.NoError(t, l.Append(rec), c.name)
		require.NoError(t, l.Close(), c.name)
		got, torn, err := replayAll(t, path, c.dim, c.gen)
		require.NoError(t, err, c.name)
		require.False(t, torn, c.name)
		require.Len(t, got, c.keep+1, c.name)
		requireSameRecord(t, rec, got[c.keep], c.name)
		requireLogVersion(t, path, logVersion)
		require.Len(t, testkit.DirFiles(t, dir), 1, "%s: no temporary file left", c.name)
	}
}
