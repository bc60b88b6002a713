package storefile

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"os"
	"slices"
	"unsafe"
)

// Base file layout constants; FORMAT.md is the prose version.
const (
	baseMagic = "UMBRASTR"
	// Version 1 has the sections rows, ids, tombstones, keys; version 2
	// adds meta and payloads. A writer writes version 1 whenever the
	// snapshot has no schema, meta or payloads, so stores that do not use
	// them stay byte-identical and readable by builds that know only 1.
	baseVersion1 = 1
	baseVersion2 = 2
	rowsOffset   = 4096 // the rows section starts page-aligned, for mmap
	maxSections  = 6    // in version 2

	// Storage precisions: the precision an index's searches scan. The rows
	// section holds IEEE-754 binary32 rows, little-endian, under every
	// precision; a compressed precision's copy is derived from them when
	// the store opens. Codes past PrecisionInt8 are reserved and rejected
	// with ErrUnsupported (as readers before these codes reject 1 and 2).
	PrecisionFloat32 uint8 = 0
	PrecisionFloat16 uint8 = 1
	PrecisionInt8    uint8 = 2
)

// Section kinds, in the order they appear in the table and in the file.
const (
	sectRows       = 1
	sectIDs        = 2
	sectTombstones = 3
	sectKeys       = 4
	sectMeta       = 5 // version 2
	sectPayloads   = 6 // version 2
)

var sectionNames = [...]string{sectRows: "rows", sectIDs: "ids", sectTombstones: "tombstones", sectKeys: "keys",
	sectMeta: "meta", sectPayloads: "payloads"}

// sectionsOf is the number of sections of a base of version v, and
// headerLenOf the bytes its header's CRC covers, plus the CRC: the fixed
// fields (56 bytes), the section table, the CRC.
func sectionsOf(v uint32) int {
	if v == baseVersion1 {
		return 4
	}
	return maxSections
}

func headerLenOf(v uint32) int { return 56 + 24*sectionsOf(v) + 4 }

// Snapshot is one checkpoint of an index, everything the engine needs to
// rebuild it: the packed rows exactly as the device buffer holds them, the
// caller's ID of each row, which rows are deleted but not yet compacted, and
// the string keys that name IDs.
type Snapshot struct {
	Dim    int // meaningful float32 values per row, at least 1
	Stride int // float32 values per row in Rows: a multiple of 4, at least Dim

	// Metric is the engine's code for the distance; stored, never
	// interpreted. Precision is one of the Precision codes above.
	Metric, Precision uint8

	NextID uint64 // the next automatically assigned ID

	IDs  []uint64  // IDs[i] is the caller's ID of row i
	Rows []float32 // len(IDs)*Stride values, row i at [i*Stride, (i+1)*Stride)

	// Deleted is a bitmap over rows: bit i%64 of Deleted[i/64] set means
	// row i is deleted. nil means no row is; otherwise it has exactly
	// (len(IDs)+63)/64 words and no bit at or beyond len(IDs) is set.
	// ReadBase always returns the full-length form (nil for 0 rows).
	Deleted []uint64

	// Keys maps an ID to its string key. Nothing requires the ID to be in
	// IDs or the strings to be distinct; that is the engine's rule to keep.
	// ReadBase returns nil when there are none.
	Keys map[uint64]string

	// Schema is one opaque blob (the engine's metadata schema); nil or
	// empty means none.
	Schema []byte
	// Meta and Payloads hold opaque per-row bytes (the engine's encoded
	// metadata; the caller's payload): each is nil, meaning no row has any,
	// or has exactly len(IDs) entries, entry i being row i's bytes, nil or
	// empty for none. ReadBase returns nil for each that no row has, and
	// nil for an empty entry; the entries it returns share one buffer per
	// section, each with its capacity cut to its length.
	Meta, Payloads [][]byte

	// Verify, when set, is called by a writer after the rows have gone to
	// the new file and before the file is committed; an error abandons the
	// write. An index whose rows alias a mapping uses it to make sure the
	// mapped file did not change while its rows were being copied.
	Verify func() error
}

