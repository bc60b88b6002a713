package packed

import (
	"math"

	"github.com/umbravec/umbra/internal/growbuf"
)

// StrideFor returns the row stride, in float32 elements, used for vectors of
// dimension dim: dim rounded up to a multiple of 4, so every row starts on a
// 16-byte boundary and a shader can read it as vec4<f32> without a tail case.
// The padding elements are always zero, so they never change a dot product or
// an L2 distance.
func StrideFor(dim int) int {
	return (dim + 3) &^ 3
}

// Slab holds all stored vectors in one contiguous []float32: row i occupies
// Data[i*Stride : i*Stride+Dim], followed by Stride-Dim zeros. It is the one
// layout every backend reads; nothing else keeps per-vector allocations.
//
// A Slab is not safe for concurrent mutation; the engine serialises Append
// and Truncate against readers.
type Slab struct {
	Dim    int
	Stride int
	Rows   int
	Data   []float32 // len(Data) == Rows*Stride; cap may be larger

	// mem is the reserved region Data lies in when the slab grew into
	// one (growbuf.Floats); nil for heap memory, a caller's (Adopt) or a
	// view (Part).
	mem *growbuf.Region
}

// Region is the reserved region the rows lie in, nil when they are Go heap
// memory or someone else's. Slab values copied from one another share it.
// Nothing frees it when the slab moves its rows (Reserve, Realloc): the
// slab's owner frees the old one once nothing reads it (Release).
func (s *Slab) Region() *growbuf.Region { return s.mem }

// Prefault makes the memory of the n rows after the last one present,
// where the slab's rows lie in a region (growbuf.Prefault): called on a
// goroutine of its own after an append, it moves the next append's page
// faults out of its way. It reads only the slab header it is given.
func (s Slab) Prefault(n int) {
	growbuf.Prefault(s.mem, s.Data[:cap(s.Data)], s.Rows*s.Stride, (s.Rows+n)*s.Stride)
}

// Release frees old's region when s does not use it: old's rows were
// replaced by s's and, the caller guarantees, nothing reads them any
// more. A region left unfreed is freed by the garbage collector once no
// Slab refers to it.
func Release(old, s *Slab) {
	if old.mem != s.mem {
		old.mem.Free()
	}
}

// NewSlab returns an empty slab for vectors of dimension dim (dim >= 1).
func NewSlab(dim int) *Slab {
	return &Slab{Dim: dim, Stride: StrideFor(dim)}
}

// Row returns row i without its padding. The slice aliases the slab.
func (s *Slab) Row(i int) []float32 {
	off := i * s.Stride
	return s.Data[off : off+s.Dim : off+s.Dim]
}

// PaddedRow returns row i including its zero padding (Stride elements).
func (s *Slab) PaddedRow(i int) []float32 {
	off := i * s.Stride
	return s.Data[off : off+s.Stride : off+s.Stride]
}

// Part is rows [lo, hi) as a slab of their own, aliasing s.
func (s *Slab) Part(lo, hi int) *Slab {
	return &Slab{Dim: s.Dim, Stride: s.Stride, Rows: hi - lo, Data: s.Data[lo*s.Stride : hi*s.Stride]}
}

// Bytes is the size of the packed rows in bytes.
func (s *Slab) Bytes() uint64 { return uint64(s.Rows) * uint64(s.Stride) * 4 }

// Append packs vectors (each of length Dim, already validated) after the
// existing rows. With normalize set every row is scaled to unit L2 norm, the
// norm being computed in float64 so the stored row is as close to unit length
// as float32 allows. Storage grows once, to what the call needs (Reserve).
func (s *Slab) Append(vectors [][]float32, normalize bool) {
	_ = s.AppendRows(vectors, Mode{Normalize: normalize})
}

// AppendFlat packs rows given as one row-major []float32 of n*Dim values, as
// read from a file: Append without a slice header per row.
func (s *Slab) AppendFlat(data []float32, normalize bool) {
	_ = s.AppendFlatRows(data, Mode{Normalize: normalize})
}

// Truncate drops every row from index rows on. The engine uses it to undo an
// Append whose device upload failed, so an Add is all or nothing.
func (s *Slab) Truncate(rows int) {
	if rows < s.Rows {
		s.Rows = rows
		s.Data = s.Data[:rows*s.Stride]
	}
}

// Norm returns the Euclidean norm of v, its squares summed in float64 in
// the order a packed row's are (sumSquares), so a query and a stored row
// equal to it are scaled alike.
func Norm(v []float32) float64 {
	return math.Sqrt(sumSquares(v))
}

// Normalized returns v scaled to unit norm, padded with zeros to length n
// (n >= len(v)). It is how a query is prepared for cosine search.
func Normalized(v []float32, n int) []float32 {
	out := make([]float32, n)
	inv := InvNorm(sumSquares(v))
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

// Padded returns a copy of v padded with zeros to length n (n >= len(v)).
func Padded(v []float32, n int) []float32 {
	out := make([]float32, n)
	copy(out, v)
	return out
}

// Synthetic returns a slab of rows × dim values in [-1, 1) from a fixed
// xorshift sequence: data to time or self-test a device on, the same in
// every process.
func Synthetic(rows, dim int) *Slab {
	s := NewSlab(dim)
	flat := make([]float32, rows*dim)
	x := uint32(2463534242)
	for i := range flat {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		flat[i] = float32(x)/float32(1<<32)*2 - 1
	}
	s.AppendFlat(flat, false)
	return s
}

// Set replaces row i with v (Dim long, already validated), normalised if
// asked.
func (s *Slab) Set(i int, v []float32, normalize bool) {
	_ = s.PackRows(s.Data[i*s.Stride:(i+1)*s.Stride], 1, func(int) []float32 { return v }, Mode{Normalize: normalize})
}
