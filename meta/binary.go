package meta

import (
	"unicode/utf8"
)

// The size of a row's binary encoding (internal/metaindex writes and reads
// it; its package doc, "Binary encoding", describes it), which MaxRowBytes
// bounds:
//
//	row    = nothing (no fields) | uvarint(count ≥ 1) field{count}  (names strictly increasing, bytewise)
//	field  = uvarint(len) name  kind(1 byte)  payload
//	Keyword: uvarint(len) bytes
//	Int, Time: zigzag varint
//	Float: 8 bytes, little-endian IEEE 754 bits (finite, never -0)
//	Tags: uvarint(count) { uvarint(len) bytes }{count}  (strictly increasing, bytewise)
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

func zigzag(i int64) uint64 { return uint64(i<<1) ^ uint64(i>>63) }

// fieldLen is the encoded size of one field.
func fieldLen(name string, v Value) int {
	n := uvarintLen(uint64(len(name))) + len(name) + 1
	switch v.kind {
	case Keyword:
		n += uvarintLen(uint64(len(v.s))) + len(v.s)
	case Int, Time:
		n += uvarintLen(zigzag(v.i))
	case Float:
		n += 8
	case Tags:
		n += uvarintLen(uint64(len(v.tagList())))
		for _, t := range v.tagList() {
			n += uvarintLen(uint64(len(t))) + len(t)
		}
	}
	return n
}

// validUTF8 is utf8.Valid, named for the JSON reader.
func validUTF8(b []byte) bool { return utf8.Valid(b) }
