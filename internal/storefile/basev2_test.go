package storefile

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// smallBaseV2 is smallBase's snapshot with a schema, meta and payloads:
// a version-2 base with every section non-empty, an absent and an empty
// entry among the rows. testdata/v2 holds its encoding: changing it
// breaks TestVersion2Fixtures.
func smallBaseV2(t testing.TB) (*Snapshot, []byte) {
	s, _ := smallBase(t)
	s.Schema = []byte("schema: color string, n int")
	s.Meta = [][]byte{[]byte("\x01red"), nil, []byte("\x02\x00\x00\x00\x07")}
	s.Payloads = [][]byte{nil, []byte(`{"title":"seven"}`), {}}
	return s, encodeBaseBytes(t, s, 0xfeedface)
}

func baseVersionOf(b []byte) uint32 { return binary.LittleEndian.Uint32(b[8:]) }

// TestBaseVersionFollowsContent: a snapshot is written as version 2 exactly
// when it has a schema or some row's meta or payload bytes; one whose
// entries are all empty (nil or not) is written byte for byte as the same
// snapshot without them, in version 1.
func TestBaseVersionFollowsContent(t *testing.T) {
	r := testkit.Rand(t)
	versions := map[uint32]int{}
	for i := range 100 {
		s := randSnapshot(r)
		b := encodeBaseBytes(t, s, 5)
		want := uint32(1)
		if len(s.Schema) > 0 || anyBytes(s.Meta) || anyBytes(s.Payloads) {
			want = 2
		}
		require.Equal(t, want, baseVersionOf(b), "snapshot %d", i)
		versions[want]++
		got, _, err := readBase(bytes.NewReader(b), int64(len(b)), "mem")
		require.NoError(t, err, "snapshot %d", i)
		requireSameSnapshot(t, s, got, "snapshot %d", i)

		// Stripped of everything it holds besides rows, IDs, tombstones
		// and keys, it is the same bytes whether the empty parts are nil
		// or lists of empty entries.
		bare := *s
		bare.Schema, bare.Meta, bare.Payloads = nil, nil, nil
		v1 := encodeBaseBytes(t, &bare, 5)
		require.Equal(t, uint32(1), baseVersionOf(v1))
		empty := bare
		empty.Schema, empty.Meta, empty.Payloads = []byte{}, make([][]byte, len(s.IDs)), make([][]byte, len(s.IDs))
		for j := range empty.Payloads {
			empty.Payloads[j] = []byte{}
		}
		require.Equal(t, v1, encodeBaseBytes(t, &empty, 5), "snapshot %d with empty parts", i)
	}
	t.Logf("bases by version: %v", versions)
	require.NotZero(t, versions[1])
	require.NotZero(t, versions[2])
}

// TestBaseV2Layout: the header is 204 bytes with a table of six
// sections, contiguous, the last ending the file; the meta section is the
// schema then one entry per row, the payloads section one entry per row;
// and a schema without any row's meta reads back as the schema and no
// meta.
func TestBaseV2Layout(t *testing.T) {
	s, b := smallBaseV2(t)
	le := binary.LittleEndian
	require.Equal(t, uint32(2), le.Uint32(b[8:]))
	require.Equal(t, uint32(204), le.Uint32(b[12:]))
	require.Equal(t, uint32(6), le.Uint32(b[28:]))
	var end uint64 = rowsOffset
	var sects [6][]byte
	for i := range 6 {
		o := 56 + 24*i
		require.Equal(t, uint32(i+1), le.Uint32(b[o:]))
		off, n := le.Uint64(b[o+8:]), le.Uint64(b[o+16:])
		require.Equal(t, end, off, "section %d", i+1)
		sects[i] = b[off : off+n]
		end = off + n
	}
	require.Equal(t, uint64(len(b)), end)
	entries := func(p []byte, parts ...[]byte) []byte {
		for _, x := range parts {
			p = le.AppendUint32(p, uint32(len(x)))
			p = append(p, x...)
		}
		return p
	}
	require.Equal(t, entries(nil, append([][]byte{s.Schema}, s.Meta...)...), sects[4])
	require.Equal(t, entries(nil, s.Payloads...), sects[5])

	schemaOnly := &Snapshot{Dim: 2, Stride: 4, IDs: []uint64{1, 2}, Rows: make([]float32, 8), Schema: []byte("s"), Meta: [][]byte{nil, {}}}
	b = encodeBaseBytes(t, schemaOnly, 9)
	require.Equal(t, uint32(2), baseVersionOf(b))
	got, _, err := readBase(bytes.NewReader(b), int64(len(b)), "mem")
	require.NoError(t, err)
	require.Equal(t, []byte("s"), got.Schema)
	require.Nil(t, got.Meta)
	require.Nil(t, got.Payloads)
	requireSameSnapshot(t, schemaOnly, got)
}

