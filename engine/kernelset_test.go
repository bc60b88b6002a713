package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/kernelset"
	"github.com/umbravec/umbra/internal/testkit"
)

// Every compressed kernel set this CPU runs, forced in turn (on an AVX-512
// machine: AVX-512, AVX-VNNI, AVX2 and generic), gives a compressed index
// on the CPU path the answers of its float32 twin, IDs and score bits: for
// both precisions and all three metrics, dimensions that leave padding in
// the code chunks, single queries and batches whose size leaves queries
// after the last panel, k from 1 to past Len, filtered, and range search.
// Info names the set in use.
func TestPrecisionEveryKernelSet(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	for _, name := range kernelset.Sets(kernelset.Compressed) {
		t.Run(name, func(t *testing.T) {
			restore, err := kernelset.Force(kernelset.Compressed, name)
			require.NoError(t, err)
			defer restore()
			for _, prec := range []umbra.Precision{umbra.F16, umbra.Int8} {
				for _, m := range []umbra.Metric{umbra.Cosine, umbra.Dot, umbra.L2} {
					dim := []int{7, 64, 65, 131, 200}[r.IntN(5)]
					kind := r.IntN(4)
					n := 200 + r.IntN(400)
					what := fmt.Sprintf("%v/%v dim %d kind %d n %d", prec, m, dim, kind, n)
					center := testkit.Vectors(r, 1, dim)[0]
					f32, err := engine.New(ctx, engine.Config{Dim: dim, Metric: m, Device: engine.CPU})
					require.NoError(t, err)
					cmp, err := engine.New(ctx, engine.Config{Dim: dim, Metric: m, Device: engine.CPU, Precision: prec})
					require.NoError(t, err)
					require.Equal(t, name, cmp.Info().QuantKernel)
					vs := precisionVectors(r, kind, n, dim, center)
					for _, ix := range []*engine.Index{f32, cmp} {
						_, err := ix.Add(ctx, umbra.Vectors(vs))
						require.NoError(t, err)
					}
					qs := precisionVectors(r, kind, 2+r.IntN(10), dim, center)
					qs[0] = vs[r.IntN(n)] // on top of a row: ties and near-ties
					ids := f32.IDs()
					for _, k := range []int{1, 10, n, n + 1} {
						var opts []umbra.SearchOption
						if k == 10 {
							opts = append(opts, umbra.Allow(ids[:n/2]...))
						}
						want, err := f32.SearchBatch(ctx, qs, k, opts...)
						require.NoError(t, err)
						got, err := cmp.SearchBatch(ctx, qs, k, opts...)
						require.NoError(t, err)
						for j := range qs {
							sameHitBits(t, want[j], got[j], "%s: batch of %d, k %d, query %d", what, len(qs), k, j)
						}
						one, err := cmp.Search(ctx, qs[0], k, opts...)
						require.NoError(t, err)
						sameHitBits(t, want[0], one, "%s: single, k %d", what, k)
					}
					all, err := f32.Search(ctx, qs[1], n)
					require.NoError(t, err)
					th := all[r.IntN(n)].Score
					want, err := f32.SearchRange(ctx, qs[1], th)
					require.NoError(t, err)
					got, err := cmp.SearchRange(ctx, qs[1], th)
					require.NoError(t, err)
					sameHitBits(t, want, got, "%s: range %g", what, th)
					require.NoError(t, f32.Close())
					require.NoError(t, cmp.Close())
				}
			}
		})
	}
}
