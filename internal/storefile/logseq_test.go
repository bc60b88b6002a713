package storefile

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// A duplicated, moved or misdirected whole frame keeps both its checksums:
// only the position it carries (bound to the log's generation) tells it
// does not belong where it lies. These tests damage logs that way and
// require every replay and OpenLog to refuse them with ErrCorrupt naming
// the first record that is out of place.

// sameLengthRecords returns n upserts of one ID: records of one length,
// whose frames can be copied over each other whole.
func sameLengthRecords(r *rand.Rand, dim, n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Op: OpUpsert, IDs: []uint64{7}, Rows: randFloats(r, dim)}
	}
	return recs
}

// writeLogWith appends recs to a new log at path through a Log under
// policy, and returns the file's bytes and where each frame starts.
func writeLogWith(t *testing.T, path string, dim int, gen uint64, policy SyncPolicy, recs []Record) ([]byte, []int) {
	t.Helper()
	l, err := OpenLog(OS, path, dim, gen, policy)
	require.NoError(t, err)
	starts := make([]int, len(recs))
	for i := range recs {
		starts[i] = int(l.Size())
		require.NoError(t, l.Append(recs[i]))
	}
	require.NoError(t, l.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b, starts
}

// requireRefused requires the log bytes b to be refused as corrupt at
// byte at, by scanLog, by ReplayLog and by OpenLog, which must leave the
// file as it was.
func requireRefused(t *testing.T, b []byte, dim int, gen uint64, at int, what string, args ...any) *FormatError {
	t.Helper()
	ctx := fmt.Sprintf(what, args...)
	var seen int
	_, err := scanLog(bytes.NewReader(b), int64(len(b)), "mem", dim, gen, func(Record) error { seen++; return nil })
	fe := requireFormatError(t, err, ErrCorrupt, "%s: scan", ctx)
	require.Equal(t, int64(at), fe.Offset, "%s: %v", ctx, err)
	require.Equal(t, fmt.Sprintf("log record %d", seen), fe.Section, ctx)

	path := filepath.Join(t.TempDir(), "damaged.log")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	_, _, err = ReplayLog(path, dim, gen, nil)
	requireFormatError(t, err, ErrCorrupt, "%s: ReplayLog", ctx)
	l, err := OpenLog(OS, path, dim, gen, SyncEveryCall)
	if err == nil {
		l.Close()
	}
	requireFormatError(t, err, ErrCorrupt, "%s: OpenLog", ctx)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, b, after, "%s: OpenLog changed a corrupt log", ctx)
	return fe
}

var bothPolicies = []SyncPolicy{SyncEveryCall, SyncInterval(time.Hour)}

// TestDuplicatedRecordIsCorrupt: record i's bytes copied over record i+1
// (same length, so every checksum still holds) are refused, the last
// record included, under either sync policy.
func TestDuplicatedRecordIsCorrupt(t *testing.T) {
	r := testkit.Rand(t)
	const dim, gen = 4, 0x5151
	for _, policy := range bothPolicies {
		recs := sameLengthRecords(r, dim, 6)
		good, starts := writeLogWith(t, filepath.Join(t.TempDir(), "s.log"), dim, gen, policy, recs)
		flen := starts[1] - starts[0]
		for i := 0; i+1 < len(recs); i++ {
			b := bytes.Clone(good)
			copy(b[starts[i+1]:], good[starts[i]:starts[i]+flen])
			fe := requireRefused(t, b, dim, gen, starts[i+1], "policy %v: record %d over record %d", policy, i, i+1)
			require.Contains(t, fe.Detail, fmt.Sprintf("written for byte %d lies at byte %d", starts[i], starts[i+1]))
			// And the other way: a later record copied back over an earlier one.
			b = bytes.Clone(good)
			copy(b[starts[i]:], good[starts[i+1]:starts[i+1]+flen])
			requireRefused(t, b, dim, gen, starts[i], "policy %v: record %d over record %d", policy, i+1, i)
		}
	}
}

// TestSwappedRecordsAreCorrupt: two records exchanged, of one length or
// (adjacent) of different lengths, are refused at the first one moved.
func TestSwappedRecordsAreCorrupt(t *testing.T) {
	r := testkit.Rand(t)
	const dim, gen = 3, 0x6262
	for _, policy := range bothPolicies {
		recs := sameLengthRecords(r, dim, 5)
		good, starts := writeLogWith(t, filepath.Join(t.TempDir(), "s.log"), dim, gen, policy, recs)
		flen := starts[1] - starts[0]
		for i := range recs {
			for j := i + 1; j < len(recs); j++ {
				b := bytes.Clone(good)
				copy(b[starts[i]:], good[starts[j]:starts[j]+flen])
				copy(b[starts[j]:], good[starts[i]:starts[i]+flen])
				requireRefused(t, b, dim, gen, starts[i], "policy %v: records %d and %d swapped", policy, i, j)
			}
		}

		// Different lengths: a short record and a long one exchange places.
		mixed := []Record{randRecord(r, dim),
			{Op: OpDelete, IDs: []uint64{1}},
			{Op: OpUpsert, IDs: []uint64{1, 2, 3}, Rows: randFloats(r, 3*dim)},
			randRecord(r, dim)}
		good, starts = writeLogWith(t, filepath.Join(t.TempDir(), "m.log"), dim, gen, policy, mixed)
		b := bytes.Clone(good[:starts[1]])
		b = append(b, good[starts[2]:starts[3]]...)
		b = append(b, good[starts[1]:starts[2]]...)
		b = append(b, good[starts[3]:]...)
		require.Len(t, b, len(good))
		requireRefused(t, b, dim, gen, starts[1], "policy %v: records of different lengths swapped", policy)
	}
}

