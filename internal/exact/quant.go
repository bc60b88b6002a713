package exact

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/growbuf"
	"github.com/umbravec/umbra/internal/parallel"
)

// Compressed rows: the same vectors as a float32 Slab, held in fewer bytes
// (float16 or int8), each row with a bound on its quantisation error, so a
// scan of the compressed rows yields for every row an interval that is
// certain to hold the score the float32 kernels compute. ExactSearch then
// rescores in float32 only the rows whose interval can reach the k-th best
// lower bound, and returns exactly what Search over the float32 rows
// returns. quant_bounds.go derives the intervals.

// MaxQuantDim is the largest dimension the compressed precisions take: the
// int8 dot product is accumulated exactly in 32-bit integers
// (65,536 × 255 × 127 < 2^31), and the float32 rounding bounds stay tight.
const MaxQuantDim = 1 << 16

// ErrPrecision reports a precision this package does not know, or a shape
// it cannot compress.
var ErrPrecision = errors.New("exact: unsupported precision")

// codeAlign is the number of components a compressed row is padded to, so
// that the kernels walk whole 64-byte vectors (64 int8 or 32 float16
// components) without a tail case.
func codeAlign(p core.Precision) int {
	if p == core.Int8 {
		return 64
	}
	return 32
}

// CodeStride returns the components a compressed row of dimension dim
// occupies under p (dim rounded up to the kernels' vector width).
func CodeStride(p core.Precision, dim int) int {
	a := codeAlign(p)
	return (dim + a - 1) / a * a
}

// Compressed is a compressed copy of a slab's rows, kept in step with it by
// the caller (Append, Set, Truncate).
//
// Int8 rows are stored offset by 128 (code c in [-127, 127] as the byte
// c+128) because the VNNI instruction multiplies unsigned by signed bytes:
// the query is the signed side, and the offset is taken out once per query
// (128 times the sum of the query's codes). Padding bytes are 128 (code 0).
type Compressed struct {
	Prec   core.Precision
	Dim    int
	Stride int // components per compressed row (CodeStride)
	Rows   int

	U8  []uint8  // Int8: Rows*Stride bytes
	F16 []uint16 // F16: Rows*Stride half floats

	// Per row: Scale is the factor from codes back to values (x̂ = Scale·c);
	// Err ≥ ‖x − x̂‖₂ and Norm ≥ ‖x‖₂ are upper bounds (rounded up);
	// HatSq is ‖x̂‖₂² rounded to nearest.
	Scale []float32
	Err   []float32
	Norm  []float32
	HatSq []float32
	// MaxHat ≥ Norm[i]+Err[i] for every row ever stored: with the query's
	// norm it tells a scan whether any row's bound could overflow.
	MaxHat float64
	// Workers is how many goroutines AppendSlab compresses a large slab
	// on (0: GOMAXPROCS; the engine gives its Config.Workers).
	Workers int

	// mem is the reserved region the codes lie in once they grew into
	// one (growbuf.Make), shared by copies of the header, as
	// packed.Slab's rows; nil for heap memory.
	mem *growbuf.Region
}

// Region is the reserved region the codes lie in, nil when they are heap
// memory.
func (c *Compressed) Region() *growbuf.Region { return c.mem }

// Prefault makes the memory of the codes of the n rows after the last
// one present, where they lie in a region (packed.Slab.Prefault says
// why). It reads only the header it is given.
func (c Compressed) Prefault(n int) {
	switch {
	case c.U8 != nil:
		growbuf.Prefault(c.mem, c.U8[:cap(c.U8)], c.Rows*c.Stride, (c.Rows+n)*c.Stride)
	case c.F16 != nil:
		growbuf.Prefault(c.mem, c.F16[:cap(c.F16)], c.Rows*c.Stride, (c.Rows+n)*c.Stride)
	}
}

// ReleaseCodes frees old's codes' region when c does not use it: c
// replaced old and, the caller guarantees, nothing reads old's codes any
// more (packed.Release says the same of a slab's rows).
func ReleaseCodes(old, c *Compressed) {
	if old != nil && (c == nil || old.mem != c.mem) {
		old.mem.Free()
	}
}

