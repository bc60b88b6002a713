package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestDeviceTopK compares the GPU's on-device selection with the fallback
// for k from 1 to 1,000 and N from 1 to past a chunk boundary, single and
// batched, on data with many exact ties (duplicated rows), where the only
// correct order is by lower ID.
func TestDeviceTopK(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 24
	for _, n := range []int{1, 2, 999, 2100} {
		base := testkit.Vectors(r, max(n/3, 1), dim)
		data := make([][]float32, n)
		for i := range data {
			data[i] = base[r.IntN(len(base))] // about three copies of each row
		}
		queries := append(testkit.Vectors(r, 5, dim), data[0])
		for _, m := range metrics {
			cpu := open(t, backends[0], engine.Config{Dim: dim, Metric: m})
			_, err := cpu.Add(context.Background(), umbra.Vectors(data))
			require.NoError(t, err)
			for _, b := range backends[1:] {
				t.Run(fmt.Sprintf("%s/%s/n%d", b.name, m, n), func(t *testing.T) {
					ix := open(t, b, engine.Config{Dim: dim, Metric: m}, 1000)
					_, err := ix.Add(context.Background(), umbra.Vectors(data))
					require.NoError(t, err)
					for _, k := range []int{1, 2, 10, 100, 1000} {
						want, err := cpu.SearchBatch(context.Background(), queries, k)
						require.NoError(t, err)
						got, err := ix.SearchBatch(context.Background(), queries, k)
						require.NoError(t, err)
						one, err := ix.Search(context.Background(), queries[2], k)
						require.NoError(t, err)
						require.Equal(t, got[2], one, "batched and single search differ, k=%d", k)
						for qi := range queries {
							requireSameHits(t, m, cpu.Vector, queries[qi], want[qi], got[qi], fmt.Sprintf("k=%d query %d", k, qi))
						}
					}
				})
			}
		}
	}
}
