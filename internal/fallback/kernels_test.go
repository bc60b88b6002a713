package fallback

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/umbravec/umbra/internal/testkit"
)

// kernelSets is every kernel set this machine runs, generic last.
func kernelSets() []kernelSet { return append(asmKernels(), genericKernels) }

// forEachKernel runs f once per kernel set with that set active.
func forEachKernel(t *testing.T, f func(t *testing.T)) {
	for _, ks := range kernelSets() {
		t.Run(ks.name, func(t *testing.T) {
			saved := active
			active = ks
			defer func() { active = saved }()
			f(t)
		})
	}
}

// Assembly and Go sum in different orders, so they agree to rounding; the
// lengths cover every tail a vector width can leave.
func TestAsmKernelsMatchGeneric(t *testing.T) {
	sets := asmKernels()
	if len(sets) == 0 {
		t.Skip("no assembly kernels on this machine")
	}
	r := testkit.Rand(t)
	for _, ks := range sets {
		for _, m := range []Metric{Dot, L2} {
			for n := 1; n <= 70; n++ {
				testKernelAgainstGeneric(t, r, ks, m, n, n+r.IntN(3))
			}
			for _, n := range []int{127, 128, 129, 767, 768, 1536, 1537} {
				testKernelAgainstGeneric(t, r, ks, m, n, n+r.IntN(9))
			}
		}
	}
}

func testKernelAgainstGeneric(t *testing.T, r interface {
	IntN(int) int
	Float32() float32
}, ks kernelSet, m Metric, n, stride int) {
	t.Helper()
	nr := 1 + r.IntN(11)
	nq := 1 + r.IntN(9)
	rows := make([]float32, nr*stride)
	for i := range nr {
		for d := range n {
			rows[i*stride+d] = 2*r.Float32() - 1
		}
	}
	qs := make([]float32, nq*n)
	for i := range qs {
		qs[i] = 2*r.Float32() - 1
	}
	// The kernels see n-long queries over rows of the given stride; that
	// is how odd lengths reach them without padding.
	got := make([]float32, nr)
	want := make([]float32, nr)
	tile := make([]float32, nq*nr)
	name := fmt.Sprintf("%s/%v/n%d/stride%d/rows%d/queries%d", ks.name, m, n, stride, nr, nq)
	for j := range nq {
		q := qs[j*n : (j+1)*n]
		ks.rows(m)(got, q, rows, stride)
		genericKernels.rows(m)(want, q, rows, stride)
		for i := range nr {
			ref, mag := ref64(m, rows[i*stride:i*stride+n], q)
			if d := math.Abs(float64(got[i]) - ref); d > testkit.Tolerance(ref, mag) {
				t.Fatalf("%s: query %d row %d: asm %g, float64 %g (generic %g)", name, j, i, got[i], ref, want[i])
			}
		}
	}
	if n != stride {
		return // tile kernels take queries of the rows' stride
	}
	ks.tile(m)(tile, qs, nq, rows, nr, stride)
	for j := range nq {
		ks.rows(m)(got, qs[j*n:(j+1)*n], rows, stride)
		for i := range nr {
			if tile[j*nr+i] != got[i] {
				t.Fatalf("%s: query %d row %d: tile %g, rows %g: pairs must be scored in one order",
					name, j, i, tile[j*nr+i], got[i])
			}
		}
	}
}

func TestReadPass(t *testing.T) {
	r := testkit.Rand(t)
	// Every kernel set's read kernel against float64, at lengths around
	// the vector widths and their multiples of four.
	for _, ks := range kernelSets() {
		for _, n := range []int{0, 1, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 100, 255, 256, 257, 1000} {
			p := testkit.Vector(r, n)
			var want float64
			for _, v := range p {
				want += float64(v)
			}
			if got := ks.read(p); math.Abs(float64(got)-want) > 1e-5*math.Max(1, float64(n)) {
				t.Errorf("%s n %d: sum %g, float64 %g", ks.name, n, got, want)
			}
		}
	}
	// The exported pass sums every float of the slab, padding included.
	for _, rows := range []int{0, 1, 7, 3001} {
		d := newDataset(r, rows, 13, raw)
		s := newSlab(d.rows, 13, 16, r.IntN(2) == 0)
		var want float64
		for _, v := range s.Data {
			want += float64(v)
		}
		got, err := ReadPass(context.Background(), s, 1+r.IntN(3))
		noErr(t, err)
		if math.Abs(float64(got)-want) > 1e-4*math.Max(1, float64(len(s.Data))) {
			t.Errorf("rows %d: ReadPass %g, float64 %g", rows, got, want)
		}
	}
	_, err := ReadPass(context.Background(), Slab{Data: make([]float32, 3), Rows: 2, Dim: 2, Stride: 2}, 0)
	isErr(t, err, ErrSlabShape)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := newDataset(r, 3000, 64, raw)
	_, err = ReadPass(ctx, newSlab(d.rows, 64, 64, false), 2)
	isErr(t, err, context.Canceled)
}

// A rows kernel scores a row the same bits whichever rows share its call:
// long rows are walked eight in step, short ones and leftovers one at a
// time, and both must sum a pair in the one order the panels use.
func TestRowsKernelBitsAnyGrouping(t *testing.T) {
	r := testkit.Rand(t)
	forEachKernel(t, func(t *testing.T) {
		for _, m := range []Metric{Dot, L2} {
			for _, n := range []int{5, 96, 500, 511, 512, 513, 768, 1029} {
				stride := n + r.IntN(4)
				nr := 1 + r.IntN(27)
				rows := testkit.Vector(r, nr*stride)
				q := testkit.Vector(r, n)
				all := make([]float32, nr)
				active.rows(m)(all, q, rows, stride)
				one := make([]float32, 1)
				for i := range nr {
					active.rows(m)(one, q, rows[i*stride:], stride)
					if math.Float32bits(one[0]) != math.Float32bits(all[i]) {
						t.Fatalf("%v n %d stride %d: row %d of %d scores %g alone, %g in one call", m, n, stride, i, nr, one[0], all[i])
					}
				}
			}
		}
	})
}
