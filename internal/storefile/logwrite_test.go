package storefile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// TestOpWriteRoundTripEveryFlagCombination: a write record of every
// combination of upsert, keys, meta and payloads goes through a Log and
// replays as it was appended, with the flags byte saying which parts it
// carries; the Log wrote what the fuzz oracle encodes.
func TestOpWriteRoundTripEveryFlagCombination(t *testing.T) {
	r := testkit.Rand(t)
	const dim, gen = 5, 0x5eed
	path := filepath.Join(t.TempDir(), "w.log")
	l, err := OpenLog(OS, path, dim, gen, SyncEveryCall)
	require.NoError(t, err)
	var want []Record
	for flags := range byte(16) {
		for range 3 {
			rec := randRecordOf(r, dim, OpWrite, flags)
			require.Equal(t, flags, rec.flags())
			require.NoError(t, l.Append(rec), "flags %04b", flags)
			want = append(want, rec)
		}
	}
	// Old ops in between, unchanged.
	for op := OpAdd; op <= OpUpsertKeys; op++ {
		rec := randRecordOf(r, dim, op, 0)
		require.NoError(t, l.Append(rec))
		want = append(want, rec)
	}
	require.NoError(t, l.Close())
	got, torn, err := replayAll(t, path, dim, gen)
	require.NoError(t, err)
	require.False(t, torn)
	require.Len(t, got, len(want))
	for i := range want {
		requireSameRecord(t, want[i], got[i], "record %d", i)
		if want[i].Op == OpWrite {
			for _, part := range []struct {
				present bool
				got     int
			}{{len(want[i].Keys) > 0, len(got[i].Keys)}, {len(want[i].Meta) > 0, len(got[i].Meta)}, {len(want[i].Payloads) > 0, len(got[i].Payloads)}} {
				if part.present {
					require.Equal(t, len(want[i].IDs), part.got, "record %d", i)
				} else {
					require.Zero(t, part.got, "record %d: a part it does not carry comes back empty", i)
				}
			}
		}
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, encodeLog(dim, gen, want), raw)
}

// TestOpWritePayloadLayout pins the bytes of one write record.
func TestOpWritePayloadLayout(t *testing.T) {
	rec := Record{Op: OpWrite, IDs: []uint64{7, 1 << 40}, Rows: []float32{1, 2, 3, -1, -2, -3}, Upsert: true,
		Keys: []string{"a", ""}, Meta: [][]byte{[]byte("m"), nil}, Payloads: [][]byte{{}, []byte("pp")}}
	require.NoError(t, rec.validate(3))
	le := binary.LittleEndian
	var want []byte
	want = append(want, 6)
	want = le.AppendUint32(want, 2)
	want = le.AppendUint64(le.AppendUint64(want, 7), 1<<40)
	want = append(want, 0b1111)
	for _, f := range rec.Rows {
		want = le.AppendUint32(want, math.Float32bits(f))
	}
	for _, e := range []string{"a", "", "m", "", "", "pp"} {
		want = append(le.AppendUint32(want, uint32(len(e))), e...)
	}
	got := rec.appendPayload(nil)
	require.Equal(t, want, got)
	require.Equal(t, uint64(len(got)), rec.payloadSize())
}

func TestAppendRejectsInvalidWriteRecords(t *testing.T) {
	l, err := OpenLog(OS, filepath.Join(t.TempDir(), "s.log"), 3, 5, SyncEveryCall)
	require.NoError(t, err)
	defer l.Close()
	rows := []float32{1, 2, 3, 4, 5, 6}
	for name, rec := range map[string]Record{
		"write without IDs":        {Op: OpWrite},
		"write rows short":         {Op: OpWrite, IDs: []uint64{1, 2}, Rows: rows[:5]},
		"write without rows":       {Op: OpWrite, IDs: []uint64{1}, Meta: [][]byte{[]byte("m")}},
		"write keys short":         {Op: OpWrite, IDs: []uint64{1, 2}, Rows: rows, Keys: []string{"a"}},
		"write meta long":          {Op: OpWrite, IDs: []uint64{1, 2}, Rows: rows, Meta: make([][]byte, 3)},
		"write payloads short":     {Op: OpWrite, IDs: []uint64{1, 2}, Rows: rows, Payloads: [][]byte{nil}},
		"meta on add":              {Op: OpAdd, IDs: []uint64{1}, Rows: rows[:3], Meta: [][]byte{[]byte("m")}},
		"payloads on upsert-keys":  {Op: OpUpsertKeys, IDs: []uint64{1}, Rows: rows[:3], Keys: []string{"k"}, Payloads: [][]byte{nil}},
		"upsert flag on upsert":    {Op: OpUpsert, IDs: []uint64{1}, Rows: rows[:3], Upsert: true},
		"payloads on delete":       {Op: OpDelete, IDs: []uint64{1}, Payloads: [][]byte{[]byte("p")}},
		"meta on set-key":          {Op: OpSetKey, IDs: []uint64{1}, Keys: []string{"k"}, Meta: [][]byte{nil}},
		"unknown op with payloads": {Op: 7, IDs: []uint64{1}, Rows: rows[:3], Payloads: [][]byte{nil}},
	} {
		assert.ErrorIs(t, l.Append(rec), ErrInvalid, name)
	}
	assert.Equal(t, int64(logHeaderLen), l.Size(), "nothing written")
}

// validWritePayload is the payload of a write record carrying every
// part, at fuzzDim: offsets below are into it.
//
//	0 op, 1 k=2, 5 IDs, 21 flags, 22 rows (24 bytes), 46 keys "a" "",
//	55 meta "m" "", 64 payloads "" "pp", 74 end
func validWritePayload() []byte {
	rec := Record{Op: OpWrite, IDs: []uint64{3, 4}, Rows: []float32{1, 2, 3, 4, 5, 6}, Keys: []string{"a", ""},
		Meta: [][]byte{[]byte("m"), nil}, Payloads: [][]byte{nil, []byte("pp")}}
	return rec.appendPayload(nil)
}

