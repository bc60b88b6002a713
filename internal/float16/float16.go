// Package float16 converts between float32 and IEEE 754 binary16, the
// encoding of float16 .npy files (package host reads and writes them) and
// of the umbra command's float16 conversions.
package float16

import "math"

// Bits returns the IEEE 754 binary16 encoding of f, rounded to the
// nearest representable value with ties to even; magnitudes that round past
// 65504 become ±Inf, values below half the smallest subnormal (2^-25) become
// ±0, and a NaN stays a NaN (its top payload bits kept). The GPU path uses the
// same encoding for f16 slabs.
func Bits(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man == 0 {
			return sign | 0x7c00
		}
		m := uint16(man >> 13)
		if m == 0 {
			m = 0x200 // the payload lived in the dropped bits: keep it a (quiet) NaN
		}
		return sign | 0x7c00 | m
	}
	e := exp - 127 + 15 // rebias
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal (or zero) in binary16: the unit is 2^-24.
		if e < -10 {
			return sign
		}
		m := man | 0x800000
		shift := uint32(14 - e)
		h := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++ // may carry into the smallest normal, which is the right answer
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry into the exponent is correct, up to and including Inf
	}
	return sign | uint16(h)
}

// ToFloat32 widens the IEEE 754 binary16 value h to float32 exactly
// (every binary16 value, subnormals included, is a float32); NaN payloads are
// kept, so Bits(ToFloat32(h)) == h for every h.
func ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch exp {
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}
