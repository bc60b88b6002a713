package exact

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// forEachQuantKernel runs f once per compressed kernel set this CPU runs,
// with that set forced: on an AVX-512 machine the AVX-VNNI, AVX2 and
// generic sets are tested too.
func forEachQuantKernel(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, name := range QuantKernelSets() {
		t.Run(name, func(t *testing.T) {
			restore, ok := ForceQuantKernels(name)
			if !ok {
				t.Fatalf("no set %q", name)
			}
			defer restore()
			if QuantKernel() != name {
				t.Fatalf("forced %q, QuantKernel says %q", name, QuantKernel())
			}
			f(t)
		})
	}
}

// The sets are listed best first, the first is the one chosen at init,
// generic is last, and forcing one is undone by restore.
func TestQuantKernelSetsForce(t *testing.T) {
	names := QuantKernelSets()
	t.Logf("compressed kernel sets on this CPU: %v", names)
	if len(names) == 0 || names[len(names)-1] != "generic" || names[0] != QuantKernel() {
		t.Fatalf("sets %v, active %q", names, QuantKernel())
	}
	for _, name := range names {
		restore, ok := ForceQuantKernels(name)
		if !ok {
			t.Fatalf("no set %q", name)
		}
		if QuantKernel() != name {
			t.Fatalf("forced %q, active %q", name, QuantKernel())
		}
		restore()
		if QuantKernel() != names[0] {
			t.Fatalf("restored to %q, want %q", QuantKernel(), names[0])
		}
	}
	if _, ok := ForceQuantKernels("avx1024"); ok {
		t.Fatal("forced a set this CPU does not run")
	}
}

// i8Case is one shape for the int8 kernels: codes of nr rows and nq
// queries at a stride, placed off bytes past an aligned start.
type i8Case struct {
	nr, nq, stride, off int
	rowCode, qCode      func(r *rand.Rand) int // a row byte, a query code
}

// Every int8 kernel set returns the generic kernel's sums to the bit: for
// every row byte (0 to 255, 0 being a code the compressor never writes),
// every query code the quantiser writes (-127 to 127), sums at the
// extremes (±255·127 per term, up to the largest stride, where the int32
// sum is within 2^31), strides that are and are not whole 64-byte chunks,
// row and query slices starting at every offset within a cache line, and
// row and query counts that leave every remainder after the groups of four
// rows and the panels' groups of queries.
func TestI8KernelsBitIdentical(t *testing.T) {
	r := newRand(t)
	anyByte := func(r *rand.Rand) int { return r.IntN(256) }
	anyCode := func(r *rand.Rand) int { return r.IntN(255) - 127 }
	c := func(v int) func(*rand.Rand) int { return func(*rand.Rand) int { return v } }
	var cases []i8Case
	for _, stride := range []int{64, 128, 192, 704, 768, 832, 1, 63, 100} {
		for range 4 {
			cases = append(cases, i8Case{r.IntN(14), 1 + r.IntN(9), stride, r.IntN(64), anyByte, anyCode})
		}
	}
	for _, ext := range [][2]int{{255, 127}, {255, -127}, {0, 127}, {0, -127}, {1, -127}, {128, 127}} {
		cases = append(cases, i8Case{5, 3, 1 << 16, 3, c(ext[0]), c(ext[1])})
		cases = append(cases, i8Case{9, 7, 768, 17, c(ext[0]), c(ext[1])})
	}
	for _, ks := range quantKernelSets() {
		for _, tc := range cases {
			name := fmt.Sprintf("%s/stride %d/rows %d/queries %d/offset %d", ks.name, tc.stride, tc.nr, tc.nq, tc.off)
			rowBuf := make([]uint8, tc.off+tc.nr*tc.stride)
			rows := rowBuf[tc.off:]
			for i := range rows {
				rows[i] = uint8(tc.rowCode(r))
			}
			qBuf := make([]int8, tc.off+tc.nq*tc.stride)
			qs := qBuf[tc.off:]
			for i := range qs {
				qs[i] = int8(tc.qCode(r))
			}
			tile := make([]int32, 1+tc.nq*tc.nr)[1:]
			ks.i8Tile(tile, qs, tc.nq, rows, tc.nr, tc.stride)
			for j := range tc.nq {
				q := qs[j*tc.stride : (j+1)*tc.stride]
				got := make([]int32, 1+tc.nr)[1:]
				want := make([]int32, tc.nr)
				ks.i8Rows(got, q, rows, tc.stride)
				i8RowsGo(want, q, rows, tc.stride)
				for i := range tc.nr {
					var sum int64
					for t := range tc.stride {
						sum += int64(q[t]) * int64(rows[i*tc.stride+t])
					}
					if int64(want[i]) != sum {
						t.Fatalf("%s query %d row %d: generic %d, int64 %d", name, j, i, want[i], sum)
					}
					if got[i] != want[i] || tile[j*tc.nr+i] != want[i] {
						t.Fatalf("%s query %d row %d: rows %d tile %d generic %d", name, j, i, got[i], tile[j*tc.nr+i], want[i])
					}
				}
			}
		}
	}
}

