package exact

import (
	"context"
	"testing"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
)

// Compressed scans of the reference workload, exact and approximate, next
// to BenchmarkReadPass (the float32 floor), with each kernel set this CPU
// runs (the first is the one chosen at init). Random uniform rows are the
// hardest case for the bounds (scores crowd together); cmd/bench measures
// embedding-like data.
func BenchmarkExactSearch(b *testing.B) {
	s := benchData()
	for _, ks := range quantKernelSets() {
		b.Run(ks.name, func(b *testing.B) {
			saved := activeQuant.Swap(&ks)
			defer activeQuant.Store(saved)
			benchExactSearch(b, s)
		})
	}
}

func benchExactSearch(b *testing.B, s fallback.Slab) {
	for _, p := range []core.Precision{core.F16, core.Int8} {
		c, err := NewCompressed(p, s.Dim)
		if err != nil {
			b.Fatal(err)
		}
		c.AppendSlab(s, 0)
		for _, nq := range []int{1, benchBatch} {
			qs := benchQueries(nq)
			for _, mode := range []string{"exact", "approx", "nofilter"} {
				approx := mode == "approx"
				if mode == "nofilter" && p != core.F16 {
					continue
				}
				name := p.String() + "/" + mode
				b.Run(name+"/q"+itoa(nq), func(b *testing.B) {
					// nofilter: float16 without scanF16Dot's block filter,
					// for the comparison in one run.
					f16Filter = mode != "nofilter"
					defer func() { f16Filter = true }()
					var st QuantStats
					for b.Loop() {
						_, s1, err := ExactSearchBatch(context.Background(), s, c, qs, benchK, core.Dot, 0, approx)
						if err != nil {
							b.Fatal(err)
						}
						st.Add(s1)
					}
					b.ReportMetric(float64(st.Rescored)/float64(max(1, st.Queries)), "rescored/query")
				})
			}
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// Compression is the extra cost an Add pays under a compressed precision:
// per row, compared with BenchmarkCopyRows (a plain copy of the same
// float32 rows).
func BenchmarkCompress(b *testing.B) {
	s := benchData()
	const rows = 5000
	part := fallback.Slab{Data: s.Data[:rows*s.Stride], Rows: rows, Dim: s.Dim, Stride: s.Stride}
	for _, p := range []core.Precision{core.F16, core.Int8} {
		b.Run(p.String(), func(b *testing.B) {
			b.SetBytes(int64(rows * s.Dim * 4))
			for b.Loop() {
				c, _ := NewCompressed(p, s.Dim)
				c.AppendSlab(part, 0)
			}
		})
	}
}

func BenchmarkCopyRows(b *testing.B) {
	s := benchData()
	const rows = 5000
	b.SetBytes(int64(rows * s.Dim * 4))
	for b.Loop() {
		dst := make([]float32, rows*s.Stride)
		copy(dst, s.Data[:rows*s.Stride])
		sink += dst[0]
	}
}

// The compressed kernels alone, per set this CPU runs, on one block of
// rows that stays in cache (the scan's block size): the compute each set
// spends per row, single query (rows kernel) and per row and query of a
// 64-query batch (tile kernel), without the memory traffic or the bounds.
func BenchmarkQuantKernels(b *testing.B) {
	const stride = benchDim
	nr := quantBlockBytes / stride / 4 * 4
	r := newRand(b)
	u8 := make([]uint8, nr*stride)
	f16 := make([]uint16, nr*stride)
	for i := range u8 {
		u8[i] = uint8(1 + r.IntN(255))
		f16[i] = f32toF16(2*r.Float32() - 1)
	}
	q8 := make([]int8, benchBatch*stride)
	qf := make([]float32, benchBatch*stride)
	for i := range q8 {
		q8[i] = int8(r.IntN(255) - 127)
		qf[i] = 2*r.Float32() - 1
	}
	i32 := make([]int32, benchBatch*nr)
	f32 := make([]float32, benchBatch*nr)
	for _, ks := range quantKernelSets() {
		b.Run(ks.name+"/int8/rows", func(b *testing.B) {
			b.SetBytes(int64(nr * stride))
			for b.Loop() {
				ks.i8Rows(i32[:nr], q8[:stride], u8, stride)
			}
		})
		b.Run(ks.name+"/int8/tile64", func(b *testing.B) {
			b.SetBytes(int64(benchBatch * nr * stride))
			if ks.i8Tile16 != nil {
				// As a search calls it: the queries widened once.
				q16 := widenI8(q8)
				for b.Loop() {
					ks.i8Tile16(i32, q8, q16, benchBatch, u8, nr, stride)
				}
				return
			}
			for b.Loop() {
				ks.i8Tile(i32, q8, benchBatch, u8, nr, stride)
			}
		})
		b.Run(ks.name+"/f16/rows", func(b *testing.B) {
			b.SetBytes(int64(2 * nr * stride))
			for b.Loop() {
				ks.f16Rows(f32[:nr], qf[:stride], f16, stride)
			}
		})
		b.Run(ks.name+"/f16/tile64", func(b *testing.B) {
			b.SetBytes(int64(2 * benchBatch * nr * stride))
			for b.Loop() {
				ks.f16Tile(f32, qf, benchBatch, f16, nr, stride)
			}
		})
	}
}
