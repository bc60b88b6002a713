package exact

import (
	"context"
	"testing"

	"github.com/umbravec/umbra/fallback"
	"github.com/umbravec/umbra/internal/core"
)

// Compressed scans of the reference workload, exact and approximate, next
// to BenchmarkReadPass (the float32 floor). Random uniform rows are the
// hardest case for the bounds (scores crowd together); cmd/bench measures
// embedding-like data.
func BenchmarkExactSearch(b *testing.B) {
	s := benchData()
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
