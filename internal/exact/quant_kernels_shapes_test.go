package exact

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The kernels take any length and stride, not only CodeStride's whole
// chunks: every set against the generic kernels on raw codes of every
// byte (query codes down to −128), lengths around each vector width,
// strides that misalign each row, slices that start off any alignment,
// and numbers of rows and queries that leave every remainder of the
// panels' groups. int8 sums agree bit for bit; float16 sums within the
// rounding bound of their length, with the tile kernel equal to the rows
// kernel (one order a pair).
func TestQuantKernelsRawShapes(t *testing.T) {
	r := newRand(t)
	lens := []int{1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 80, 96, 127, 128, 129, 200}
	for _, ks := range quantKernelSets() {
		for _, n := range lens {
			stride := n + r.IntN(5)
			nr := 1 + r.IntN(11)
			nq := 1 + r.IntN(10)
			name := fmt.Sprintf("%s/n %d/stride %d/rows %d/queries %d", ks.name, n, stride, nr, nq)
			testI8Shapes(t, r, ks, name, n, stride, nr, nq)
			testF16Shapes(t, r, ks, name, n, stride, nr, nq)
		}
	}
}

// skew returns a slice of length n whose first element sits off past
// the start of a fresh allocation, so kernels meet every alignment.
func skew[T any](n, off int) []T { return make([]T, n+off)[off:] }

func testI8Shapes(t *testing.T, r *rand.Rand, ks quantKernelSet, name string, n, stride, nr, nq int) {
	t.Helper()
	rows := skew[uint8](nr*stride, r.IntN(16))
	for i := range rows {
		rows[i] = uint8(r.UintN(256))
	}
	// Rows kernel: queries n long over rows of the stride.
	q := skew[int8](n, r.IntN(16))
	for i := range q {
		q[i] = int8(r.IntN(256) - 128)
	}
	got := skew[int32](nr, r.IntN(4))
	want := make([]int32, nr)
	ks.i8Rows(got, q, rows, stride)
	i8RowsGo(want, q, rows, stride)
	for i := range nr {
		if got[i] != want[i] {
			t.Fatalf("%s: int8 rows: row %d: %d, generic %d", name, i, got[i], want[i])
		}
	}
	// Tile kernel: queries of the rows' stride.
	qs := skew[int8](nq*stride, r.IntN(16))
	for i := range qs {
		qs[i] = int8(r.IntN(256) - 128)
	}
	tile := skew[int32](nq*nr, r.IntN(4))
	wantTile := make([]int32, nq*nr)
	ks.i8Tile(tile, qs, nq, rows, nr, stride)
	i8TileGo(wantTile, qs, nq, rows, nr, stride)
	for k := range tile {
		if tile[k] != wantTile[k] {
			t.Fatalf("%s: int8 tile: query %d row %d: %d, generic %d", name, k/nr, k%nr, tile[k], wantTile[k])
		}
	}
}

// finiteHalf is a random float16 that is neither Inf nor NaN, subnormals
// and zeros included.
func finiteHalf(r *rand.Rand) uint16 {
	h := uint16(r.UintN(1 << 16))
	if h>>10&0x1f == 0x1f {
		h &^= 1 << 14
	}
	return h
}

func testF16Shapes(t *testing.T, r *rand.Rand, ks quantKernelSet, name string, n, stride, nr, nq int) {
	t.Helper()
	rows := skew[uint16](nr*stride, r.IntN(8))
	for i := range rows {
		rows[i] = finiteHalf(r)
	}
	qs := skew[float32](nq*stride, r.IntN(8))
	for i := range qs {
		qs[i] = 2*r.Float32() - 1
	}
	g := gamma(stride + 1)
	check := func(what string, j int, q []float32, got []float32) {
		want := make([]float32, nr)
		f16RowsGo(want, q, rows, stride)
		for i := range nr {
			var mag float64
			for c, v := range q {
				mag += math.Abs(float64(v) * float64(f16toF32(rows[i*stride+c])))
			}
			if d := math.Abs(float64(got[i]) - float64(want[i])); d > 2*g*mag {
				t.Fatalf("%s: float16 %s: query %d row %d: %g, generic %g", name, what, j, i, got[i], want[i])
			}
		}
	}
	// Rows kernel with a query n long.
	got := skew[float32](nr, r.IntN(4))
	ks.f16Rows(got, qs[:n], rows, stride)
	check("rows", 0, qs[:n], got)
	// Tile kernel against the rows kernel, bit for bit.
	tile := skew[float32](nq*nr, r.IntN(4))
	ks.f16Tile(tile, qs, nq, rows, nr, stride)
	for j := range nq {
		q := qs[j*stride : (j+1)*stride]
		ks.f16Rows(got, q, rows, stride)
		for i := range nr {
			if math.Float32bits(tile[j*nr+i]) != math.Float32bits(got[i]) {
				t.Fatalf("%s: float16: query %d row %d: tile %g, rows %g (one order a pair)", name, j, i, tile[j*nr+i], got[i])
			}
		}
		check("tile", j, q, tile[j*nr:(j+1)*nr])
	}
}

// The sets this machine runs are named, the chosen one first; the log
// line is what CI's qemu runs look for to prove which int8 path ran.
func TestQuantKernelSetsNamed(t *testing.T) {
	sets := quantKernelSets()
	var names []string
	for _, ks := range sets {
		if ks.name == "" {
			t.Fatal("a kernel set without a name")
		}
		names = append(names, ks.name)
	}
	if !slices.Contains(names, QuantKernel()) {
		t.Errorf("QuantKernel %q is none of this machine's sets %v", QuantKernel(), names)
	}
	t.Logf("quant kernel %s; sets %v", QuantKernel(), names)
}
