//go:build cgo && !nogpu

package gpu

import (
	"context"
	"fmt"
	"testing"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
)

// BenchmarkBatchKernels times a batch search (k = 10, selected on the
// device) through scores.wgsl's tiles of BatchQueries (with the fused scan
// where the device passed it) and through gemm.wgsl with the radix
// select, side by side on one device and one slab of 50,000 × 768, and
// reports what each read and sent back per query:
//
//	UMBRA_REQUIRE_GPU=1 go test -run '^$' -bench BatchKernels -benchtime 5x ./internal/gpu/
func BenchmarkBatchKernels(b *testing.B) {
	_, d := WorkingAdapter(b)
	const rows, dim = 50000, 768
	s := packed.Synthetic(rows, dim)
	g, err := newIndex(d, s.Stride, core.Dot, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Release()
	if err := g.Upload(context.Background(), s, 0, nil, nil); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s (%s), team %d, gemm %d queries a pass, chosen %v", d.info.Name, d.info.API, g.single.Team, g.gemm.QT, d.gemm)
	for _, nq := range []int{16, 64, 128} {
		qs := make([][]float32, nq)
		for i := range qs {
			qs[i] = s.PaddedRow(i * 97)
		}
		for _, k := range []struct {
			name   string
			kernel BatchKernel
		}{{"tiles", BatchTile}, {"gemm", BatchGemm}} {
			b.Run(fmt.Sprintf("batch=%d/%s", nq, k.name), func(b *testing.B) {
				ctx := WithBatchKernel(context.Background(), k.kernel)
				var st core.Stages
				for i := 0; i < b.N; i++ {
					st = core.Stages{}
					if _, err := g.Search(ctx, qs, 10, rows, nil, &st); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/batch")
				b.ReportMetric(float64(st.BytesRead)/float64(nq)/1e6, "MB_read/query")
				b.ReportMetric(float64(st.BytesDown)/float64(nq), "B_back/query")
				b.ReportMetric(float64(st.Submissions), "submissions")
			})
		}
	}
}
