package fallback

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/umbravec/umbra/internal/parallel"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/internal/topk"
)

// The reference workload of umbra's benchmarks: 50,000 rows of 768 floats
// (153.6 MB, a typical sentence-embedding size), one query or a batch of
// 64, k = 10. ReadPass is the floor: one vector read pass over
// the same slab on the same goroutines, doing nothing with the data. Quote
// Search/ReadPass and SearchBatch/(64*Search) ratios, not absolute times.
const (
	benchRows  = 50_000
	benchDim   = 768
	benchK     = 10
	benchBatch = 64
)

var benchData = sync.OnceValue(func() Slab {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]float32, benchRows*benchDim)
	for i := range data {
		data[i] = 2*r.Float32() - 1
	}
	return Slab{Data: data, Rows: benchRows, Dim: benchDim, Stride: benchDim}
})

func benchQueries(n int) [][]float32 {
	r := rand.New(rand.NewPCG(3, 4))
	qs := make([][]float32, n)
	for i := range qs {
		qs[i] = testkit.Vector(r, benchDim)
	}
	return qs
}

var sink float32

func BenchmarkReadPass(b *testing.B) {
	s := benchData()
	b.SetBytes(int64(len(s.Data) * 4))
	for b.Loop() {
		sum, err := ReadPass(context.Background(), s, 0)
		if err != nil {
			b.Fatal(err)
		}
		sink += sum
	}
}

func benchKernels(b *testing.B, f func(b *testing.B)) {
	for _, ks := range kernelSets() {
		b.Run(ks.name, func(b *testing.B) {
			saved := active
			active = ks
			defer func() { active = saved }()
			f(b)
		})
	}
}

