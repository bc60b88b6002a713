package metaindex

import (
	"encoding/binary"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/umbravec/umbra/meta"
)

// The binary encoding of a row (see the package doc, "Binary encoding"):
//
//	row    = nothing (no fields) | uvarint(count ≥ 1) field{count}  (names strictly increasing, bytewise)
//	field  = uvarint(len) name  kind(1 byte)  payload
//	meta.Keyword: uvarint(len) bytes
//	meta.Int, meta.Time: zigzag varint
//	meta.Float: 8 bytes, little-endian IEEE 754 bits (finite, never -0)
//	meta.Tags: uvarint(count) { uvarint(len) bytes }{count}  (strictly increasing, bytewise)
//
// Every varint is minimal. The encoding of a row is therefore unique.

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func zigzag(i int64) uint64   { return uint64(i<<1) ^ uint64(i>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// fieldLen is the encoded size of one field.
func fieldLen(name string, v meta.Value) int {
	n := uvarintLen(uint64(len(name))) + len(name) + 1
	switch v.Kind() {
	case meta.Keyword:
		n += uvarintLen(uint64(len(v.Str()))) + len(v.Str())
	case meta.Int, meta.Time:
		n += uvarintLen(zigzag(intOf(v)))
	case meta.Float:
		n += 8
	case meta.Tags:
		n += uvarintLen(uint64(len(v.Tags())))
		for _, t := range v.Tags() {
			n += uvarintLen(uint64(len(t))) + len(t)
		}
	}
	return n
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendBinary appends f's canonical binary encoding to dst: nothing for a
// row without fields. It encodes what it is given; validate f first (Check,
// Index.Check) — DecodeBinary refuses what Check refuses.
func AppendBinary(dst []byte, f meta.Fields) []byte {
	if len(f) == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(len(f)))
	for _, name := range names(f) {
		dst = appendField(dst, name, f[name])
	}
	return dst
}

func appendField(dst []byte, name string, v meta.Value) []byte {
	dst = appendString(dst, name)
	dst = append(dst, byte(v.Kind()))
	switch v.Kind() {
	case meta.Keyword:
		dst = appendString(dst, v.Str())
	case meta.Int, meta.Time:
		dst = binary.AppendUvarint(dst, zigzag(intOf(v)))
	case meta.Float:
		f := v.Float()
		if f == 0 {
			f = 0
		}
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(f))
	case meta.Tags:
		dst = binary.AppendUvarint(dst, uint64(len(v.Tags())))
		for _, t := range v.Tags() {
			dst = appendString(dst, t)
		}
	}
	return dst
}

// decoder reads a binary encoding, strictly.
type decoder struct {
	b   []byte
	p   int
	err error
	lim meta.Limits
}

func (d *decoder) fail(format string, a ...any) {
	if d.err == nil {
		d.err = invalidf("metadata encoding at byte %d: %s", d.p, sprintf(format, a...))
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.b[d.p:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	if n > 1 && d.b[d.p+n-1] == 0 {
		d.fail("varint not minimal")
		return 0
	}
	d.p += n
	return x
}

// bytes reads a length-prefixed string of at most max bytes.
func (d *decoder) str(what string, max int) string {
	l := d.uvarint()
	if d.err != nil {
		return ""
	}
	if l > uint64(len(d.b)-d.p) {
		d.fail("%s of %d bytes runs past the end", what, l)
		return ""
	}
	if l > uint64(max) {
		d.err = tooLargef("metadata encoding at byte %d: %s of %d bytes, over the limit of %d", d.p, what, l, max)
		return ""
	}
	s := string(d.b[d.p : d.p+int(l)])
	d.p += int(l)
	return s
}

func (d *decoder) byte1() byte {
	if d.err != nil {
		return 0
	}
	if d.p >= len(d.b) {
		d.fail("unexpected end")
		return 0
	}
	c := d.b[d.p]
	d.p++
	return c
}

// DecodeBinary decodes one row's encoding (AppendBinary's), checking it
// against lim (zero fields take their defaults). Anything malformed or not
// canonical — a varint not minimal, names or tags out of order or repeated,
// an unknown kind, a non-finite or negative-zero float, bytes left over —
// is an error wrapping meta.ErrInvalid; a limit passed, meta.ErrTooLarge. Empty input
// is a row without fields (nil).
func DecodeBinary(b []byte, lim meta.Limits) (meta.Fields, error) {
	lim = lim.WithDefaults()
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) > lim.MaxRowBytes {
		return nil, tooLargef("metadata encoding of %d bytes, over the limit of %d", len(b), lim.MaxRowBytes)
	}
	d := &decoder{b: b, lim: lim}
	n := d.uvarint()
	if d.err != nil {
		return nil, d.err
	}
	if n == 0 {
		return nil, invalidf("metadata encoding: a row without fields is encoded as no bytes, not a zero count")
	}
	if n > uint64(lim.MaxFields) {
		return nil, tooLargef("metadata encoding: %d fields, over the limit of %d", n, lim.MaxFields)
	}
	if n > uint64(len(b)) {
		return nil, invalidf("metadata encoding: %d fields in %d bytes", n, len(b))
	}
	f := make(meta.Fields, n)
	prev := ""
	for i := uint64(0); i < n && d.err == nil; i++ {
		name := d.str("field name", lim.MaxNameBytes)
		if d.err != nil {
			break
		}
		if err := checkName(name, lim); err != nil {
			return nil, err
		}
		if i > 0 && name <= prev {
			d.fail("field %q after %q: names not strictly increasing", name, prev)
			break
		}
		prev = name
		v := d.value(name)
		if d.err != nil {
			break
		}
		f[name] = v
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.p != len(b) {
		return nil, invalidf("metadata encoding: %d bytes left over after %d fields", len(b)-d.p, n)
	}
	if err := f.Check(lim); err != nil { // each value against lim, as written
		return nil, err
	}
	return f, nil
}

// value reads the kind and payload of field name.
func (d *decoder) value(name string) meta.Value {
	k := meta.Kind(d.byte1())
	if d.err != nil {
		return meta.Value{}
	}
	switch k {
	case meta.Keyword:
		return meta.KeywordOf(d.str("keyword of field "+quote(name), d.lim.MaxStringBytes))
	case meta.Int:
		return meta.IntOf(unzigzag(d.uvarint()))
	case meta.Time:
		return timeNanos(unzigzag(d.uvarint()))
	case meta.Float:
		if len(d.b)-d.p < 8 {
			d.fail("float of field %q runs past the end", name)
			return meta.Value{}
		}
		bits := binary.LittleEndian.Uint64(d.b[d.p:])
		d.p += 8
		f := math.Float64frombits(bits)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail("field %q: float %v is not finite", name, f)
			return meta.Value{}
		}
		if bits == 1<<63 {
			d.fail("field %q: float -0 (encoded as 0)", name)
			return meta.Value{}
		}
		return meta.FloatOf(f)
	case meta.Tags:
		n := d.uvarint()
		if d.err != nil {
			return meta.Value{}
		}
		if n > uint64(d.lim.MaxTags) {
			d.err = tooLargef("metadata encoding: field %q: %d tags, over the limit of %d", name, n, d.lim.MaxTags)
			return meta.Value{}
		}
		if n > uint64(len(d.b)-d.p) {
			d.fail("field %q: %d tags in %d bytes", name, n, len(d.b)-d.p)
			return meta.Value{}
		}
		tags := make([]string, 0, n)
		for j := uint64(0); j < n; j++ {
			t := d.str("tag of field "+quote(name), d.lim.MaxStringBytes)
			if d.err != nil {
				return meta.Value{}
			}
			if j > 0 && t <= tags[j-1] {
				d.fail("field %q: tag %q after %q: tags not strictly increasing", name, t, tags[j-1])
				return meta.Value{}
			}
			tags = append(tags, t)
		}
		return tagsValue(tags)
	}
	d.fail("field %q: unknown kind %d", name, k)
	return meta.Value{}
}

// schemaMagic starts a schema blob; its last byte is the format's version.
const schemaMagic = "umeta\x01"

// appendSchema encodes a schema: magic, uvarint(count), then per field in
// strictly increasing name order uvarint(len) name kind.
func appendSchema(dst []byte, s map[string]meta.Kind) []byte {
	dst = append(dst, schemaMagic...)
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	slices.Sort(names)
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, n := range names {
		dst = appendString(dst, n)
		dst = append(dst, byte(s[n]))
	}
	return dst
}

// decodeSchema decodes a schema blob strictly.
func decodeSchema(b []byte, lim meta.Limits) (map[string]meta.Kind, error) {
	if len(b) < len(schemaMagic) || string(b[:len(schemaMagic)-1]) != schemaMagic[:len(schemaMagic)-1] {
		return nil, invalidf("schema blob: does not start with the schema magic")
	}
	if b[len(schemaMagic)-1] != schemaMagic[len(schemaMagic)-1] {
		return nil, invalidf("schema blob: version %d, this build reads version %d", b[len(schemaMagic)-1], schemaMagic[len(schemaMagic)-1])
	}
	d := &decoder{b: b, p: len(schemaMagic), lim: lim}
	n := d.uvarint()
	if d.err != nil {
		return nil, d.err
	}
	if n > uint64(lim.MaxSchema) {
		return nil, tooLargef("schema blob: %d fields, over the limit of %d", n, lim.MaxSchema)
	}
	if n > uint64(len(b)) {
		return nil, invalidf("schema blob: %d fields in %d bytes", n, len(b))
	}
	s := make(map[string]meta.Kind, n)
	prev := ""
	for i := uint64(0); i < n; i++ {
		name := d.str("field name", lim.MaxNameBytes)
		k := meta.Kind(d.byte1())
		if d.err != nil {
			return nil, d.err
		}
		if err := checkName(name, lim); err != nil {
			return nil, err
		}
		if i > 0 && name <= prev {
			return nil, invalidf("schema blob: field %q after %q: names not strictly increasing", name, prev)
		}
		if !validKind(k) {
			return nil, invalidf("schema blob: field %q: unknown kind %d", name, k)
		}
		prev = name
		s[name] = k
	}
	if d.p != len(b) {
		return nil, invalidf("schema blob: %d bytes left over", len(b)-d.p)
	}
	return s, nil
}

// validUTF8 is utf8.Valid, named for the JSON reader.
func validUTF8(b []byte) bool { return utf8.Valid(b) }