// Every float16 kernel set stays inside the bound the search assumes
// (quant_bounds.go: |fl(q·x̂) − q·x̂| ≤ γ_{m+1}·Σ|q_j x̂_j| + (m+1)·2^-149
// for m = stride terms, in any order of sums), against the sum in float64,
// on halves of every kind (subnormal, the largest, both zeros) and queries
// small enough to underflow; and its batch panel returns its rows kernel's
// bits (each pair is summed in one order), for strides that are and are
// not whole chunks, slices at every offset, and every remainder of rows
// and queries.
func TestF16KernelsWithinBound(t *testing.T) {
	r := newRand(t)
	half := func(r *rand.Rand) uint16 {
		switch r.IntN(8) {
		case 0:
			return uint16(r.IntN(0x400)) | uint16(r.IntN(2))<<15 // subnormal or zero
		case 1:
			return []uint16{0x7bff, 0xfbff, 0, 0x8000, 1, 0x8001}[r.IntN(6)]
		}
		for {
			h := uint16(r.Uint32())
			if h&0x7c00 != 0x7c00 {
				return h
			}
		}
	}
	for _, ks := range quantKernelSets() {
		for _, stride := range []int{32, 64, 96, 768, 800, 1, 17, 40} {
			for _, qScale := range []float64{1, 1e-3, 1e-30, 1e-40} {
				nr, nq, off := r.IntN(14), 1+r.IntN(9), r.IntN(32)
				name := fmt.Sprintf("%s/stride %d/rows %d/queries %d/offset %d/query scale %g", ks.name, stride, nr, nq, off, qScale)
				rows := make([]uint16, off+nr*stride)[off:]
				for i := range rows {
					rows[i] = half(r)
				}
				qs := make([]float32, off+nq*stride)[off:]
				for i := range qs {
					qs[i] = float32((2*r.Float64() - 1) * qScale)
				}
				tile := make([]float32, 1+nq*nr)[1:]
				ks.f16Tile(tile, qs, nq, rows, nr, stride)
				g := gamma(stride + 1)
				abs := float64(stride+1) * 0x1p-149
				for j := range nq {
					q := qs[j*stride : (j+1)*stride]
					got := make([]float32, 1+nr)[1:]
					ks.f16Rows(got, q, rows, stride)
					for i := range nr {
						if math.Float32bits(tile[j*nr+i]) != math.Float32bits(got[i]) {
							t.Fatalf("%s query %d row %d: tile %g, rows %g (one order of sums)", name, j, i, tile[j*nr+i], got[i])
						}
						var sum, mag float64
						for t := range stride {
							p := float64(q[t]) * float64(f16toF32(rows[i*stride+t])) // exact in float64
							sum += p
							mag += math.Abs(p)
						}
						// float64's own rounding of sum: at most stride·2^-53·mag.
						if d := math.Abs(float64(got[i]) - sum); d > g*mag+abs+float64(stride)*0x1p-53*mag {
							t.Fatalf("%s query %d row %d: %g, float64 %g: off by %g, bound %g", name, j, i, got[i], sum, d, g*mag+abs)
						}
					}
				}
			}
		}
	}
}

// The sets list the same names kernelset reports.
func TestQuantKernelSetNames(t *testing.T) {
	var names []string
	for _, ks := range quantKernelSets() {
		names = append(names, ks.name)
	}
	if !slices.Equal(names, QuantKernelSets()) {
		t.Fatalf("%v vs %v", names, QuantKernelSets())
	}
}