func BenchmarkSearch(b *testing.B) {
	s := benchData()
	q := benchQueries(1)[0]
	for _, m := range []Metric{Dot, L2} {
		b.Run(m.String(), func(b *testing.B) {
			benchKernels(b, func(b *testing.B) {
				b.SetBytes(int64(len(s.Data) * 4))
				for b.Loop() {
					if _, err := Search(context.Background(), s, q, benchK, m, 0); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// SetBytes counts the slab once per batch, so MB/s well above ReadPass's
// means rows are being reused from cache across the queries of a block.
func BenchmarkSearchBatch(b *testing.B) {
	s := benchData()
	qs := benchQueries(benchBatch)
	for _, m := range []Metric{Dot, L2} {
		b.Run(m.String(), func(b *testing.B) {
			benchKernels(b, func(b *testing.B) {
				b.SetBytes(int64(len(s.Data) * 4))
				for b.Loop() {
					if _, err := SearchBatch(context.Background(), s, qs, benchK, m, 0); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchBatch, "ns/query")
			})
		})
	}
}

// BenchmarkKernels measures the kernels alone on a tile of rows that sits
// in L2, where they are bound by arithmetic rather than by memory: the
// ceiling that Search and SearchBatch on a large slab are compared with.
func BenchmarkKernels(b *testing.B) {
	const stride, nr, nq = 768, 80, 64
	rows := make([]float32, nr*stride)
	qs := make([]float32, nq*stride)
	for i := range rows {
		rows[i] = float32(i%7) * 0.1
	}
	for i := range qs {
		qs[i] = float32(i%5) * 0.1
	}
	dst := make([]float32, nq*nr)
	for _, ks := range kernelSets() {
		for _, m := range []Metric{Dot, L2} {
			b.Run(fmt.Sprintf("rows/%v/%s", m, ks.name), func(b *testing.B) {
				k := ks.rows(m)
				for b.Loop() {
					k(dst[:nr], qs[:stride], rows, stride)
				}
				b.ReportMetric(float64(nr*stride)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFMA/s")
			})
			b.Run(fmt.Sprintf("tile/%v/%s", m, ks.name), func(b *testing.B) {
				k := ks.tile(m)
				for b.Loop() {
					k(dst, qs, nq, rows, nr, stride)
				}
				b.ReportMetric(float64(nq*nr*stride)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFMA/s")
			})
		}
	}
}

// BenchmarkTiesByID is what ranking equal scores by ID (Slab.IDs, a
// shuffled permutation) costs over ranking them by row (IDs nil, what the
// engine passes while IDs increase with the row), as a ratio of two
// searches timed in the same loop, taking turns at going first: on the
// reference workload, whose scores are distinct (the IDs are never looked
// at), and on 200,000 short rows that are all one of four vectors, so
// that every score ties and every comparison past the score reads two IDs
// (the worst case). Quote the id/row ratio.
func BenchmarkTiesByID(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	const tieRows, tieDim = 200_000, 16
	four := [][]float32{testkit.Vector(r, tieDim), testkit.Vector(r, tieDim), testkit.Vector(r, tieDim), testkit.Vector(r, tieDim)}
	tied := Slab{Data: make([]float32, tieRows*tieDim), Rows: tieRows, Dim: tieDim, Stride: tieDim}
	for i := range tieRows {
		copy(tied.Data[i*tieDim:], four[r.IntN(4)])
	}
	cases := []struct {
		name string
		s    Slab
		q    []float32
	}{
		{"distinct", benchData(), benchQueries(1)[0]},
		{"ties", tied, testkit.Vector(r, tieDim)},
	}
	for _, c := range cases {
		ids := make([]uint64, c.s.Rows)
		for i, v := range r.Perm(c.s.Rows) {
			ids[i] = uint64(v)
		}
		byID := c.s
		byID.IDs = ids
		for _, k := range []int{benchK, 1000} {
			b.Run(fmt.Sprintf("%s/k%d", c.name, k), func(b *testing.B) {
				var rowTime, idTime time.Duration
				turn := false
				for b.Loop() {
					slabs, times := [2]Slab{c.s, byID}, [2]*time.Duration{&rowTime, &idTime}
					if turn {
						slabs[0], slabs[1], times[0], times[1] = slabs[1], slabs[0], times[1], times[0]
					}
					turn = !turn
					for i, s := range slabs {
						start := time.Now()
						if _, err := Search(context.Background(), s, c.q, k, Dot, 0); err != nil {
							b.Fatal(err)
						}
						*times[i] += time.Since(start)
					}
				}
				b.ReportMetric(float64(rowTime.Nanoseconds())/float64(b.N), "ns/byrow")
				b.ReportMetric(float64(idTime.Nanoseconds())/float64(b.N), "ns/byid")
				b.ReportMetric(float64(idTime)/float64(rowTime), "id/row")
			})
		}
	}
}

// BenchmarkScanShape compares, in one process and taking turns, the
// single-query scan as it is (Search: contiguous shares, one or eight rows
// in step by the stride) with the shape it had before (four rows in step,
// 64 KiB blocks handed out in turn), for every kernel set, at 50,000 and
// 200,000 rows of 768 (UMBRA_BENCH_BIG=1 for the second: 614 MB). Quote
// new/old.
func BenchmarkScanShape(b *testing.B) {
	sizes := []int{benchRows}
	if os.Getenv("UMBRA_BENCH_BIG") == "1" {
		sizes = append(sizes, 200_000)
	}
	q := benchQueries(1)[0]
	for _, rows := range sizes {
		s := benchData()
		if rows != benchRows {
			r := rand.New(rand.NewPCG(7, 8))
			data := make([]float32, rows*benchDim)
			for i := range data {
				data[i] = 2*r.Float32() - 1
			}
			s = Slab{Data: data, Rows: rows, Dim: benchDim, Stride: benchDim}
		}
		for _, ks := range kernelSets() {
			b.Run(fmt.Sprintf("rows=%d/%s", rows, ks.name), func(b *testing.B) {
				saved := active
				active = ks
				defer func() { active = saved }()
				var oldT, newT time.Duration
				turn := false
				for b.Loop() {
					calls := [2]func(){
						func() { oldScan(s, q, benchK) },
						func() {
							if _, err := Search(context.Background(), s, q, benchK, Dot, 0); err != nil {
								b.Fatal(err)
							}
						},
					}
					times := [2]*time.Duration{&oldT, &newT}
					if turn {
						calls[0], calls[1], times[0], times[1] = calls[1], calls[0], times[1], times[0]
					}
					turn = !turn
					for i, call := range calls {
						start := time.Now()
						call()
						*times[i] += time.Since(start)
					}
				}
				b.ReportMetric(float64(oldT.Nanoseconds())/float64(b.N), "ns/old")
				b.ReportMetric(float64(newT.Nanoseconds())/float64(b.N), "ns/new")
				b.ReportMetric(float64(newT)/float64(oldT), "new/old")
			})
		}
	}
}

// oldScan is Search's dot scan in its former shape: the four-row kernel
// over 64 KiB blocks that the workers take in turn (parallel.Run).
func oldScan(s Slab, q []float32, k int) []Hit {
	kern := active.dotRows4
	p := newPlan(s, rowsFor(blockBytes, s.Stride, 8))
	w := parallel.Workers(0, p.nblocks, s.Rows*s.Stride)
	tops := make([]topk.Heap, w)
	bufs := make([][]float32, w)
	for i := range tops {
		tops[i] = topk.New(k, s.Rows/w+p.blockRows, nil)
		bufs[i] = make([]float32, p.blockRows)
	}
	_ = parallel.Run(context.Background(), w, p.nblocks, func(wk, b int) {
		lo, rows, n := p.block(b)
		buf := bufs[wk][:n]
		kern(buf, q, rows, p.stride)
		topk.ToKeys(Dot, buf)
		tops[wk].OfferAllowed(buf, lo, nil)
	})
	for i := 1; i < w; i++ {
		tops[0].Merge(&tops[i])
	}
	return tops[0].Result(Dot)
}