// Len returns the row count.
func (s *Snapshot) Len() int { return len(s.IDs) }

// IsDeleted reports whether row i is marked deleted.
func (s *Snapshot) IsDeleted(i int) bool {
	w := i / 64
	return w < len(s.Deleted) && s.Deleted[w]&(1<<(i%64)) != 0
}

func (s *Snapshot) validate() error {
	n := len(s.IDs)
	switch {
	case s.Dim < 1 || uint64(s.Dim) > math.MaxUint32:
		return fmt.Errorf("%w: snapshot dim %d is not in [1, 2^32)", ErrInvalid, s.Dim)
	case s.Stride < s.Dim || s.Stride%4 != 0 || uint64(s.Stride) > math.MaxUint32:
		return fmt.Errorf("%w: snapshot stride %d must be a multiple of 4, at least dim %d", ErrInvalid, s.Stride, s.Dim)
	case s.Precision > PrecisionInt8:
		return fmt.Errorf("%w: storage precision %d (this build knows 0 float32, 1 float16, 2 int8)", ErrUnsupported, s.Precision)
	}
	if hi, lo := bits.Mul64(uint64(n), uint64(s.Stride)); hi != 0 || lo != uint64(len(s.Rows)) {
		return fmt.Errorf("%w: snapshot has %d rows values, want %d IDs × stride %d", ErrInvalid, len(s.Rows), n, s.Stride)
	}
	if s.Deleted != nil {
		if len(s.Deleted) != (n+63)/64 {
			return fmt.Errorf("%w: snapshot tombstone bitmap has %d words, want %d for %d rows", ErrInvalid, len(s.Deleted), (n+63)/64, n)
		}
		if n%64 != 0 && s.Deleted[len(s.Deleted)-1]>>(n%64) != 0 {
			return fmt.Errorf("%w: snapshot tombstone bitmap marks rows at or beyond row count %d", ErrInvalid, n)
		}
	}
	for id, k := range s.Keys {
		if uint64(len(k)) > math.MaxUint32 {
			return fmt.Errorf("%w: key of ID %d is %d bytes, over 2^32-1", ErrInvalid, id, len(k))
		}
	}
	if uint64(len(s.Schema)) > math.MaxUint32 {
		return fmt.Errorf("%w: snapshot schema is %d bytes, over 2^32-1", ErrInvalid, len(s.Schema))
	}
	for _, e := range []struct {
		what    string
		entries [][]byte
	}{{"meta", s.Meta}, {"payloads", s.Payloads}} {
		if e.entries == nil {
			continue
		}
		if len(e.entries) != n {
			return fmt.Errorf("%w: snapshot has %d %s entries for %d rows; want none (nil) or one per row", ErrInvalid, len(e.entries), e.what, n)
		}
		for i, b := range e.entries {
			if uint64(len(b)) > math.MaxUint32 {
				return fmt.Errorf("%w: %s of row %d (ID %d) is %d bytes, over 2^32-1", ErrInvalid, e.what, i, s.IDs[i], len(b))
			}
		}
	}
	return nil
}

// anyBytes reports whether some entry is non-empty.
func anyBytes(entries [][]byte) bool {
	for _, b := range entries {
		if len(b) > 0 {
			return true
		}
	}
	return false
}

// sectionEntry is one row of the header's section table.
type sectionEntry struct {
	kind   uint32
	crc    uint32
	offset uint64
	length uint64
}

// newGeneration returns a random, non-zero generation: two bases of one
// store never share one, so a log names the base it extends without a
// counter that would have to be read back first.
func newGeneration() uint64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:])
		if g := binary.LittleEndian.Uint64(b[:]); g != 0 {
			return g
		}
	}
}