// NewCompressed returns an empty compressed slab for rows of dimension dim.
func NewCompressed(p core.Precision, dim int) (*Compressed, error) {
	if p != core.F16 && p != core.Int8 {
		return nil, fmt.Errorf("%w: %v", ErrPrecision, p)
	}
	if dim < 1 || dim > MaxQuantDim {
		return nil, fmt.Errorf("%w: %v rows of dimension %d (at most %d)", ErrPrecision, p, dim, MaxQuantDim)
	}
	return &Compressed{Prec: p, Dim: dim, Stride: CodeStride(p, dim)}, nil
}

// Bytes is how many bytes a scan reads: the codes and the per-row values
// it uses.
func (c *Compressed) Bytes() int64 {
	per := int64(c.Stride) + 16
	if c.Prec == core.F16 {
		per = int64(c.Stride)*2 + 16
	}
	return per * int64(c.Rows)
}

// CompressedBytes is the memory rows compressed rows of dimension dim take
// under p: the codes and four float32 values a row.
func CompressedBytes(p core.Precision, dim, rows int) int64 {
	per := int64(CodeStride(p, dim)) + 16
	if p == core.F16 {
		per = int64(CodeStride(p, dim))*2 + 16
	}
	return per * int64(rows)
}

// Append compresses rows (each at least Dim long; only the first Dim
// components are read) after the existing ones.
func (c *Compressed) Append(rows [][]float32) {
	base := c.Rows
	c.grow(len(rows))
	for i, r := range rows {
		c.MaxHat = max(c.MaxHat, c.set(base+i, r[:c.Dim]))
	}
}

// AppendSlab compresses rows [from, s.Rows) of s after the existing ones,
// on Workers goroutines when the slab is large: each row's codes and
// bounds depend on that row alone, so the result is the same bits
// however the rows are shared out.
func (c *Compressed) AppendSlab(s fallback.Slab, from int) {
	base := c.Rows
	n := s.Rows - from
	c.grow(n)
	const block = 4096
	w := parallel.Workers(c.Workers, (n+block-1)/block, n*s.Dim)
	if w <= 1 {
		for i := from; i < s.Rows; i++ {
			c.MaxHat = max(c.MaxHat, c.set(base+i-from, s.Data[i*s.Stride:i*s.Stride+s.Dim]))
		}
		return
	}
	hats := make([]float64, w)
	_ = parallel.Run(context.Background(), w, (n+block-1)/block, func(worker, b int) {
		for i := from + b*block; i < min(from+(b+1)*block, s.Rows); i++ {
			hats[worker] = max(hats[worker], c.set(base+i-from, s.Data[i*s.Stride:i*s.Stride+s.Dim]))
		}
	})
	c.MaxHat = max(c.MaxHat, slices.Max(hats))
}

// Set replaces row i with the compression of x (Dim long).
func (c *Compressed) Set(i int, x []float32) { c.MaxHat = max(c.MaxHat, c.set(i, x[:c.Dim])) }

// Truncate drops every row from row n on.
func (c *Compressed) Truncate(n int) {
	if n >= c.Rows {
		return
	}
	c.Rows = n
	if c.Prec == core.Int8 {
		c.U8 = c.U8[:n*c.Stride]
	} else {
		c.F16 = c.F16[:n*c.Stride]
	}
	c.Scale, c.Err, c.Norm, c.HatSq = c.Scale[:n], c.Err[:n], c.Norm[:n], c.HatSq[:n]
}

func (c *Compressed) grow(n int) {
	c.Rows += n
	codes := c.Rows * c.Stride
	if c.Prec == core.Int8 {
		c.U8 = growCodes(c.U8, codes, &c.mem)
	} else {
		c.F16 = growCodes(c.F16, codes, &c.mem)
	}
	c.Scale = growTo(c.Scale, c.Rows)
	c.Err = growTo(c.Err, c.Rows)
	c.Norm = growTo(c.Norm, c.Rows)
	c.HatSq = growTo(c.HatSq, c.Rows)
}

