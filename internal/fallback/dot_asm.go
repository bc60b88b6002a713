//go:build (amd64 || arm64) && !purego

package fallback

// The adapters from assembly kernels to the kernel set's signatures, shared
// by every architecture with assembly (dot_amd64.go, dot_arm64.go): the
// kernels take pointers and counts, score rows one, four or eight at a
// time, and panels hold four rows against a group of queries.

type rowsAsm func(dst, q, rows *float32, stride, n, groups int)

type panelAsm func(dst *float32, ldd int, qs *float32, qstride int, rows *float32, rstride, n, groups int, pf *float32, pfLines int)

// wrapPanel adapts a panel kernel (four rows held while it walks groups of
// nq queries) to tileKernel. Rows left over after the last group of four,
// and queries after the last group of nq, go through the rows kernel rows1.
func wrapPanel(k panelAsm, rows1 rowsKernel, nq int) tileKernel {
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

// longRow is the stride (floats) from which a single-query scan walks eight
// rows in step instead of one at a time. One row at a time reads memory
// strictly in order, which short rows need to stream at the memory's pace;
// a long row's single chain of fused multiply-adds is long enough to bound
// a core, and eight rows in step (with a software prefetch ahead of each)
// keep the memory busy instead. Both orders give the same bits.
const longRow = 512

// wrapRows adapts the assembly kernels to rowsKernel: one that walks one
// row at a time, and one that walks eight in step (nil: none), chosen by
// the stride. The slice checks up front are what keep the assembly inside
// its slices: they turn a bad call into a recovered panic instead of a wild
// read.
func wrapRows(one, eight rowsAsm) rowsKernel {
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
		done := 0
		if eight != nil && stride >= longRow {
			if g := nr / 8; g > 0 {
				eight(&dst[0], &q[0], &rows[0], stride, n, g)
				done = g * 8
			}
		}
		if done < nr {
			one(&dst[done], &q[0], &rows[done*stride], stride, n, nr-done)
		}
	}
}

// wrapStream adapts a stream kernel, which reads a multiple of unit floats,
// to the read floor's kernel: the rest is summed in Go.
func wrapStream(k func(p *float32, n int) float32, unit int) func([]float32) float32 {
	return func(p []float32) float32 {
		n := len(p) / unit * unit
		var s float32
		if n > 0 {
			s = k(&p[0], n)
		}
		return s + readGo(p[n:])
	}
}

// wrapRows4 adapts a kernel that scores rows in groups of four to
// rowsKernel.
func wrapRows4(k rowsAsm) rowsKernel {
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

type gatherAsm func(dst, q, base *float32, idx *uint32, stride, n, count, ahead int)

// gatherAhead is how many rows ahead a gather kernel prefetches: those in
// 64 KiB, at least 8 and at most 48. Measured on a Zen 5 EPYC over rows
// scattered through 384 and 614 MB: 96-float rows gathered fastest 42 rows
// ahead (16 KiB; 170 rows, 64 KiB, was slower), 768-float rows 21 rows
// ahead (64 KiB; 5 rows, 16 KiB, was slower); two rows ahead cost 1.4 to
// 2.2 times as much. (Rows already in cache pay for it: 1,000 cached rows
// of 96 floats gather in 11 µs with it, 6 µs without.)
func gatherAhead(stride int) int { return min(48, max(8, (64<<10)/max(1, 4*stride))) }

// wrapGather adapts a gather kernel to gatherKernel. The check of the
// largest listed row up front is what keeps the assembly inside data.
func wrapGather(k gatherAsm) gatherKernel {
	return func(dst, q, data []float32, rows []uint32, stride int) {
		n := len(dst)
		if n == 0 {
			return
		}
		if len(q) == 0 {
			clear(dst)
			return
		}
		top := uint32(0)
		for _, r := range rows[:n] {
			top = max(top, r)
		}
		_ = data[int(top)*stride+len(q)-1]
		k(&dst[0], &q[0], &data[0], &rows[0], stride, len(q), n, gatherAhead(stride))
	}
}