// malformedWritePayloads are write payloads no writer produces, each with
// a word its decoding error must contain.
func malformedWritePayloads() []struct {
	name, says string
	payload    []byte
} {
	le := binary.LittleEndian
	edit := func(f func(b []byte) []byte) []byte { return f(validWritePayload()) }
	return []struct {
		name, says string
		payload    []byte
	}{
		{"unknown flag bit 4", "flags 0x1e", edit(func(b []byte) []byte { b[21] |= 1 << 4; return b })},
		{"unknown flag bit 7", "flags 0x8e", edit(func(b []byte) []byte { b[21] |= 1 << 7; return b })},
		{"no flags byte", "before its flags", edit(func(b []byte) []byte { return b[:21] })},
		{"no IDs", "without IDs", edit(func(b []byte) []byte { le.PutUint32(b[1:], 0); return b })},
		{"more IDs than bytes", "IDs declared", edit(func(b []byte) []byte { le.PutUint32(b[1:], 1<<30); return b })},
		{"rows short", "row bytes", edit(func(b []byte) []byte { b[21] = 0; return b[:45] })},
		{"rows long", "row bytes", edit(func(b []byte) []byte { b[21] = writeUpsert; return b[:47] })},
		{"key 0 lying", "key 0 claims 100 bytes", edit(func(b []byte) []byte { le.PutUint32(b[46:], 100); return b })},
		{"meta 1 lying", "meta 1 claims 65536 bytes", edit(func(b []byte) []byte { le.PutUint32(b[60:], 1<<16); return b })},
		{"payload 1 lying", "payload 1 claims 3 bytes", edit(func(b []byte) []byte { le.PutUint32(b[68:], 3); return b })},
		{"payload 1 missing", "payload 1: 0 bytes left", edit(func(b []byte) []byte { return b[:68] })},
		{"payload length cut", "payload 1: 2 bytes left", edit(func(b []byte) []byte { return b[:70] })},
		{"byte after the payloads", "after its last part", edit(func(b []byte) []byte { return append(b, 0) })},
		{"flags claim meta, none follows", "meta 0: 0 bytes left", edit(func(b []byte) []byte { b[21] = writeMeta; return b[:46] })},
		{"flags deny payloads that follow", "after its last part", edit(func(b []byte) []byte { b[21] &^= writePayloads; return b })},
	}
}

// frameOf wraps payload in a version-2 frame at pos of a log of gen,
// checksums and position tag right, synced up to pos.
func frameOf(payload []byte, gen uint64, pos int) []byte {
	le := binary.LittleEndian
	h := make([]byte, frameLen)
	le.PutUint32(h, uint32(len(payload)))
	le.PutUint64(h[4:], uint64(pos))
	le.PutUint64(h[12:], positionTag(int64(pos), gen))
	le.PutUint32(h[20:], crc32.Checksum(h[:20], castagnoli))
	le.PutUint32(h[24:], crc32.Checksum(payload, castagnoli))
	return append(h, payload...)
}

// malformedWriteLogs are logs of a valid record then a frame, whose
// checksums hold, around each malformed write payload.
func malformedWriteLogs() [][]byte {
	var logs [][]byte
	for _, c := range malformedWritePayloads() {
		b := encodeLog(fuzzDim, fuzzGen, []Record{{Op: OpDelete, IDs: []uint64{1}}})
		logs = append(logs, append(b, frameOf(c.payload, fuzzGen, len(b))...))
	}
	return logs
}

// TestDecodeMalformedWrite: a write payload that breaks a rule is refused
// with the reason; in a frame whose checksums hold it is corruption of
// that record, never a torn tail.
func TestDecodeMalformedWrite(t *testing.T) {
	rec, err := decodePayload(validWritePayload(), fuzzDim)
	require.NoError(t, err)
	require.Equal(t, []string{"a", ""}, rec.Keys)
	require.Equal(t, [][]byte{[]byte("m"), nil}, rec.Meta)
	require.Equal(t, [][]byte{nil, []byte("pp")}, rec.Payloads)
	require.False(t, rec.Upsert)

	logs := malformedWriteLogs()
	for i, c := range malformedWritePayloads() {
		_, err := decodePayload(c.payload, fuzzDim)
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), c.says, c.name)

		_, err = scanLog(bytes.NewReader(logs[i]), int64(len(logs[i])), "mem", fuzzDim, fuzzGen, nil)
		fe := requireFormatError(t, err, ErrCorrupt, "%s", c.name)
		assert.Equal(t, "log record 1", fe.Section, c.name)
	}
}

// TestOldOpsEncodeAsBefore: the records of the version-1 fixture, framed
// as the version-1 writer framed them, are the fixture byte for byte: ops
// 1 to 5 are encoded as they always were, so logs that do not use op 6 stay
// readable by older builds.
func TestOldOpsEncodeAsBefore(t *testing.T) {
	fixture, err := os.ReadFile(v1FixturePath)
	require.NoError(t, err)
	b := bytes.Clone(fixture[:logHeaderLen])
	for _, rec := range v1FixtureRecords() {
		b = appendFrame(b, &rec, 1, v1FixtureGen, int64(len(b)), int64(len(b)))
	}
	require.Equal(t, fixture, b)
}

func TestOpString(t *testing.T) {
	require.Equal(t, "write", OpWrite.String())
	require.Equal(t, fmt.Sprintf("op(%d)", 7), Op(7).String())
}