// WriteBase atomically replaces the base file at path with s and returns
// the new base's generation, through fsys. After a crash, path holds either the previous
// file or all of the new one. It does not touch the log: use Checkpoint to
// fold a log into a new base.
func WriteBase(fsys FS, path string, s *Snapshot) (generation uint64, err error) {
	if err := s.validate(); err != nil {
		return 0, err
	}
	gen := newGeneration()
	err = WriteFile(fsys, path, 0o644, func(w *bufio.Writer) error {
		if err := encodeBase(w, s, gen); err != nil {
			return fmt.Errorf("write base %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return gen, nil
}

// encodeBase writes a validated snapshot as a base file of the given
// generation. Checksums are computed in a first pass over s, so the rows go
// to w straight from s.Rows.
func encodeBase(w io.Writer, s *Snapshot, gen uint64) error {
	n := uint64(len(s.IDs))
	keys := encodeKeys(s.Keys)
	tombs := s.Deleted
	if tombs == nil {
		tombs = make([]uint64, (n+63)/64)
	}
	// The meta and payloads sections exist (version 2) only when they hold
	// a byte other than their lengths; an absent one has length 0.
	meta := entrySection{schema: s.Schema, withSchema: true, entries: s.Meta, n: int(n)}
	payloads := entrySection{entries: s.Payloads, n: int(n)}
	hasMeta, hasPayloads := len(s.Schema) > 0 || anyBytes(s.Meta), anyBytes(s.Payloads)
	version := uint32(baseVersion1)
	if hasMeta || hasPayloads {
		version = baseVersion2
	}
	rowsLen := uint64(len(s.Rows)) * 4
	table := []sectionEntry{
		{kind: sectRows, offset: rowsOffset, length: rowsLen, crc: crcFloats(s.Rows)},
		{kind: sectIDs, offset: rowsOffset + rowsLen, length: n * 8, crc: crcU64s(s.IDs)},
		{kind: sectTombstones, offset: rowsOffset + rowsLen + n*8, length: uint64(len(tombs)) * 8, crc: crcU64s(tombs)},
		{kind: sectKeys, length: uint64(len(keys)), crc: crc32.Checksum(keys, castagnoli)},
	}
	if version == baseVersion2 {
		table = append(table, sectionEntry{kind: sectMeta}, sectionEntry{kind: sectPayloads})
		if hasMeta {
			table[4].length, table[4].crc = meta.size(), meta.crc()
		}
		if hasPayloads {
			table[5].length, table[5].crc = payloads.size(), payloads.crc()
		}
	}
	for i := 3; i < len(table); i++ {
		table[i].offset = table[i-1].offset + table[i-1].length
	}
	hdr := encodeBaseHeader(s, version, n, gen, table)

	var werr error
	put := func(b []byte) {
		if werr == nil {
			_, werr = w.Write(b)
		}
	}
	put(hdr)
	put(make([]byte, rowsOffset-len(hdr)))
	if littleEndianHost {
		put(floatBytes(s.Rows))
	} else {
		for c := range slices.Chunk(s.Rows, 1<<14) {
			put(appendFloatsLE(nil, c))
		}
	}
	if werr == nil && s.Verify != nil {
		werr = s.Verify()
	}
	for _, u := range [][]uint64{s.IDs, tombs} {
		for c := range slices.Chunk(u, 1<<13) {
			put(appendU64sLE(nil, c))
		}
	}
	put(keys)
	if hasMeta {
		meta.chunks(put)
	}
	if hasPayloads {
		payloads.chunks(put)
	}
	return werr
}

// encodeBaseHeader encodes the header of a base of version whose section
// table (of sectionsOf(version) entries) is table.
func encodeBaseHeader(s *Snapshot, version uint32, n, gen uint64, table []sectionEntry) []byte {
	hl := headerLenOf(version)
	h := make([]byte, 0, hl)
	h = append(h, baseMagic...)
	h = binary.LittleEndian.AppendUint32(h, version)
	h = binary.LittleEndian.AppendUint32(h, uint32(hl))
	h = binary.LittleEndian.AppendUint32(h, uint32(s.Dim))
	h = binary.LittleEndian.AppendUint32(h, uint32(s.Stride))
	h = append(h, s.Metric, s.Precision, 0, 0)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(table)))
	h = binary.LittleEndian.AppendUint64(h, n)
	h = binary.LittleEndian.AppendUint64(h, s.NextID)
	h = binary.LittleEndian.AppendUint64(h, gen)
	for _, e := range table {
		h = binary.LittleEndian.AppendUint32(h, e.kind)
		h = binary.LittleEndian.AppendUint32(h, e.crc)
		h = binary.LittleEndian.AppendUint64(h, e.offset)
		h = binary.LittleEndian.AppendUint64(h, e.length)
	}
	return binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, castagnoli))
}