func TestWriteBaseRejectsBadMetaAndPayloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	for name, mutate := range map[string]func(*Snapshot){
		"meta short":         func(s *Snapshot) { s.Meta = [][]byte{[]byte("a")} },
		"meta long":          func(s *Snapshot) { s.Meta = make([][]byte, 3) },
		"meta empty, 2 rows": func(s *Snapshot) { s.Meta = [][]byte{} },
		"payloads short":     func(s *Snapshot) { s.Payloads = [][]byte{nil} },
		"payloads long":      func(s *Snapshot) { s.Payloads = [][]byte{nil, nil, []byte("x")} },
	} {
		s := &Snapshot{Dim: 3, Stride: 4, IDs: []uint64{1, 2}, Rows: make([]float32, 8), Schema: []byte("s")}
		mutate(s)
		_, err := WriteBase(OS, path, s)
		assert.ErrorIs(t, err, ErrInvalid, name)
	}
	_, err := os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing written for a bad snapshot")
}

// withEntrySections returns the version-2 base good with its meta and
// payloads sections replaced by the bytes given, the table and every
// checksum made to match: only the checks of the sections' contents can
// object.
func withEntrySections(good, meta, payloads []byte) []byte {
	le := binary.LittleEndian
	keysEnd := le.Uint64(good[56+24*3+8:]) + le.Uint64(good[56+24*3+16:])
	b := append(append(bytes.Clone(good[:keysEnd]), meta...), payloads...)
	le.PutUint64(b[56+24*4+8:], keysEnd)
	le.PutUint64(b[56+24*4+16:], uint64(len(meta)))
	le.PutUint64(b[56+24*5+8:], keysEnd+uint64(len(meta)))
	le.PutUint64(b[56+24*5+16:], uint64(len(payloads)))
	resealBase(b)
	return b
}

func lens(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case uint32:
			b = binary.LittleEndian.AppendUint32(b, p)
		case string:
			b = append(b, p...)
		}
	}
	return b
}

