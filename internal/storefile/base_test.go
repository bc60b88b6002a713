package storefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

func TestBaseRoundTrip(t *testing.T) {
	r := testkit.Rand(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "index.umbra")
	gens := map[uint64]bool{}
	for i := range 60 {
		s := randSnapshot(r)
		gen, err := WriteBase(OS, path, s)
		require.NoError(t, err, "snapshot %d", i)
		require.NotZero(t, gen)
		require.False(t, gens[gen], "generation reused")
		gens[gen] = true
		got, gotGen, err := ReadBase(path)
		require.NoError(t, err, "snapshot %d", i)
		require.Equal(t, gen, gotGen)
		requireSameSnapshot(t, s, got, "snapshot %d", i)

		// The layout promise: rows start page-aligned, as is.
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		if littleEndianHost {
			require.True(t, bytes.Equal(floatBytes(s.Rows), raw[rowsOffset:rowsOffset+4*len(s.Rows)]))
		}
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the base file is left, no temporary files")
}

func TestWriteBaseRejectsInvalidSnapshots(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	ok := func() *Snapshot {
		return &Snapshot{Dim: 3, Stride: 4, IDs: []uint64{1, 2}, Rows: make([]float32, 8)}
	}
	for name, mutate := range map[string]func(*Snapshot){
		"zero dim":          func(s *Snapshot) { s.Dim = 0 },
		"stride below dim":  func(s *Snapshot) { s.Dim = 5 },
		"stride not vec4":   func(s *Snapshot) { s.Stride = 6; s.Rows = make([]float32, 12) },
		"rows short":        func(s *Snapshot) { s.Rows = s.Rows[:7] },
		"bitmap length":     func(s *Snapshot) { s.Deleted = []uint64{0, 0} },
		"bitmap past count": func(s *Snapshot) { s.Deleted = []uint64{1 << 2} },
	} {
		s := ok()
		mutate(s)
		_, err := WriteBase(OS, path, s)
		assert.ErrorIs(t, err, ErrInvalid, name)
	}
	s := ok()
	s.Precision = 3
	_, err := WriteBase(OS, path, s)
	assert.ErrorIs(t, err, ErrUnsupported)
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, fs.ErrNotExist, "nothing written for a bad snapshot")
}

// smallBase is a base file with every section non-empty.
func smallBase(t testing.TB) (*Snapshot, []byte) {
	s := &Snapshot{
		Dim: 3, Stride: 4, Metric: 2, NextID: 9,
		IDs:     []uint64{4, 7, 8},
		Rows:    []float32{1, 2, 3, 0, -4, 5.5, 6, 0, 7, 8, 9e9, 0},
		Deleted: []uint64{0b010},
		Keys:    map[uint64]string{4: "four", 8: "acht"},
	}
	return s, encodeBaseBytes(t, s, 0xfeedface)
}

func TestReadBaseDetectsEveryFlippedByte(t *testing.T) {
	r := testkit.Rand(t)
	for _, base := range []struct {
		make     func(testing.TB) (*Snapshot, []byte)
		sections []string
	}{
		{smallBase, []string{"header", "header padding", "rows", "ids", "tombstones", "keys"}},
		{smallBaseV2, []string{"header", "header padding", "rows", "ids", "tombstones", "keys", "meta", "payloads"}},
	} {
		s, good := base.make(t)
		v := baseVersionOf(good)
		got, gen, err := readBase(bytes.NewReader(good), int64(len(good)), "mem")
		require.NoError(t, err)
		require.Equal(t, uint64(0xfeedface), gen)
		requireSameSnapshot(t, s, got)

		sections := map[string]int{}
		for pos := range good {
			bad := bytes.Clone(good)
			bad[pos] ^= byte(1 + r.IntN(255))
			_, _, err := readBase(bytes.NewReader(bad), int64(len(bad)), "mem")
			fe := requireFormatError(t, err, nil, "version %d: flip at byte %d", v, pos)
			require.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrMagic) || errors.Is(err, ErrVersion) ||
				errors.Is(err, ErrTruncated) || errors.Is(err, ErrUnsupported), "version %d: flip at %d: %v", v, pos, err)
			sections[fe.Section]++
		}
		t.Logf("version %d: flips detected per section: %v", v, sections)
		for _, want := range base.sections {
			assert.NotZero(t, sections[want], "version %d: no flip was attributed to %s", v, want)
		}
	}
}