// entrySection is a meta or payloads section: (the schema, for meta) then
// one entry per row, each as len u32 and its bytes. entries is nil (every
// row's entry empty) or has n entries.
type entrySection struct {
	schema     []byte
	withSchema bool
	entries    [][]byte
	n          int
}

func (e *entrySection) size() uint64 {
	size := 4 * uint64(e.n)
	if e.withSchema {
		size += 4 + uint64(len(e.schema))
	}
	for _, b := range e.entries {
		size += uint64(len(b))
	}
	return size
}

func (e *entrySection) crc() uint32 {
	var c uint32
	e.chunks(func(b []byte) { c = crc32.Update(c, castagnoli, b) })
	return c
}

// chunks hands the section's bytes to fn in order, in pieces: small
// entries gathered with their lengths into one reused buffer, large ones
// straight from the snapshot, never the whole section in one copy.
func (e *entrySection) chunks(fn func([]byte)) {
	const flushAt, direct = 32 << 10, 4 << 10
	buf := make([]byte, 0, flushAt+direct+4)
	add := func(b []byte) {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(b)))
		if len(b) >= direct {
			fn(buf)
			buf = buf[:0]
			fn(b)
			return
		}
		if buf = append(buf, b...); len(buf) >= flushAt {
			fn(buf)
			buf = buf[:0]
		}
	}
	if e.withSchema {
		add(e.schema)
	}
	for i := range e.n {
		if e.entries != nil {
			add(e.entries[i])
		} else {
			add(nil)
		}
	}
	if len(buf) > 0 {
		fn(buf)
	}
}

// encodeKeys lays keys out sorted by ID, so one snapshot always encodes to
// the same bytes and a reader can reject duplicates by order alone.
func encodeKeys(keys map[uint64]string) []byte {
	ids := make([]uint64, 0, len(keys))
	size := 0
	for id, k := range keys {
		ids = append(ids, id)
		size += 12 + len(k)
	}
	slices.SortFunc(ids, cmp.Compare)
	b := make([]byte, 0, size)
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint64(b, id)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(keys[id])))
		b = append(b, keys[id]...)
	}
	return b
}

func appendU64sLE(dst []byte, us []uint64) []byte {
	if littleEndianHost {
		return append(dst, u64Bytes(us)...)
	}
	for _, u := range us {
		dst = binary.LittleEndian.AppendUint64(dst, u)
	}
	return dst
}

func u64Bytes(us []uint64) []byte {
	if len(us) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&us[0])), len(us)*8)
}

