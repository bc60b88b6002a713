//go:build (amd64 || arm64) && !purego

package exact

// The assembly kernel sets have two shapes (quant_amd64.go,
// quant_arm64.go): a rows kernel over groups of four rows, and a panel of
// a few queries by four rows. wrapRows and wrapTile give them the kernel
// set's slice signatures, for every element type: D the scores, Q the
// query's elements, R the rows'. They check the slices up front, so the
// assembly stays inside them (a bad call is a recovered panic, not a wild
// read), score the rows left after the last group of four one at a time
// with a stride of zero (the same order as any other row), and the queries
// after the last panel group with the rows kernel (the panel's order too).
// arm64's int8 kernels, which leave a tail of each row to Go, have
// wrappers of their own.

type (
	rowsAsm[D, Q, R any]  func(dst *D, q *Q, rows *R, stride, n, groups int)
	panelAsm[D, Q, R any] func(dst *D, ldd int, qs *Q, qstride int, rows *R, rstride, n, groups int)
	f16RowsAsm            = rowsAsm[float32, float32, uint16]
	f16PanelAsm           = panelAsm[float32, float32, uint16]
)

// wrapRows makes a rows kernel of k, an assembly kernel that scores groups
// of four rows against one query of a multiple of width elements; other
// lengths take the generic kernel.
func wrapRows[D, Q, R any](k rowsAsm[D, Q, R], width int, generic func(dst []D, q []Q, rows []R, stride int)) func(dst []D, q []Q, rows []R, stride int) {
	return func(dst []D, q []Q, rows []R, stride int) {
		nr, n := len(dst), len(q)
		if nr == 0 {
			return
		}
		if n == 0 || n%width != 0 {
			generic(dst, q, rows, stride)
			return
		}
		_ = rows[(nr-1)*stride+n-1]
		if g := nr / 4; g > 0 {
			k(&dst[0], &q[0], &rows[0], stride, n, g)
		}
		var four [4]D
		for i := nr &^ 3; i < nr; i++ {
			k(&four[0], &q[0], &rows[i*stride], 0, n, 1)
			dst[i] = four[0]
		}
	}
}

// wrapTile makes a tile kernel of k, a panel of nq queries by four rows
// over strides that are a multiple of width elements; the queries and rows
// the panels leave go through rk's rows kernel, other strides through the
// generic kernel.
func wrapTile[D, Q, R any](k panelAsm[D, Q, R], rk rowsAsm[D, Q, R], nq, width int,
	genericRows func(dst []D, q []Q, rows []R, stride int),
	generic func(dst []D, qs []Q, nqs int, rows []R, nr, stride int)) func(dst []D, qs []Q, nqs int, rows []R, nr, stride int) {
	rows1 := wrapRows(rk, width, genericRows)
	return func(dst []D, qs []Q, nqs int, rows []R, nr, stride int) {
		if nr == 0 || nqs == 0 {
			return
		}
		if stride == 0 || stride%width != 0 {
			generic(dst, qs, nqs, rows, nr, stride)
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

// wrapF16Rows and wrapF16Tile are wrapRows and wrapTile of the float16
// kernels, width halves a step.
func wrapF16Rows(k f16RowsAsm, width int) f16RowsKernel { return wrapRows(k, width, f16RowsGo) }

func wrapF16Tile(k f16PanelAsm, rk f16RowsAsm, nq, width int) f16TileKernel {
	return wrapTile(k, rk, nq, width, f16RowsGo, f16TileGo)
}
