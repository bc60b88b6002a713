//go:build amd64 && !purego

package fallback

import "golang.org/x/sys/cpu"

//go:generate go run gen_amd64.go

// Assembly kernels (dot_amd64.s). Rows kernels score groups of four rows
// against one query; tile kernels score groups of four rows against two
// (AVX2) or four (AVX-512) queries held in registers, so each row load
// feeds several FMAs. Strides and n are in floats.

//go:noescape
func dotRowsAVX2(dst, q, rows *float32, stride, n, groups int)

//go:noescape
func l2RowsAVX2(dst, q, rows *float32, stride, n, groups int)

//go:noescape
func dotRowsAVX512(dst, q, rows *float32, stride, n, groups int)

//go:noescape
func l2RowsAVX512(dst, q, rows *float32, stride, n, groups int)

//go:noescape
func dotTile2x4AVX2(dst *float32, ldd int, qs *float32, qstride int, rows *float32, rstride, n, groups int)

//go:noescape
func l2Tile2x4AVX2(dst *float32, ldd int, qs *float32, qstride int, rows *float32, rstride, n, groups int)

//go:noescape
func dotTile4x4AVX512(dst *float32, ldd int, qs *float32, qstride int, rows *float32, rstride, n, groups int)

//go:noescape
func l2Tile4x4AVX512(dst *float32, ldd int, qs *float32, qstride int, rows *float32, rstride, n, groups int)

//go:noescape
func sumAVX2(x *float32, n int) float32

type rowsAsm func(dst, q, rows *float32, stride, n, groups int)

type tileAsm func(dst *float32, ldd int, qs *float32, qstride int, rows *float32, rstride, n, groups int)

var (
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL
)

func init() {
	if ks := asmKernels(); len(ks) > 0 {
		active = ks[0]
	}
}

// asmKernels lists the assembly kernel sets this CPU runs, preferred first.
func asmKernels() []kernelSet {
	var ks []kernelSet
	if hasAVX512 {
		ks = append(ks, kernelSet{
			name:     "avx512",
			dotRows:  wrapRows(dotRowsAVX512),
			l2Rows:   wrapRows(l2RowsAVX512),
			dotTile:  wrapTile(dotTile4x4AVX512, dotRowsAVX512, 4),
			l2Tile:   wrapTile(l2Tile4x4AVX512, l2RowsAVX512, 4),
			tileRows: 4,
		})
	}
	if hasAVX2 {
		ks = append(ks, kernelSet{
			name:     "avx2+fma",
			dotRows:  wrapRows(dotRowsAVX2),
			l2Rows:   wrapRows(l2RowsAVX2),
			dotTile:  wrapTile(dotTile2x4AVX2, dotRowsAVX2, 2),
			l2Tile:   wrapTile(l2Tile2x4AVX2, l2RowsAVX2, 2),
			tileRows: 4,
		})
	}
	return ks
}

// wrapRows adapts a four-row assembly kernel to rowsKernel. The slice
// checks up front are what keep the assembly inside its slices: they turn
// a bad call into a recovered panic instead of a wild read.
func wrapRows(k rowsAsm) rowsKernel {
	return func(dst, q, rows []float32, stride int) {
		nr, n := len(dst), len(q)
		if nr == 0 {
			return
		}
		if n == 0 {
			clear(dst)
			return
		}
		_ = rows[(nr-1)*stride+n-1]
		if g := nr / 4; g > 0 {
			k(&dst[0], &q[0], &rows[0], stride, n, g)
		}
		// A stride of zero makes the kernel score one row four times, in
		// the same order as any other row, so leftovers score identically.
		var four [4]float32
		for i := nr &^ 3; i < nr; i++ {
			k(&four[0], &q[0], &rows[i*stride], 0, n, 1)
			dst[i] = four[0]
		}
	}
}

// wrapTile adapts a tile kernel holding nq queries to tileKernel; queries
// left over after the last full tile go through the rows kernel, which
// scores a pair in the same order.
func wrapTile(k tileAsm, rk rowsAsm, nq int) tileKernel {
	rows1 := wrapRows(rk)
	return func(dst, qs []float32, nqs int, rows []float32, nr, stride int) {
		if nr == 0 || nqs == 0 {
			return
		}
		if stride == 0 {
			clear(dst[:nqs*nr])
			return
		}
		_ = rows[nr*stride-1]
		_ = qs[nqs*stride-1]
		_ = dst[nqs*nr-1]
		g := nr / 4
		j := 0
		for ; j+nq <= nqs; j += nq {
			if g > 0 {
				k(&dst[j*nr], nr, &qs[j*stride], stride, &rows[0], stride, stride, g)
			}
			var tile [16]float32
			for i := nr &^ 3; i < nr; i++ {
				k(&tile[0], 4, &qs[j*stride], stride, &rows[i*stride], 0, stride, 1)
				for jj := range nq {
					dst[(j+jj)*nr+i] = tile[4*jj]
				}
			}
		}
		for ; j < nqs; j++ {
			rows1(dst[j*nr:(j+1)*nr], qs[j*stride:(j+1)*stride], rows, stride)
		}
	}
}

// readPass sums x with plain vector loads: the benchmarks' floor.
func readPass(x []float32) float32 {
	n := len(x) &^ 31
	var s float32
	if hasAVX2 && n > 0 {
		s = sumAVX2(&x[0], n)
	}
	for _, v := range x[n:] {
		s += v
	}
	return s
}
