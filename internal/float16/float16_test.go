package float16

import (
	"math"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/umbravec/umbra/internal/testkit"
)

// float16Values lists every finite non-negative binary16 value in order of
// its bits, which is also numeric order; computed with float64 arithmetic,
// independently of ToFloat32.
func float16Values() []float64 {
	vals := make([]float64, 0x7c00)
	for h := range vals {
		e, m := h>>10, float64(h&0x3ff)
		if e == 0 {
			vals[h] = math.Ldexp(m, -24)
		} else {
			vals[h] = math.Ldexp(1+m/1024, e-15)
		}
	}
	return vals
}

var float16Table = float16Values()

// float16RoundRef is a slow reference for Bits on non-NaN input:
// nearest binary16 by search, ties to the even encoding, at or beyond 65520
// (the midpoint between 65504 and 2^16) to Inf.
func float16RoundRef(f float32) uint16 {
	sign := uint16(0)
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	a := math.Abs(float64(f))
	if a >= 65520 {
		return sign | 0x7c00
	}
	i := sort.SearchFloat64s(float16Table, a) // first value >= a
	if i < len(float16Table) && float16Table[i] == a {
		return sign | uint16(i)
	}
	if i == len(float16Table) {
		return sign | uint16(i-1)
	}
	lo, hi := float16Table[i-1], float16Table[i]
	switch {
	case a-lo < hi-a:
		return sign | uint16(i-1)
	case a-lo > hi-a:
		return sign | uint16(i)
	case i%2 == 0:
		return sign | uint16(i)
	}
	return sign | uint16(i-1)
}

func TestFloat16Exhaustive(t *testing.T) {
	for h := 0; h <= 0xffff; h++ {
		f := ToFloat32(uint16(h))
		exp, man := h>>10&0x1f, h&0x3ff
		isNaN := exp == 0x1f && man != 0
		if isNaN != math.IsNaN(float64(f)) {
			t.Fatalf("%#04x: NaN-ness lost, got %v", h, f)
		}
		if back := Bits(f); back != uint16(h) {
			t.Fatalf("%#04x -> %v (%#08x) -> %#04x", h, f, math.Float32bits(f), back)
		}
		if isNaN {
			continue
		}
		want := math.Inf(1)
		if exp != 0x1f {
			want = float16Table[h&0x7fff]
		}
		if h&0x8000 != 0 {
			want = -want
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h&0x8000 != 0) {
			t.Fatalf("%#04x: got %v, want %v", h, f, want)
		}
	}
}

func TestFloat16KnownValues(t *testing.T) {
	cases := []struct {
		name string
		f    float32
		bits uint16
	}{
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"zero", 0, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"max", 65504, 0x7bff},
		{"just below the Inf midpoint", math.Nextafter32(65520, 0), 0x7bff},
		{"Inf midpoint ties to even Inf", 65520, 0x7c00},
		{"overflow", 1e6, 0x7c00},
		{"negative overflow", -70000, 0xfc00},
		{"Inf", float32(math.Inf(1)), 0x7c00},
		{"-Inf", float32(math.Inf(-1)), 0xfc00},
		{"smallest normal", float32(math.Ldexp(1, -14)), 0x0400},
		{"largest subnormal", float32(math.Ldexp(1023, -24)), 0x03ff},
		{"smallest subnormal", float32(math.Ldexp(1, -24)), 0x0001},
		{"half smallest subnormal ties to zero", float32(math.Ldexp(1, -25)), 0x0000},
		{"above half smallest subnormal", math.Nextafter32(float32(math.Ldexp(1, -25)), 1), 0x0001},
		{"1.5 smallest subnormal ties to even 2", float32(math.Ldexp(3, -25)), 0x0002},
		{"tiny", 1e-30, 0x0000},
		{"third", 1.0 / 3, 0x3555},
		{"1+2^-11 ties to even 1", 1 + float32(math.Ldexp(1, -11)), 0x3c00},
		{"1+3*2^-11 ties to even up", 1 + float32(math.Ldexp(3, -11)), 0x3c02},
		{"pi", math.Pi, 0x4248},
		{"subnormal to normal carry", float32(math.Ldexp(2047, -25)), 0x0400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.bits, Bits(tc.f), "Bits(%v)", tc.f)
			assert.Equal(t, tc.bits, float16RoundRef(tc.f), "reference disagrees with the table")
		})
	}
	for _, nan := range []uint32{0x7fc00000, 0xffc00000, 0x7f800001, 0x7fa00000, 0xff800001} {
		h := Bits(math.Float32frombits(nan))
		assert.True(t, h&0x7c00 == 0x7c00 && h&0x3ff != 0, "NaN %#08x became %#04x", nan, h)
		assert.Equal(t, uint16(nan>>16)&0x8000, h&0x8000, "NaN %#08x lost its sign", nan)
	}
}

// TestFloat16Rounding checks Bits against the search reference at
// every midpoint between neighbouring binary16 values (and one float32 step
// either side), and at random float32 inputs over the whole range.
func TestFloat16Rounding(t *testing.T) {
	rng := testkit.Rand(t)
	check := func(f float32) {
		if got, want := Bits(f), float16RoundRef(f); got != want {
			t.Fatalf("Bits(%v = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
	for i := 0; i+1 < len(float16Table); i++ {
		mid := float32((float16Table[i] + float16Table[i+1]) / 2) // exact: 12 significant bits
		for _, f := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9)} {
			check(f)
			check(-f)
		}
	}
	for range 200000 {
		f := math.Float32frombits(rng.Uint32())
		if !math.IsNaN(float64(f)) {
			check(f)
		}
		check(float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(50)-30)))
	}
}