// TestRecordFromAnOlderGenerationIsCorrupt: a frame of an older log (the
// one a checkpoint replaced), at the same position in the new log, is
// refused even where it would be the last record; so is the whole old
// log under the new log's header.
func TestRecordFromAnOlderGenerationIsCorrupt(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 5
	const oldGen, newGen = 0x1111, 0x2222
	dir := t.TempDir()
	for _, policy := range bothPolicies {
		old, oldStarts := writeLogWith(t, filepath.Join(dir, "old.log"), dim, oldGen, policy, sameLengthRecords(r, dim, 4))
		cur, starts := writeLogWith(t, filepath.Join(dir, "new.log"), dim, newGen, policy, sameLengthRecords(r, dim, 4))
		require.Equal(t, oldStarts, starts)
		flen := starts[1] - starts[0]
		for i := range starts {
			b := bytes.Clone(cur)
			copy(b[starts[i]:], old[starts[i]:starts[i]+flen])
			fe := requireRefused(t, b, dim, newGen, starts[i], "policy %v: record %d from the older generation", policy, i)
			require.Contains(t, fe.Detail, "older generation")
		}
		b := append(bytes.Clone(cur[:logHeaderLen]), old[logHeaderLen:]...)
		requireRefused(t, b, dim, newGen, logHeaderLen, "policy %v: the older log's records under the new header", policy)
	}
}

// TestMovedFramesAreNeverAccepted is the property: a log of random
// records, then one random rearrangement of whole frames — a frame copied
// over another of its length, two frames of one length swapped, a run of
// adjacent frames permuted, or a frame replaced by the frame at the same
// position of an older generation's log — is always refused as corrupt,
// at the first byte that changed, never replayed nor cut off as a torn
// tail.
func TestMovedFramesAreNeverAccepted(t *testing.T) {
	r := testkit.Rand(t)
	dir := t.TempDir()
	for round := range 300 {
		dim := 1 + r.IntN(6)
		gen := 1 + r.Uint64()>>1
		policy := bothPolicies[r.IntN(2)]
		n := 2 + r.IntN(10)
		recs := make([]Record, n)
		for i := range recs {
			if r.IntN(2) == 0 {
				// Few shapes, so that many frames share a length.
				recs[i] = Record{Op: OpUpsert, IDs: []uint64{r.Uint64N(3)}, Rows: randFloats(r, dim)}
			} else {
				recs[i] = randRecord(r, dim)
			}
		}
		good, starts := writeLogWith(t, filepath.Join(dir, fmt.Sprintf("r%d.log", round)), dim, gen, policy, recs)
		frame := func(b []byte, i int) []byte {
			if i+1 < len(starts) {
				return b[starts[i]:starts[i+1]]
			}
			return b[starts[i]:]
		}
		sameLen := func() (int, int, bool) {
			for range 20 {
				i, j := r.IntN(n), r.IntN(n)
				if i != j && len(frame(good, i)) == len(frame(good, j)) {
					return i, j, true
				}
			}
			return 0, 0, false
		}
		b := bytes.Clone(good)
		var what string
		switch r.IntN(4) {
		case 0:
			i, j, ok := sameLen()
			if !ok {
				continue
			}
			copy(b[starts[j]:], frame(good, i))
			what = fmt.Sprintf("frame %d copied over frame %d", i, j)
		case 1:
			i, j, ok := sameLen()
			if !ok {
				continue
			}
			copy(b[starts[j]:], frame(good, i))
			copy(b[starts[i]:], frame(good, j))
			what = fmt.Sprintf("frames %d and %d swapped", i, j)
		case 2:
			lo := r.IntN(n - 1)
			hi := lo + 2 + r.IntN(n-lo-1) // frames [lo, hi), at least two
			perm := r.Perm(hi - lo)
			out := bytes.Clone(good[:starts[lo]])
			for _, k := range perm {
				out = append(out, frame(good, lo+k)...)
			}
			if hi < n {
				out = append(out, good[starts[hi]:]...)
			}
			b = out
			what = fmt.Sprintf("frames %d..%d permuted %v", lo, hi-1, perm)
		case 3:
			// The same records under an older generation: every frame
			// lies where its counterpart does.
			oldGen := gen ^ (1 + r.Uint64N(1<<62))
			old, _ := writeLogWith(t, filepath.Join(dir, fmt.Sprintf("r%d-old.log", round)), dim, oldGen, policy, recs)
			i := r.IntN(n)
			copy(b[starts[i]:], frame(old, i))
			what = fmt.Sprintf("frame %d from generation %x", i, oldGen)
		}
		first := 0
		for first < len(b) && b[first] == good[first] {
			first++
		}
		if first == len(b) {
			continue // the permutation kept every frame in place
		}
		at := 0
		for _, s := range starts {
			if s <= first {
				at = s
			}
		}
		requireRefused(t, b, dim, gen, at, "round %d (%v, %d records): %s", round, policy, n, what)
	}
}

