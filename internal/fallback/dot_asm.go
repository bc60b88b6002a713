//go:build (amd64 || arm64) && !purego

package fallback

// The adapters from assembly kernels to the kernel set's signatures, shared
// by every architecture with assembly (dot_amd64.go, dot_arm64.go): the
// kernels take pointers and counts, score rows in groups of four, and
// panels hold four rows against a group of queries.

type rowsAsm func(dst, q, rows *float32, stride, n, groups int)

type panelAsm func(dst *float32, ldd int, qs *float32, qstride int, rows *float32, rstride, n, groups int, pf *float32, pfLines int)

// wrapPanel adapts a panel kernel (four rows held while it walks groups of
// nq queries) to tileKernel. Rows left over after the last group of four,
// and queries after the last group of nq, go through the rows kernel.
func wrapPanel(k panelAsm, rk rowsAsm, nq int) tileKernel {
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
		gq := nqs / nq
		full := nr &^ 3
		if gq > 0 {
			// Prefetch the next four rows, spread over the query groups.
			lines := (4*stride*4 + 63) / 64
			per := (lines + gq - 1) / gq
			for i := 0; i < full; i += 4 {
				pf, n := &rows[i*stride], 0
				if i+4 < full {
					pf, n = &rows[(i+4)*stride], per
				}
				k(&dst[i], nr, &qs[0], stride, &rows[i*stride], stride, stride, gq, pf, n)
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
