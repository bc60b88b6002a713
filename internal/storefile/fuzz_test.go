package storefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	fuzzDim = 3
	fuzzGen = 0x0123456789abcdef
)

// requireNamedError is the fuzz targets' error property: every failure is a
// *FormatError naming a section and wrapping a sentinel.
func requireNamedError(t *testing.T, err error) {
	t.Helper()
	var fe *FormatError
	require.ErrorAs(t, err, &fe)
	require.NotEmpty(t, fe.Section)
	for _, s := range []error{ErrMagic, ErrVersion, ErrTruncated, ErrCorrupt, ErrUnsupported} {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("error wraps no sentinel: %v", err)
}

func baseSeeds(t testing.TB) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	_, small := smallBase(t)
	empty := encodeBaseBytes(t, &Snapshot{Dim: 1, Stride: 4, NextID: 1}, fuzzGen)
	keysOnly := encodeBaseBytes(t, &Snapshot{Dim: 2, Stride: 8, Keys: map[uint64]string{0: "", 1 << 63: "k"}}, fuzzGen)
	s := &Snapshot{Dim: 1, Stride: 4, IDs: make([]uint64, 65), Rows: randFloats(r, 65*4), Deleted: []uint64{1 << 63, 1}}
	wordEdge := encodeBaseBytes(t, s, fuzzGen)
	// Version 2: every section; a schema alone, no rows; payloads alone,
	// one large enough to be written apart from the others.
	_, smallV2 := smallBaseV2(t)
	schemaOnly := encodeBaseBytes(t, &Snapshot{Dim: 1, Stride: 4, Schema: []byte("schema")}, fuzzGen)
	big := bytes.Repeat([]byte("payload "), 600)
	payloadsOnly := encodeBaseBytes(t, &Snapshot{Dim: 2, Stride: 4, IDs: []uint64{9, 3}, Rows: randFloats(r, 8),
		Payloads: [][]byte{nil, big}}, fuzzGen)
	return [][]byte{small, empty, keysOnly, wordEdge, smallV2, schemaOnly, payloadsOnly}
}

func logSeeds(t testing.TB) [][]byte {
	r := rand.New(rand.NewPCG(3, 4))
	recs := []Record{randRecord(r, fuzzDim), randRecord(r, fuzzDim), randRecord(r, fuzzDim),
		{Op: OpSetKey, IDs: []uint64{5}, Keys: []string{"five"}}, {Op: OpDelete, IDs: []uint64{5, 6}},
		{Op: OpUpsertKeys, IDs: []uint64{8, 9}, Rows: randFloats(r, 2*fuzzDim), Keys: []string{"eight", ""}},
		{Op: OpUpsert, IDs: []uint64{8}, Rows: randFloats(r, fuzzDim)}, {Op: OpUpsert, IDs: []uint64{8}, Rows: randFloats(r, fuzzDim)}}
	valid := encodeLog(fuzzDim, fuzzGen, recs)
	torn := valid[:len(valid)-3]
	corrupt := bytes.Clone(valid)
	corrupt[logHeaderLen+frameLen+1] ^= 0x40
	stale := encodeLog(fuzzDim, fuzzGen+1, recs[:2])
	// The last two records are upserts of one length: the second-to-last
	// copied over the last, every checksum holding.
	ends := recordEnds(fuzzDim, fuzzGen, recs)
	n := len(recs)
	duplicated := bytes.Clone(valid)
	copy(duplicated[ends[n-2]:], valid[ends[n-3]:ends[n-2]])
	// The same records under another generation's header.
	otherGen := append(encodeLogHeader(fuzzDim, fuzzGen), encodeLog(fuzzDim, fuzzGen^0xff00, recs)[logHeaderLen:]...)
	// Version 1, as the version-1 writer wrote it (the fixture, under the
	// fuzz dimension and generation: same layout).
	v1, err := os.ReadFile(v1FixturePath)
	require.NoError(t, err)
	v1 = bytes.Clone(v1)
	binary.LittleEndian.PutUint64(v1[16:], fuzzGen)
	resealLog(v1)
	// Op 6: one write record of every flag combination, small entries.
	var writes []Record
	for flags := range byte(16) {
		rec := Record{Op: OpWrite, IDs: []uint64{uint64(flags) + 1}, Rows: randFloats(r, fuzzDim), Upsert: flags&writeUpsert != 0}
		if flags&writeKeys != 0 {
			rec.Keys = []string{"k"}
		}
		if flags&writeMeta != 0 {
			rec.Meta = [][]byte{{flags}}
		}
		if flags&writePayloads != 0 {
			rec.Payloads = [][]byte{nil}
		}
		writes = append(writes, rec)
	}
	seeds := [][]byte{valid, torn, corrupt, stale, encodeLog(fuzzDim, fuzzGen, nil), duplicated, otherGen, v1, v1[:len(v1)-5],
		encodeLog(fuzzDim, fuzzGen, writes)}
	// And a frame, checksums holding, around each malformed write payload.
	return append(seeds, malformedWriteLogs()...)
}