// TestFrameInsideAKeyVouchesForNothing: the bytes of a valid frame inside
// a record's payload (keys are the caller's bytes) do not turn a torn tail
// into corruption, because they do not carry the position tag of where
// they lie; only a frame written where it lies vouches for the bytes
// before it.
func TestFrameInsideAKeyVouchesForNothing(t *testing.T) {
	r := testkit.Rand(t)
	const dim, gen = 2, 0x7373
	// Under SyncInterval no fsync happened between the records: every
	// frame says only the header was synced, so a damaged record 0 is a
	// torn tail.
	first := randRecord(r, dim)
	firstLen := frameLen + int(first.payloadSize())
	keyAt := int64(logHeaderLen + firstLen + frameLen + 5 + 8 + 4) // frame, op, k, one ID, key length
	fake := func(tagGen uint64) []byte {
		inner := Record{Op: OpDelete, IDs: []uint64{1}}
		// A frame claiming everything before it was synced.
		return appendFrame(nil, &inner, logVersion, tagGen, keyAt, keyAt)
	}
	build := func(tagGen uint64) []byte {
		b := encodeLogHeader(dim, gen)
		b = appendFrame(b, &first, logVersion, gen, int64(len(b)), logHeaderLen)
		key := Record{Op: OpSetKey, IDs: []uint64{9}, Keys: []string{string(fake(tagGen))}}
		b = appendFrame(b, &key, logVersion, gen, int64(len(b)), logHeaderLen)
		require.Equal(t, string(fake(tagGen)), string(b[keyAt:keyAt+int64(len(fake(tagGen)))]))
		b[logHeaderLen+frameLen] ^= 0x20 // record 0's payload
		return b
	}
	b := build(gen ^ 0xdead) // the caller cannot know the generation
	res, err := scanLog(bytes.NewReader(b), int64(len(b)), "mem", dim, gen, nil)
	require.NoError(t, err)
	require.True(t, res.torn)
	require.Zero(t, res.records)

	// The same bytes tagged for where they lie do vouch: that is what
	// tells corruption from a torn tail.
	b = build(gen)
	_, err = scanLog(bytes.NewReader(b), int64(len(b)), "mem", dim, gen, nil)
	fe := requireFormatError(t, err, ErrCorrupt, "a frame tagged for its position vouches")
	require.Equal(t, "log record 0", fe.Section)
}

// TestOlderHeaderOverCurrentRecordsIsCorrupt: an older log's header (its
// first block) written over the current log's would make the log look
// stale, and its records be dropped as already in the base; the current
// generation's frames after it show it is not, while a genuinely stale log
// stays ignored.
func TestOlderHeaderOverCurrentRecordsIsCorrupt(t *testing.T) {
	r := testkit.Rand(t)
	const dim, oldGen, gen = 3, 0x4141, 0x4242
	dir := t.TempDir()
	old, _ := writeLogWith(t, filepath.Join(dir, "old.log"), dim, oldGen, SyncEveryCall, sameLengthRecords(r, dim, 3))
	cur, starts := writeLogWith(t, filepath.Join(dir, "cur.log"), dim, gen, SyncEveryCall, sameLengthRecords(r, dim, 3))
	for _, cut := range []int{logHeaderLen, starts[1], starts[2]} { // the header, then the header and whole frames
		b := append(bytes.Clone(old[:cut]), cur[cut:]...)
		_, err := scanLog(bytes.NewReader(b), int64(len(b)), "mem", dim, gen, nil)
		fe := requireFormatError(t, err, ErrCorrupt, "old log's first %d bytes over the current one", cut)
		require.Equal(t, "log header", fe.Section)
		path := filepath.Join(dir, "damaged.log")
		require.NoError(t, os.WriteFile(path, b, 0o644))
		_, _, err = ReplayLog(path, dim, gen, nil)
		requireFormatError(t, err, ErrCorrupt, "ReplayLog")
		_, err = OpenLog(OS, path, dim, gen, SyncEveryCall)
		requireFormatError(t, err, ErrCorrupt, "OpenLog")
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, b, after, "OpenLog replaced a log it should have refused")
	}
	res, err := scanLog(bytes.NewReader(old), int64(len(old)), "mem", dim, gen, nil)
	require.NoError(t, err)
	require.True(t, res.stale, "a log of another generation, whole, is stale")
}
