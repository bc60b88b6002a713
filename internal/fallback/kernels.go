package fallback

// The kernels below score whole strides: every row slice and query handed
// to them is Stride long (padding is zero, so it adds nothing to either
// metric). A metric's rows and tile kernels must compute each (row, query)
// pair in the same order, so that Search and SearchBatch return
// bit-identical scores and duplicate rows tie exactly.

// rowsKernel writes dst[i] = score(q, rows[i*stride:(i+1)*stride]) for every
// i < len(dst); len(q) == stride and len(rows) >= len(dst)*stride.
type rowsKernel func(dst, q, rows []float32, stride int)

// tileKernel writes dst[j*nr+i] = score(qs[j*stride:(j+1)*stride],
// rows[i*stride:(i+1)*stride]) for j < nq, i < nr.
type tileKernel func(dst, qs []float32, nq int, rows []float32, nr, stride int)

// gatherKernel writes dst[j] = score(q, row rows[j]) for every j <
// len(dst), row i being data[i*stride : i*stride+len(q)]: the rows kernel's
// scores, bit for bit, of rows scattered over the slab. len(q) == stride;
// every listed row lies whole in data.
type gatherKernel func(dst, q, data []float32, rows []uint32, stride int)

type kernelSet struct {
	name      string
	dotRows   rowsKernel
	l2Rows    rowsKernel
	dotGather gatherKernel
	l2Gather  gatherKernel
	// dotRows4 is the dot kernel walking four rows in step, the shape
	// every scan had before the rows kernels chose one or eight by the
	// stride: benchmarks compare the two (BenchmarkScanShape).
	dotRows4 rowsKernel
	dotTile  tileKernel
	l2Tile   tileKernel
	// read is the floor's kernel: the sum of p, read strictly in order with
	// the widest loads the set has, no query and no row structure.
	read func(p []float32) float32
}

var genericKernels = kernelSet{
	name:      "generic",
	dotRows:   dotRowsGo,
	l2Rows:    l2RowsGo,
	dotGather: gatherEach(dotRowsGo),
	dotRows4:  dotRowsGo,
	l2Gather:  gatherEach(l2RowsGo),
	dotTile:   dotTileGo,
	l2Tile:    l2TileGo,
	read:      readGo,
}

// active is chosen once at init (see dot_amd64.go, dot_arm64.go,
// dot_generic.go) and only read afterwards.
var active = genericKernels

func (ks *kernelSet) rows(m Metric) rowsKernel {
	if m == L2 {
		return ks.l2Rows
	}
	return ks.dotRows
}

func (ks *kernelSet) gather(m Metric) gatherKernel {
	if m == L2 {
		return ks.l2Gather
	}
	return ks.dotGather
}

// gatherEach is a gatherKernel that calls k once per row: for kernels that
// lose nothing scoring one row at a time.
func gatherEach(k rowsKernel) gatherKernel {
	return func(dst, q, data []float32, rows []uint32, stride int) {
		for j, r := range rows[:len(dst)] {
			o := int(r) * stride
			k(dst[j:j+1], q, data[o:o+len(q)], stride)
		}
	}
}

// gatherCopy is a gatherKernel for kernels that score rows in groups:
// it copies up to eight listed rows side by side and scores them in one
// call (a row's score does not depend on the rows beside it).
func gatherCopy(k rowsKernel) gatherKernel {
	return func(dst, q, data []float32, rows []uint32, stride int) {
		n := len(dst)
		if n == 0 {
			return
		}
		buf := make([]float32, min(n, 8)*stride)
		for j := 0; j < n; j += 8 {
			m := min(8, n-j)
			for i, r := range rows[j : j+m] {
				o := int(r) * stride
				copy(buf[i*stride:(i+1)*stride], data[o:o+len(q)])
			}
			k(dst[j:j+m], q, buf, stride)
		}
	}
}

func (ks *kernelSet) tile(m Metric) tileKernel {
	if m == L2 {
		return ks.l2Tile
	}
	return ks.dotTile
}

// dotGo keeps eight independent sums so the loop is bound by loads rather
// than by the latency of one long chain of additions.
func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		x := a[i : i+8 : i+8]
		y := b[i : i+8 : i+8]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		s4 += x[4] * y[4]
		s5 += x[5] * y[5]
		s6 += x[6] * y[6]
		s7 += x[7] * y[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

func l2Go(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		x := a[i : i+8 : i+8]
		y := b[i : i+8 : i+8]
		d0 := x[0] - y[0]
		d1 := x[1] - y[1]
		d2 := x[2] - y[2]
		d3 := x[3] - y[3]
		d4 := x[4] - y[4]
		d5 := x[5] - y[5]
		d6 := x[6] - y[6]
		d7 := x[7] - y[7]
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
		s4 += d4 * d4
		s5 += d5 * d5
		s6 += d6 * d6
		s7 += d7 * d7
	}
	for ; i < len(a); i++ {
		d := a[i] - b[i]
		s0 += d * d
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

func dotRowsGo(dst, q, rows []float32, stride int) {
	for i := range dst {
		dst[i] = dotGo(q, rows[i*stride:i*stride+len(q)])
	}
}

func l2RowsGo(dst, q, rows []float32, stride int) {
	for i := range dst {
		dst[i] = l2Go(q, rows[i*stride:i*stride+len(q)])
	}
}

// readGo sums p in order into four running sums.
func readGo(p []float32) float32 {
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= len(p); j += 4 {
		x := p[j : j+4 : j+4]
		s0 += x[0]
		s1 += x[1]
		s2 += x[2]
		s3 += x[3]
	}
	for ; j < len(p); j++ {
		s0 += p[j]
	}
	return (s0 + s1) + (s2 + s3)
}

// The tile kernels walk rows outermost: a row stays in L1 while every query
// of the block (from L2) meets it, as in the assembly panels.
func dotTileGo(dst, qs []float32, nq int, rows []float32, nr, stride int) {
	for i := 0; i < nr; i++ {
		row := rows[i*stride : (i+1)*stride]
		for j := 0; j < nq; j++ {
			dst[j*nr+i] = dotGo(qs[j*stride:(j+1)*stride], row)
		}
	}
}

func l2TileGo(dst, qs []float32, nq int, rows []float32, nr, stride int) {
	for i := 0; i < nr; i++ {
		row := rows[i*stride : (i+1)*stride]
		for j := 0; j < nq; j++ {
			dst[j*nr+i] = l2Go(qs[j*stride:(j+1)*stride], row)
		}
	}
}