func TestReadBaseSampledFlipsOnLargerFiles(t *testing.T) {
	r := testkit.Rand(t)
	for range 5 {
		s := randSnapshot(r)
		good := encodeBaseBytes(t, s, 7)
		for range 200 {
			pos := r.IntN(len(good))
			bad := bytes.Clone(good)
			bad[pos] ^= byte(1 + r.IntN(255))
			_, _, err := readBase(bytes.NewReader(bad), int64(len(bad)), "mem")
			requireFormatError(t, err, nil, "flip at %d of %d", pos, len(good))
		}
	}
}

func TestReadBaseTruncatedAtEveryLength(t *testing.T) {
	_, good := smallBase(t)
	_, goodV2 := smallBaseV2(t)
	for _, b := range [][]byte{good, goodV2} {
		for l := range len(b) {
			_, _, err := readBase(bytes.NewReader(b[:l]), int64(l), "mem")
			requireFormatError(t, err, ErrTruncated, "version %d truncated to %d of %d bytes", baseVersionOf(b), l, len(b))
		}
		// Extra bytes are no better than missing ones.
		_, _, err := readBase(bytes.NewReader(append(bytes.Clone(b), 0)), int64(len(b)+1), "mem")
		fe := requireFormatError(t, err, ErrCorrupt, "version %d, trailing byte", baseVersionOf(b))
		require.Equal(t, "end of file", fe.Section)
	}
	// And through the file system, at a few lengths, with the path named.
	path := filepath.Join(t.TempDir(), "b")
	for _, l := range []int{0, 5, 100, rowsOffset, len(good) - 1} {
		require.NoError(t, os.WriteFile(path, good[:l], 0o644))
		_, _, err := ReadBase(path)
		requireFormatError(t, err, ErrTruncated, "length %d", l)
		require.Contains(t, err.Error(), path)
	}
}

// reseal recomputes the header CRC after a test edits header fields, so the
// edit reaches the checks behind the checksum.
func reseal(b []byte) {
	hl := headerLenOf(binary.LittleEndian.Uint32(b[8:]))
	binary.LittleEndian.PutUint32(b[hl-4:], crc32.Checksum(b[:hl-4], castagnoli))
}

func TestReadBaseHeaderChecks(t *testing.T) {
	_, good := smallBase(t)
	cases := []struct {
		name    string
		edit    func(b []byte)
		want    error
		section string
	}{
		{"wrong magic", func(b []byte) { copy(b, "SQLite f") }, ErrMagic, "header"},
		{"log given as base", func(b []byte) { copy(b, logMagic) }, ErrMagic, "header"},
		{"future version", func(b []byte) { binary.LittleEndian.PutUint32(b[8:], 3); reseal(b) }, ErrVersion, "header"},
		{"version 2 over a version-1 header", func(b []byte) { binary.LittleEndian.PutUint32(b[8:], 2); reseal(b) }, ErrCorrupt, "header"},
		{"unknown precision", func(b []byte) { b[25] = 3; reseal(b) }, ErrUnsupported, "header"},
		{"zero dim", func(b []byte) { binary.LittleEndian.PutUint32(b[16:], 0); reseal(b) }, ErrCorrupt, "header"},
		{"odd stride", func(b []byte) { binary.LittleEndian.PutUint32(b[20:], 5); reseal(b) }, ErrCorrupt, "header"},
		{"more rows than bytes", func(b []byte) { binary.LittleEndian.PutUint64(b[32:], 1000); reseal(b) }, ErrTruncated, "rows"},
		{"section moved", func(b []byte) { binary.LittleEndian.PutUint64(b[56+24+8:], 4096+52); reseal(b) }, ErrCorrupt, "section table"},
		{"zero generation", func(b []byte) { binary.LittleEndian.PutUint64(b[48:], 0); reseal(b) }, ErrCorrupt, "header"},
		{"tombstone past count", func(b []byte) {
			// Mark row 5 of 3 and fix the section CRC, so only the
			// range check can catch it.
			off := rowsOffset + 12*4 + 3*8
			b[off] |= 1 << 5
			binary.LittleEndian.PutUint32(b[56+2*24+4:], crc32.Checksum(b[off:off+8], castagnoli))
			reseal(b)
		}, ErrCorrupt, "tombstones"},
	}
	for _, c := range cases {
		b := bytes.Clone(good)
		c.edit(b)
		_, _, err := readBase(bytes.NewReader(b), int64(len(b)), "mem")
		fe := requireFormatError(t, err, c.want, "%s", c.name)
		assert.Equal(t, c.section, fe.Section, c.name)
	}
}

