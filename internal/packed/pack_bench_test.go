package packed

import (
	"math/rand/v2"
	"testing"
)

// The benchmarks set packing beside a plain copy of the same bytes into
// fresh memory; cmd/bench --store measures the engine's whole Add.
func benchRows(n, dim int) []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	flat := make([]float32, n*dim)
	for i := range flat {
		flat[i] = r.Float32()*2 - 1
	}
	return flat
}

func BenchmarkPlainCopy(b *testing.B) {
	flat := benchRows(20000, 768)
	b.SetBytes(int64(len(flat) * 4))
	for b.Loop() {
		c := make([]float32, len(flat))
		copy(c, flat)
	}
}

func BenchmarkAppendFlatRows(b *testing.B) {
	flat := benchRows(20000, 768)
	for _, m := range []struct {
		name string
		m    Mode
	}{{"cosine", Mode{Normalize: true, Check: true, RejectZero: true}}, {"plain", Mode{Check: true}}} {
		b.Run(m.name, func(b *testing.B) {
			b.SetBytes(int64(len(flat) * 4))
			for b.Loop() {
				s := NewSlab(768)
				if err := s.AppendFlatRows(flat, m.m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
