//go:build (amd64 || arm64) && !purego

package exact

// The float16 kernels of both architectures' assembly sets have one shape
// (quant_amd64.go, quant_arm64.go): a rows kernel over groups of four rows
// and a panel of a few queries by four rows. These wrappers give them the
// kernel set's slice signatures.

type (
	f16RowsAsm  func(dst, q *float32, rows *uint16, stride, n, groups int)
	f16PanelAsm func(dst *float32, ldd int, qs *float32, qstride int, rows *uint16, rstride, n, groups int)
)

// wrapF16Rows makes a float16 rows kernel of k, an assembly kernel that
// scores groups of four rows against one query of a multiple of width
// halves; other lengths take the generic kernel, and the rows past the
// last group of four are scored one at a time.
func wrapF16Rows(k f16RowsAsm, width int) f16RowsKernel {
	return func(dst, q []float32, rows []uint16, stride int) {
		nr, n := len(dst), len(q)
		if nr == 0 {
			return
		}
		if n == 0 || n%width != 0 {
			f16RowsGo(dst, q, rows, stride)
			return
		}
		_ = rows[(nr-1)*stride+n-1]
		if g := nr / 4; g > 0 {
			k(&dst[0], &q[0], &rows[0], stride, n, g)
		}
		var four [4]float32
		for i := nr &^ 3; i < nr; i++ {
			k(&four[0], &q[0], &rows[i*stride], 0, n, 1)
			dst[i] = four[0]
		}
	}
}

// wrapF16Tile makes a float16 tile kernel of k, a panel of nq queries by
// four rows over strides that are a multiple of width halves; the queries
// and rows the panels leave go through rk's rows kernel.
func wrapF16Tile(k f16PanelAsm, rk f16RowsAsm, nq, width int) f16TileKernel {
	rows1 := wrapF16Rows(rk, width)
	return func(dst, qs []float32, nqs int, rows []uint16, nr, stride int) {
		if nr == 0 || nqs == 0 {
			return
		}
		if stride == 0 || stride%width != 0 {
			f16TileGo(dst, qs, nqs, rows, nr, stride)
			return
		}
		_ = rows[nr*stride-1]
		_ = qs[nqs*stride-1]
		_ = dst[nqs*nr-1]
		gq := nqs / nq
		full := nr &^ 3
		if gq > 0 {
			for i := 0; i < full; i += 4 {
				k(&dst[i], nr, &qs[0], stride, &rows[i*stride], stride, stride, gq)
			}
		}
		for j := range nqs {
			q := qs[j*stride : (j+1)*stride]
			if j >= gq*nq {
				rows1(dst[j*nr:(j+1)*nr], q, rows, stride)
			} else if full < nr {
				rows1(dst[j*nr+full:(j+1)*nr], q, rows[full*stride:], stride)
			}
		}
	}
}