func fixU64sFromLE(us []uint64) {
	if littleEndianHost {
		return
	}
	b := u64Bytes(us)
	for i := range us {
		us[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
}

func crcFloats(fs []float32) uint32 {
	if littleEndianHost {
		return crc32.Checksum(floatBytes(fs), castagnoli)
	}
	var c uint32
	for ch := range slices.Chunk(fs, 1<<14) {
		c = crc32.Update(c, castagnoli, appendFloatsLE(nil, ch))
	}
	return c
}

func crcU64s(us []uint64) uint32 {
	if littleEndianHost {
		return crc32.Checksum(u64Bytes(us), castagnoli)
	}
	var c uint32
	for ch := range slices.Chunk(us, 1<<13) {
		c = crc32.Update(c, castagnoli, appendU64sLE(nil, ch))
	}
	return c
}

// ReadBase reads and verifies the base file at path. Every size in the
// header is checked against the file's real size before anything is
// allocated, and every section's checksum is verified; damage is reported
// as a *FormatError naming the section. The rows are read straight into the
// returned slice, never through a second buffer.
func ReadBase(path string) (*Snapshot, uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("read base: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("read base: %w", err)
	}
	return readBase(f, st.Size(), path)
}

// BaseGeneration returns the generation of the base file at path, from its
// header alone (checked as ReadBase checks it; the sections are not read).
// A reader compares it with what ReadBase returned to learn whether a
// checkpoint replaced the file meanwhile.
func BaseGeneration(path string) (uint64, error) {
	h, err := PeekBase(path)
	return h.Generation, err
}

// BaseHeader is what a base file's header declares.
type BaseHeader struct {
	Dim, Stride       int
	Metric, Precision uint8
	Count, NextID     uint64
	Generation        uint64
}

// PeekBase reads and checks the header of the base file at path (as
// ReadBase checks it, sizes against the file's; the sections are not
// read): enough to decide how to open the rest.
func PeekBase(path string) (BaseHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return BaseHeader{}, fmt.Errorf("read base: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return BaseHeader{}, fmt.Errorf("read base: %w", err)
	}
	h, err := readBaseHeader(f, st.Size(), path)
	if err != nil {
		return BaseHeader{}, err
	}
	return BaseHeader{Dim: int(h.dim), Stride: int(h.stride), Metric: h.metric, Precision: h.precision,
		Count: h.count, NextID: h.nextID, Generation: h.generation}, nil
}

// baseHeader is the decoded, validated fixed header of a base file.
type baseHeader struct {
	version           uint32
	dim, stride       uint32
	metric, precision uint8
	count, nextID     uint64
	generation        uint64
	sections          int                       // sectionsOf(version)
	table             [maxSections]sectionEntry // the first sections entries
}

// readBaseHeader reads and validates the header, the padding and the
// section table against size. It allocates only the first page.
func readBaseHeader(r io.ReaderAt, size int64, name string) (*baseHeader, error) {
	bad := func(sentinel error, format string, args ...any) error {
		return formatErr(name, "header", 0, sentinel, format, args...)
	}
	first := make([]byte, min(size, rowsOffset))
	if _, err := r.ReadAt(first, 0); err != nil && !(errors.Is(err, io.EOF) && len(first) > 0) {
		return nil, bad(ErrTruncated, "reading header: %v", err)
	}
	if m := min(len(first), len(baseMagic)); !bytes.Equal(first[:m], []byte(baseMagic)[:m]) {
		return nil, bad(ErrMagic, "file starts with %q, want %q", first[:m], baseMagic)
	}
	if len(first) < 12 {
		return nil, bad(ErrTruncated, "file is %d bytes, shorter than any header (%d bytes at least)", size, headerLenOf(baseVersion1))
	}
	le := binary.LittleEndian
	v := le.Uint32(first[8:])
	if v != baseVersion1 && v != baseVersion2 {
		return nil, bad(ErrVersion, "format version %d, this reader knows %d and %d", v, baseVersion1, baseVersion2)
	}
	hl := headerLenOf(v)
	if len(first) < hl {
		return nil, bad(ErrTruncated, "file is %d bytes, shorter than the %d-byte header of version %d", size, hl, v)
	}
	if got, want := crc32.Checksum(first[:hl-4], castagnoli), le.Uint32(first[hl-4:]); got != want {
		return nil, bad(ErrCorrupt, "header CRC-32C is %08x, stored %08x", got, want)
	}
	h := &baseHeader{
		version: v, dim: le.Uint32(first[16:]), stride: le.Uint32(first[20:]),
		metric: first[24], precision: first[25],
		count: le.Uint64(first[32:]), nextID: le.Uint64(first[40:]), generation: le.Uint64(first[48:]),
		sections: sectionsOf(v),
	}
	switch {
	case le.Uint32(first[12:]) != uint32(hl):
		return nil, bad(ErrCorrupt, "header length field %d, want %d for version %d", le.Uint32(first[12:]), hl, v)
	case h.dim == 0 || h.stride < h.dim || h.stride%4 != 0:
		return nil, bad(ErrCorrupt, "dim %d / stride %d: stride must be a multiple of 4, at least dim ≥ 1", h.dim, h.stride)
	case first[26] != 0 || first[27] != 0:
		return nil, bad(ErrCorrupt, "reserved bytes are %d %d, want 0", first[26], first[27])
	case le.Uint32(first[28:]) != uint32(h.sections):
		return nil, bad(ErrCorrupt, "%d sections, want %d for version %d", le.Uint32(first[28:]), h.sections, v)
	case h.generation == 0:
		return nil, bad(ErrCorrupt, "generation 0 is never written")
	case h.precision > PrecisionInt8:
		return nil, bad(ErrUnsupported, "storage precision %d, this reader knows 0 (float32), 1 (float16) and 2 (int8)", h.precision)
	}

	// The section table must be exactly the layout a writer produces, with
	// sizes derived from count and stride, and every section must lie in
	// the file: only then may its length decide an allocation. The
	// sections from keys on have free sizes; each starts where the one
	// before it ends, and the last ends the file.
	rowsLen, ok := mulNoOverflow(h.count, uint64(h.stride), 4)
	idsLen, ok2 := mulNoOverflow(h.count, 8, 1)
	tombLen := (h.count/64 + boolU64(h.count%64 != 0)) * 8
	want := [maxSections]struct{ off, length uint64 }{
		{rowsOffset, rowsLen}, {rowsOffset + rowsLen, idsLen}, {rowsOffset + rowsLen + idsLen, tombLen}, {rowsOffset + rowsLen + idsLen + tombLen, 0},
	}
	if size < rowsOffset {
		return nil, formatErr(name, "header padding", int64(len(first)), ErrTruncated, "file is %d bytes, the rows section starts at byte %d", size, rowsOffset)
	}
	if i := bytes.IndexFunc(first[hl:], func(r rune) bool { return r != 0 }); i >= 0 {
		return nil, formatErr(name, "header padding", int64(hl+i), ErrCorrupt, "non-zero byte in the padding before the rows section")
	}
	fileSize := uint64(size)
	for i := range h.sections {
		o := 56 + 24*i
		e := sectionEntry{kind: le.Uint32(first[o:]), crc: le.Uint32(first[o+4:]), offset: le.Uint64(first[o+8:]), length: le.Uint64(first[o+16:])}
		h.table[i] = e
		sect := sectionNames[i+1]
		if e.kind != uint32(i+1) {
			return nil, formatErr(name, "section table", int64(o), ErrCorrupt, "entry %d has kind %d, want %d (%s)", i, e.kind, i+1, sect)
		}
		if i > sectKeys-1 {
			want[i].off = want[i-1].off + want[i-1].length // ≤ fileSize: checked below for i-1
		}
		if !ok || !ok2 || want[i].off > fileSize || want[i].length > fileSize-want[i].off {
			return nil, formatErr(name, sect, int64(min(want[i].off, fileSize)), ErrTruncated,
				"header declares %d rows of stride %d, which need more than the file's %d bytes", h.count, h.stride, size)
		}
		if i >= sectKeys-1 {
			want[i].length = e.length // a free size, checked against the file
			if e.offset == want[i].off && (e.length > fileSize-e.offset) {
				return nil, formatErr(name, sect, int64(e.offset), ErrTruncated, "%d bytes declared, %d left in the file", e.length, fileSize-e.offset)
			}
		}
		if e.offset != want[i].off || e.length != want[i].length {
			return nil, formatErr(name, "section table", int64(o), ErrCorrupt, "%s section at %d+%d, layout requires %d+%d", sect, e.offset, e.length, want[i].off, want[i].length)
		}
	}
	last := h.table[h.sections-1]
	if end := last.offset + last.length; end != fileSize {
		return nil, formatErr(name, "end of file", int64(end), ErrCorrupt, "%d bytes after the last section", fileSize-end)
	}
	if v == baseVersion2 && h.table[sectMeta-1].length == 0 && h.table[sectPayloads-1].length == 0 {
		return nil, formatErr(name, "section table", int64(56+24*(sectMeta-1)), ErrCorrupt,
			"a version-2 base with neither a meta nor a payloads section (a writer writes version 1 then)")
	}
	// Only a 32-bit process can hold a file whose sections it cannot
	// address; say so instead of overflowing an int.
	for i, e := range h.table[:h.sections] {
		if e.offset+e.length > math.MaxInt {
			return nil, formatErr(name, sectionNames[i+1], int64(e.offset), ErrUnsupported,
				"section ends at byte %d, beyond this process's address space", e.offset+e.length)
		}
	}
	return h, nil
}

func boolU64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// mulNoOverflow returns a*b*c and whether it fits in 63 bits (a file
// offset).
func mulNoOverflow(a, b, c uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return 0, false
	}
	hi, lo = bits.Mul64(lo, c)
	return lo, hi == 0 && lo <= math.MaxInt64
}

func readBase(r io.ReaderAt, size int64, name string) (*Snapshot, uint64, error) {
	h, err := readBaseHeader(r, size, name)
	if err != nil {
		return nil, 0, err
	}
	rows := make([]float32, int(h.count)*int(h.stride))
	if err := readSection(r, h, name, 0, floatBytes(rows)); err != nil {
		return nil, 0, err
	}
	fixFloatsFromLE(rows)
	s, err := readBaseRest(r, h, name, rows)
	if err != nil {
		return nil, 0, err
	}
	return s, h.generation, nil
}

// readSection fills dst (a view of the destination's own memory, so
// nothing is copied twice) with section i's bytes and checks its CRC.
//
// The bytes are checksummed as they arrive (readChecked), a piece at a
// time while it is still in cache, rather than in a second pass over
// memory.
func readSection(r io.ReaderAt, h *baseHeader, name string, i int, dst []byte) error {
	e := h.table[i]
	sect := sectionNames[i+1]
	got, err := readChecked(r, int64(e.offset), dst)
	if err != nil {
		// The size was checked; the file shrank while being read.
		return formatErr(name, sect, int64(e.offset), ErrTruncated, "reading %d bytes: %v", len(dst), err)
	}
	if got != e.crc {
		return formatErr(name, sect, int64(e.offset), ErrCorrupt, "CRC-32C is %08x, section table says %08x", got, e.crc)
	}
	return nil
}

func checkSection(h *baseHeader, name string, i int, b []byte) error {
	e := h.table[i]
	got, err := checksum(b) // on every core for a large section
	if err != nil {
		return formatErr(name, sectionNames[i+1], int64(e.offset), ErrTruncated, "the mapped file shrank while it was checked: %v", err)
	}
	if got != e.crc {
		return formatErr(name, sectionNames[i+1], int64(e.offset), ErrCorrupt, "CRC-32C is %08x, section table says %08x", got, e.crc)
	}
	return nil
}

// readBaseRest reads the sections after the rows into a snapshot around
// rows, which the caller has read (or mapped) and verified.
func readBaseRest(r io.ReaderAt, h *baseHeader, name string, rows []float32) (*Snapshot, error) {
	n := int(h.count)
	s := &Snapshot{Dim: int(h.dim), Stride: int(h.stride), Metric: h.metric, Precision: h.precision, NextID: h.nextID, Rows: rows}
	s.IDs = make([]uint64, n)
	if err := readSection(r, h, name, 1, u64Bytes(s.IDs)); err != nil {
		return nil, err
	}
	fixU64sFromLE(s.IDs)
	if words := (n + 63) / 64; words > 0 {
		s.Deleted = make([]uint64, words)
		if err := readSection(r, h, name, 2, u64Bytes(s.Deleted)); err != nil {
			return nil, err
		}
		fixU64sFromLE(s.Deleted)
		if n%64 != 0 && s.Deleted[words-1]>>(n%64) != 0 {
			return nil, formatErr(name, "tombstones", int64(h.table[2].offset), ErrCorrupt, "bits set beyond row count %d", n)
		}
	}
	keys := make([]byte, h.table[3].length)
	if err := readSection(r, h, name, 3, keys); err != nil {
		return nil, err
	}
	var err error
	if s.Keys, err = decodeKeys(keys, name, int64(h.table[3].offset)); err != nil {
		return nil, err
	}
	if h.version < baseVersion2 {
		return s, nil
	}
	for _, i := range []int{sectMeta - 1, sectPayloads - 1} {
		if h.table[i].length == 0 {
			continue // absent: nil
		}
		b := make([]byte, h.table[i].length) // within the file: checked
		if err := readSection(r, h, name, i, b); err != nil {
			return nil, err
		}
		schema, entries, err := decodeEntries(b, s.IDs, i == sectMeta-1, name, sectionNames[i+1], int64(h.table[i].offset))
		if err != nil {
			return nil, err
		}
		if i == sectMeta-1 {
			s.Schema, s.Meta = schema, entries
		} else {
			s.Payloads = entries
		}
	}
	return s, nil
}

// decodeEntries decodes a meta (withSchema) or payloads section b, found
// at byte off, for the rows whose IDs are ids: (schema len u32 and bytes,)
// then one len u32 and its bytes per row, consuming b exactly. Entries are
// views of b (nil when empty), capacity cut to length; no entry at all
// (nil) when every row's is empty. A section present must hold some byte
// besides its lengths: an absent one has length 0.
func decodeEntries(b []byte, ids []uint64, withSchema bool, name, sect string, off int64) ([]byte, [][]byte, error) {
	le := binary.LittleEndian
	pos := 0
	next := func(what string) ([]byte, error) {
		if len(b)-pos < 4 {
			return nil, formatErr(name, sect, off+int64(pos), ErrCorrupt, "%s: %d bytes left, its length needs 4", what, len(b)-pos)
		}
		l := uint64(le.Uint32(b[pos:]))
		if l > uint64(len(b)-pos-4) {
			return nil, formatErr(name, sect, off+int64(pos), ErrCorrupt, "%s claims %d bytes, %d left in the section", what, l, len(b)-pos-4)
		}
		start := pos + 4
		pos = start + int(l)
		if l == 0 {
			return nil, nil
		}
		return b[start:pos:pos], nil
	}
	var schema []byte
	var err error
	if withSchema {
		if schema, err = next("schema"); err != nil {
			return nil, nil, err
		}
	}
	// Every row needs its 4-byte length: check the count fits before
	// allocating one entry per row.
	if uint64(len(ids)) > uint64(len(b)-pos)/4 {
		return nil, nil, formatErr(name, sect, off+int64(pos), ErrCorrupt, "%d rows need at least %d bytes of lengths, %d left in the section", len(ids), 4*uint64(len(ids)), len(b)-pos)
	}
	entries := make([][]byte, len(ids))
	rowBytes := false
	for i := range entries {
		if entries[i], err = next(fmt.Sprintf("%s of row %d (ID %d)", sect, i, ids[i])); err != nil {
			return nil, nil, err
		}
		rowBytes = rowBytes || entries[i] != nil
	}
	if pos != len(b) {
		return nil, nil, formatErr(name, sect, off+int64(pos), ErrCorrupt, "%d bytes after the last row's entry", len(b)-pos)
	}
	if !rowBytes {
		if len(schema) == 0 {
			return nil, nil, formatErr(name, sect, off, ErrCorrupt, "section of %d bytes holds only empty entries (a writer leaves it out: length 0)", len(b))
		}
		entries = nil // no row has any: canonical nil, as the writer takes it
	}
	return schema, entries, nil
}

func decodeKeys(b []byte, name string, off int64) (map[uint64]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	keys := make(map[uint64]string)
	var prev uint64
	for pos := 0; pos < len(b); {
		if len(b)-pos < 12 {
			return nil, formatErr(name, "keys", off+int64(pos), ErrCorrupt, "%d bytes left, an entry needs at least 12", len(b)-pos)
		}
		id := binary.LittleEndian.Uint64(b[pos:])
		l := uint64(binary.LittleEndian.Uint32(b[pos+8:]))
		if l > uint64(len(b)-pos-12) {
			return nil, formatErr(name, "keys", off+int64(pos), ErrCorrupt, "key of ID %d claims %d bytes, %d left", id, l, len(b)-pos-12)
		}
		if pos > 0 && id <= prev {
			return nil, formatErr(name, "keys", off+int64(pos), ErrCorrupt, "ID %d follows ID %d; entries must be in increasing ID order", id, prev)
		}
		keys[id] = string(b[pos+12 : pos+12+int(l)])
		prev = id
		pos += 12 + int(l)
	}
	return keys, nil
}