// TestReadBaseV2LyingSections: meta and payloads sections whose checksums
// hold but whose lengths lie, or that are not what a writer writes, are
// ErrCorrupt naming the section and, for an entry, the row; a table that
// declares more than the file holds is ErrTruncated, allocating nothing.
func TestReadBaseV2LyingSections(t *testing.T) {
	_, good := smallBaseV2(t)
	okMeta := lens(uint32(1), "s", uint32(0), uint32(2), "m1", uint32(0))
	okPay := lens(uint32(0), uint32(0), uint32(1), "p")
	{
		b := withEntrySections(good, okMeta, okPay)
		s, _, err := readBase(bytes.NewReader(b), int64(len(b)), "mem")
		require.NoError(t, err, "the well-formed variant reads")
		require.Equal(t, []byte("s"), s.Schema)
		require.Equal(t, [][]byte{nil, []byte("m1"), nil}, s.Meta)
		require.Equal(t, [][]byte{nil, nil, []byte("p")}, s.Payloads)
	}
	for _, c := range []struct {
		name           string
		meta, payloads []byte
		section, says  string
	}{
		{"schema longer than the section", lens(uint32(1000), "s", uint32(0), uint32(0), uint32(0)), okPay, "meta", "schema claims 1000 bytes"},
		{"schema length cut", lens(uint32(0))[:3], okPay, "meta", "schema: 3 bytes left"},
		{"row 1's meta longer than the section", lens(uint32(1), "s", uint32(0), uint32(1<<20), "m1", uint32(0)), okPay, "meta", "meta of row 1 (ID 7) claims 1048576 bytes"},
		{"row 2's payload longer than the section", okMeta, lens(uint32(0), uint32(0), uint32(2), "p"), "payloads", "payloads of row 2 (ID 8) claims 2 bytes"},
		{"meta lengths for fewer rows", lens(uint32(1), "s", uint32(0), uint32(0)), okPay, "meta", "3 rows need at least 12 bytes"},
		{"payload lengths for fewer rows", okMeta, lens(uint32(0), uint32(1), "p"), "payloads", "3 rows need at least 12 bytes"},
		{"a byte after the last meta entry", append(bytes.Clone(okMeta), 0), okPay, "meta", "1 bytes after the last row's entry"},
		{"bytes after the last payload", okMeta, append(bytes.Clone(okPay), 'x', 'y'), "payloads", "2 bytes after the last row's entry"},
		{"meta section of empty entries only", lens(uint32(0), uint32(0), uint32(0), uint32(0)), okPay, "meta", "only empty entries"},
		{"payloads section of empty entries only", okMeta, lens(uint32(0), uint32(0), uint32(0)), "payloads", "only empty entries"},
		{"version 2 with neither section", nil, nil, "section table", "neither a meta nor a payloads section"},
	} {
		b := withEntrySections(good, c.meta, c.payloads)
		_, _, err := readBase(bytes.NewReader(b), int64(len(b)), "mem")
		fe := requireFormatError(t, err, ErrCorrupt, "%s", c.name)
		assert.Equal(t, c.section, fe.Section, c.name)
		assert.Contains(t, fe.Detail, c.says, c.name)
	}

	// Table entries that disagree with the file.
	le := binary.LittleEndian
	metaLen := le.Uint64(good[56+24*4+16:])
	for _, c := range []struct {
		name    string
		edit    func(b []byte)
		want    error
		section string
	}{
		{"meta longer than the file", func(b []byte) { le.PutUint64(b[56+24*4+16:], 1<<40) }, ErrTruncated, "meta"},
		{"payloads longer than the file", func(b []byte) { le.PutUint64(b[56+24*5+16:], 1<<40) }, ErrTruncated, "payloads"},
		{"meta grown, payloads not moved", func(b []byte) { le.PutUint64(b[56+24*4+16:], metaLen+1) }, ErrCorrupt, "section table"},
		{"payloads not after meta", func(b []byte) { le.PutUint64(b[56+24*5+8:], le.Uint64(b[56+24*5+8:])-1) }, ErrCorrupt, "section table"},
		{"meta kind", func(b []byte) { le.PutUint32(b[56+24*4:], sectPayloads) }, ErrCorrupt, "section table"},
		{"section count 4 in version 2", func(b []byte) { le.PutUint32(b[28:], 4) }, ErrCorrupt, "header"},
		{"version 1 over a version-2 header", func(b []byte) { le.PutUint32(b[8:], 1) }, ErrCorrupt, "header"},
	} {
		b := bytes.Clone(good)
		c.edit(b)
		reseal(b)
		_, _, err := readBase(bytes.NewReader(b), int64(len(b)), "mem")
		fe := requireFormatError(t, err, c.want, "%s", c.name)
		assert.Equal(t, c.section, fe.Section, c.name)
	}

	// A version-2 header claiming a huge meta section in a small file
	// costs a page, not the claim.
	b := bytes.Clone(good)
	le.PutUint64(b[56+24*4+16:], 1<<40)
	reseal(b)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const runs = 20
	for range runs {
		_, _, _ = readBase(bytes.NewReader(b), int64(len(b)), "mem")
	}
	runtime.ReadMemStats(&after)
	perRun := (after.TotalAlloc - before.TotalAlloc) / runs
	require.Less(t, perRun, uint64(16<<10), "a lying meta length must not drive allocation")
}

// TestMapBaseVersion2: MapBase reads the meta and payloads of a version-2
// base as ReadBase does, its rows mapped.
func TestMapBaseVersion2(t *testing.T) {
	s, _ := smallBaseV2(t)
	path := filepath.Join(t.TempDir(), "m")
	gen, err := WriteBase(OS, path, s)
	require.NoError(t, err)
	m, err := MapBase(path)
	require.NoError(t, err)
	defer m.Close()
	require.Equal(t, gen, m.Generation)
	require.Equal(t, canMap && littleEndianHost, m.Mapped())
	requireSameSnapshot(t, s, m.Snapshot)
}