// resealBase recomputes the checksums of whatever sections the table
// places inside b, then the header's: with reseal set, the fuzzer gets past
// the CRCs to the checks behind them.
func resealBase(b []byte) {
	if len(b) < 12 {
		return
	}
	le := binary.LittleEndian
	v := le.Uint32(b[8:])
	hl := headerLenOf(v)
	if len(b) < hl {
		return
	}
	for i := range sectionsOf(v) {
		o := 56 + 24*i
		off, n := le.Uint64(b[o+8:]), le.Uint64(b[o+16:])
		if off <= uint64(len(b)) && n <= uint64(len(b))-off {
			le.PutUint32(b[o+4:], crc32.Checksum(b[off:off+n], castagnoli))
		}
	}
	le.PutUint32(b[hl-4:], crc32.Checksum(b[:hl-4], castagnoli))
}

// resealLog recomputes the header CRC and every frame's CRCs it can reach
// (and, in a version-2 log, its position tag), in the layout the header's
// version gives.
func resealLog(b []byte) {
	if len(b) < logHeaderLen {
		return
	}
	le := binary.LittleEndian
	le.PutUint32(b[logHeaderLen-4:], crc32.Checksum(b[:logHeaderLen-4], castagnoli))
	version, gen := le.Uint32(b[8:]), le.Uint64(b[16:])
	fl := frameLenOf(version)
	for pos := logHeaderLen; pos+fl <= len(b); {
		f := b[pos:]
		if version >= 2 {
			le.PutUint64(f[12:], positionTag(int64(pos), gen))
		}
		le.PutUint32(f[fl-8:], crc32.Checksum(f[:fl-8], castagnoli))
		n := int(le.Uint32(f))
		if n > len(f)-fl {
			return
		}
		le.PutUint32(f[fl-4:], crc32.Checksum(f[fl:fl+n], castagnoli))
		pos += fl + n
	}
}

// FuzzReadBase: readBase never panics, fails only with a named error, and
// anything it accepts is canonical: re-encoding the snapshot under the same
// generation reproduces the input byte for byte.
func FuzzReadBase(f *testing.F) {
	for _, s := range baseSeeds(f) {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, reseal bool) {
		if reseal {
			data = bytes.Clone(data) // the fuzzer's input is not ours to edit
			resealBase(data)
		}
		s, gen, err := readBase(bytes.NewReader(data), int64(len(data)), "fuzz")
		if err != nil {
			requireNamedError(t, err)
			return
		}
		again := encodeBaseBytes(t, s, gen)
		require.Equal(t, data, again, "an accepted file re-encodes to itself")
		s2, gen2, err := readBase(bytes.NewReader(again), int64(len(again)), "fuzz")
		require.NoError(t, err)
		require.Equal(t, gen, gen2)
		requireSameSnapshot(t, s, s2)
	})
}

// FuzzReplayLog: replay never panics, fails only with a named error, and
// what it accepts re-encodes to a log that replays the same records without
// a torn tail; cutting the input where replay stopped removes the tear.
func FuzzReplayLog(f *testing.F) {
	for _, s := range logSeeds(f) {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, reseal bool) {
		if reseal {
			data = bytes.Clone(data)
			resealLog(data)
		}
		var recs []Record
		res, err := scanLog(bytes.NewReader(data), int64(len(data)), "fuzz", fuzzDim, fuzzGen, func(r Record) error {
			recs = append(recs, r)
			return nil
		})
		if err != nil {
			requireNamedError(t, err)
			return
		}
		require.Equal(t, len(recs), res.records)
		if res.stale {
			require.Empty(t, recs)
			return
		}
		require.LessOrEqual(t, res.end, int64(len(data)))
		require.Equal(t, res.torn, res.end < int64(len(data)))

		again := encodeLog(fuzzDim, fuzzGen, recs)
		var recs2 []Record
		res2, err := scanLog(bytes.NewReader(again), int64(len(again)), "fuzz", fuzzDim, fuzzGen, func(r Record) error {
			recs2 = append(recs2, r)
			return nil
		})
		require.NoError(t, err)
		require.False(t, res2.torn)
		require.Len(t, recs2, len(recs))
		for i := range recs {
			requireSameRecord(t, recs[i], recs2[i], "record %d", i)
		}

		cut := data[:res.end]
		res3, err := scanLog(bytes.NewReader(cut), int64(len(cut)), "fuzz", fuzzDim, fuzzGen, nil)
		require.NoError(t, err)
		require.False(t, res3.torn)
		require.Equal(t, res.records, res3.records)
	})
}

// TestWriteFuzzCorpus regenerates the checked-in seed corpus under
// testdata/fuzz when UMBRA_WRITE_FUZZ_CORPUS is set, so the seeds follow the
// format when it changes.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("UMBRA_WRITE_FUZZ_CORPUS") == "" {
		t.Skip("set UMBRA_WRITE_FUZZ_CORPUS=1 to rewrite testdata/fuzz")
	}
	write := func(target string, seeds [][]byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for i, s := range seeds {
			for _, reseal := range []bool{false, true} {
				body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%v)\n", s, reseal)
				name := fmt.Sprintf("seed%d-reseal-%v", i, reseal)
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
			}
		}
	}
	write("FuzzReadBase", baseSeeds(t))
	write("FuzzReplayLog", logSeeds(t))
}