// hugeHeader is a well-sealed header claiming count rows of stride 4.
func hugeHeader(count uint64, size int) []byte {
	s := &Snapshot{Dim: 4, Stride: 4}
	rowsLen := count * 16
	table := []sectionEntry{
		{kind: sectRows, offset: rowsOffset, length: rowsLen},
		{kind: sectIDs, offset: rowsOffset + rowsLen, length: count * 8},
		{kind: sectTombstones, offset: rowsOffset + rowsLen + count*8, length: (count + 63) / 64 * 8},
		{kind: sectKeys, offset: rowsOffset + rowsLen + count*8 + (count+63)/64*8},
	}
	b := make([]byte, size)
	copy(b, encodeBaseHeader(s, baseVersion1, count, 1, table))
	return b
}

func TestLyingHeaderAllocatesNothingLarge(t *testing.T) {
	for _, c := range []struct {
		count uint64
		size  int
		want  error
	}{
		{1 << 40, 1 << 10, ErrTruncated},
		{1 << 40, 8 << 10, ErrTruncated},
		{1 << 62, 8 << 10, ErrTruncated}, // count × stride × 4 overflows
	} {
		b := hugeHeader(c.count, c.size)
		_, _, err := readBase(bytes.NewReader(b), int64(len(b)), "mem")
		requireFormatError(t, err, c.want, "count %d in %d bytes", c.count, c.size)

		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		const runs = 20
		for range runs {
			_, _, _ = readBase(bytes.NewReader(b), int64(len(b)), "mem")
		}
		runtime.ReadMemStats(&after)
		perRun := (after.TotalAlloc - before.TotalAlloc) / runs
		t.Logf("count %d in %d bytes: %d bytes allocated per read", c.count, c.size, perRun)
		require.Less(t, perRun, uint64(16<<10), "a lying header must not drive allocation")
	}
}

// TestBaseGeneration: the generation read from the header alone is the one
// WriteBase returned and ReadBase reports, changes with every write, and a
// damaged header is a format error, as for ReadBase.
func TestBaseGeneration(t *testing.T) {
	r := testkit.Rand(t)
	path := filepath.Join(t.TempDir(), "g")
	var prev uint64
	for range 3 {
		gen, err := WriteBase(OS, path, randSnapshot(r))
		require.NoError(t, err)
		got, err := BaseGeneration(path)
		require.NoError(t, err)
		require.Equal(t, gen, got)
		_, read, err := ReadBase(path)
		require.NoError(t, err)
		require.Equal(t, gen, read)
		require.NotEqual(t, prev, got, "a new base keeps the old generation")
		prev = got
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[49] ^= 1 // inside the generation field, under the header CRC
	require.NoError(t, os.WriteFile(path, b, 0o644))
	_, err = BaseGeneration(path)
	requireFormatError(t, err, ErrCorrupt, "flipped generation")
	_, err = BaseGeneration(filepath.Join(t.TempDir(), "none"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
