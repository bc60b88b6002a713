package exact

import "sync/atomic"

// Kernels over compressed rows. The int8 kernels multiply a signed query
// code by an unsigned (offset by 128) row byte and sum in int32: exact
// integer arithmetic, so every implementation returns the same bits. The
// float16 kernels widen each half float exactly and fuse it into float32
// sums; different implementations round differently, and the bounds in
// quant_bounds.go hold for any order of summation.

// i8RowsKernel writes dst[i] = Σ_j q[j]·rows[i*stride+j] for i < len(dst);
// len(q) == stride.
type i8RowsKernel func(dst []int32, q []int8, rows []uint8, stride int)

// i8TileKernel writes dst[j*nr+i] = Σ_t qs[j*stride+t]·rows[i*stride+t] for
// j < nq, i < nr.
type i8TileKernel func(dst []int32, qs []int8, nq int, rows []uint8, nr, stride int)

// i8Tile16Kernel is i8TileKernel for a kernel that reads the queries
// widened to int16 (qs16, widenI8 of qs: both given, so the queries a
// panel leaves go through the rows kernel).
type i8Tile16Kernel func(dst []int32, qs []int8, qs16 []int16, nq int, rows []uint8, nr, stride int)

// widenI8 is qs as int16s.
func widenI8(qs []int8) []int16 {
	out := make([]int16, len(qs))
	for i, v := range qs {
		out[i] = int16(v)
	}
	return out
}

// f16RowsKernel writes dst[i] = Σ_j q[j]·half(rows[i*stride+j]) in float32.
type f16RowsKernel func(dst, q []float32, rows []uint16, stride int)

// f16TileKernel is f16RowsKernel for nq queries of stride floats each:
// dst[j*nr+i].
type f16TileKernel func(dst, qs []float32, nq int, rows []uint16, nr, stride int)

type quantKernelSet struct {
	name   string
	i8Rows i8RowsKernel
	i8Tile i8TileKernel
	// i8Tile16, when not nil, is the batch panel a search calls with its
	// queries widened to int16 once (AVX2's): i8Tile widens them on every
	// call.
	i8Tile16 i8Tile16Kernel
	f16Rows  f16RowsKernel
	f16Tile  f16TileKernel
}

var genericQuantKernels = quantKernelSet{
	name:    "generic",
	i8Rows:  i8RowsGo,
	i8Tile:  i8TileGo,
	f16Rows: f16RowsGo,
	f16Tile: f16TileGo,
}

// activeQuant is chosen at init (quant_sets.go), the best set the CPU
// runs; umbra's tests and cmd/bench may force another (internal/kernelset).
// A search loads it once and scans with that set throughout.
var activeQuant atomic.Pointer[quantKernelSet]

// QuantKernel names the compressed-row kernels in use, e.g. "avx512vnni",
// "avx2+f16c" or "generic".
func QuantKernel() string { return activeQuant.Load().name }

func i8DotGo(q []int8, row []uint8) int32 {
	row = row[:len(q)]
	var s0, s1, s2, s3 int32
	j := 0
	for ; j+4 <= len(q); j += 4 {
		s0 += int32(q[j]) * int32(row[j])
		s1 += int32(q[j+1]) * int32(row[j+1])
		s2 += int32(q[j+2]) * int32(row[j+2])
		s3 += int32(q[j+3]) * int32(row[j+3])
	}
	for ; j < len(q); j++ {
		s0 += int32(q[j]) * int32(row[j])
	}
	return (s0 + s1) + (s2 + s3)
}

func i8RowsGo(dst []int32, q []int8, rows []uint8, stride int) {
	for i := range dst {
		dst[i] = i8DotGo(q, rows[i*stride:i*stride+len(q)])
	}
}

func i8TileGo(dst []int32, qs []int8, nq int, rows []uint8, nr, stride int) {
	for i := 0; i < nr; i++ {
		row := rows[i*stride : (i+1)*stride]
		for j := 0; j < nq; j++ {
			dst[j*nr+i] = i8DotGo(qs[j*stride:(j+1)*stride], row)
		}
	}
}

// f16Table widens every half float: 256 KiB, built once, read-only.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = f16toF32(uint16(h))
	}
	return &t
}()

func f16RowsGo(dst, q []float32, rows []uint16, stride int) {
	t := f16Table
	for i := range dst {
		row := rows[i*stride : i*stride+len(q)]
		var s0, s1, s2, s3, s4, s5, s6, s7 float32
		j := 0
		for ; j+8 <= len(q); j += 8 {
			x := q[j : j+8 : j+8]
			y := row[j : j+8 : j+8]
			s0 += x[0] * t[y[0]]
			s1 += x[1] * t[y[1]]
			s2 += x[2] * t[y[2]]
			s3 += x[3] * t[y[3]]
			s4 += x[4] * t[y[4]]
			s5 += x[5] * t[y[5]]
			s6 += x[6] * t[y[6]]
			s7 += x[7] * t[y[7]]
		}
		for ; j < len(q); j++ {
			s0 += q[j] * t[row[j]]
		}
		dst[i] = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
	}
}

func f16TileGo(dst, qs []float32, nq int, rows []uint16, nr, stride int) {
	for j := 0; j < nq; j++ {
		f16RowsGo(dst[j*nr:(j+1)*nr], qs[j*stride:(j+1)*stride], rows[:nr*stride], stride)
	}
}