// growCodes is growTo for the codes, which move into a reserved region
// (mem) once large: a region grows in place, touching only the codes
// written, where a heap slice doubles into new memory.
func growCodes[T growbuf.Number](s []T, n int, mem **growbuf.Region) []T {
	if n <= cap(s) {
		return s[:n]
	}
	g, r := growbuf.Make[T](n, max(n, 2*cap(s)))
	growbuf.Copy(g, s)
	*mem = r
	return g
}

func growTo[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s[:n]
	}
	return growbuf.Grow(s, n, max(n, 2*cap(s)))
}

// set compresses x into row i and records its error bound.
func (c *Compressed) set(i int, x []float32) (hat float64) {
	var maxAbs float32
	var norm2 float64
	for _, v := range x {
		maxAbs = max(maxAbs, abs32(v))
		norm2 += float64(v) * float64(v)
	}
	var scale float64
	var err2, hat2 float64
	if c.Prec == core.Int8 {
		dst := c.U8[i*c.Stride : (i+1)*c.Stride]
		if maxAbs > 0 {
			scale = float64(float32(float64(maxAbs) / 127))
		}
		for j, v := range x {
			var q float64
			if scale > 0 {
				q = math.RoundToEven(float64(v) / scale)
				q = max(-127, min(127, q))
			}
			dst[j] = uint8(int(q) + 128)
			h := q * scale // exact: a 24-bit scale times a 7-bit code
			e := float64(v) - h
			err2 += e * e
			hat2 += h * h
		}
		for j := len(x); j < len(dst); j++ {
			dst[j] = 128
		}
	} else {
		dst := c.F16[i*c.Stride : (i+1)*c.Stride]
		// A power of two that brings max|x| into [2^13, 2^14): no
		// component rounds past the float16 range, and scaling is exact.
		scale = 1
		if maxAbs > 0 {
			_, e := math.Frexp(float64(maxAbs)) // maxAbs in [2^(e-1), 2^e)
			scale = math.Ldexp(1, e-14)
		}
		for j, v := range x {
			h := f32toF16(float32(float64(v) / scale))
			dst[j] = h
			back := float64(f16toF32(h)) * scale
			e := float64(v) - back
			err2 += e * e
			hat2 += back * back
		}
		clear(dst[len(x):])
	}
	c.Scale[i] = float32(scale)
	// The sums above are float64: a relative error of at most dim·2^-53,
	// far inside the 2^-30 the bounds are widened by.
	c.Err[i] = up32(math.Sqrt(err2) * (1 + 0x1p-30))
	c.Norm[i] = up32(math.Sqrt(norm2) * (1 + 0x1p-30))
	c.HatSq[i] = float32(hat2)
	return float64(c.Norm[i]) + float64(c.Err[i])
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// up32 rounds a non-negative v up to a float32.
func up32(v float64) float32 {
	f := float32(v)
	if float64(f) < v {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// down32 rounds v down to a float32.
func down32(v float64) float32 {
	f := float32(v)
	if float64(f) > v {
		f = math.Nextafter32(f, float32(math.Inf(-1)))
	}
	return f
}

// f32toF16 rounds v to the nearest half float (ties to even), as F16C's
// VCVTPS2PH does under round-to-nearest.
func f32toF16(v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf, NaN
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15:
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 1 {
		// Normal half: 10 bits of mantissa, round the 13 dropped ones.
		m := man >> 13
		rest := man & 0x1fff
		h := uint32(e)<<10 | m
		if rest > 0x1000 || rest == 0x1000 && m&1 == 1 {
			h++ // may carry into the exponent, up to Inf: correct
		}
		return sign | uint16(h)
	}
	// Subnormal half (or zero): value = man24 · 2^(exp-150), half unit 2^-24.
	if exp == 0 {
		return sign // float32 subnormals are far below half's smallest
	}
	shift := uint(14 - e) // 13 + (1 - e)
	if shift > 24 {
		return sign
	}
	m24 := man | 0x800000
	m := m24 >> shift
	rest := m24 & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rest > half || rest == half && m&1 == 1 {
		m++
	}
	return sign | uint16(m)
}

// f16toF32 widens a half float exactly.
func f16toF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		v := float32(man) * 0x1p-24
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}
