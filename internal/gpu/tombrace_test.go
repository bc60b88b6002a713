//go:build cgo && !nogpu

package gpu

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestSearchesPlanWhileTombstonesMove: searches of an index with
// tombstones, two at a time, each time its rows double. The first search
// after a growth moves the tombstones past a larger allow bitmap (prepare
// sets deadAt) while the other plans its batch from where they sit
// (allowBytes): that read was outside the device mutex, a data race the
// race detector found in TestStressMixedLoad. Both answer what one search
// alone answers.
func TestSearchesPlanWhileTombstonesMove(t *testing.T) {
	d := softwareDevice(t)
	r := testkit.Rand(t)
	const dim, k = 16, 5
	slab := packed.NewSlab(dim)
	g, err := newIndex(d, slab.Stride, core.Dot, 0)
	require.NoError(t, err)
	qs := make([][]float32, 3)
	for i := range qs {
		qs[i] = make([]float32, slab.Stride)
		copy(qs[i], testkit.Vector(r, dim))
	}
	ctx := context.Background()
	for rows := 64; rows <= 8192; rows *= 2 {
		from := slab.Rows
		slab.Append(testkit.Vectors(r, rows-from, dim), false)
		require.NoError(t, g.Upload(ctx, slab, from, nil, nil))
		g.MarkDead([]int{r.IntN(rows), from})
		var wg sync.WaitGroup
		got := make([][][]core.Hit, 2)
		errs := make([]error, 2)
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = g.Search(ctx, qs[:1+i], k, rows, nil, nil)
			}()
		}
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		want, err := g.Search(ctx, qs[:2], k, rows, nil, nil)
		require.NoError(t, err)
		require.Equal(t, want[:1], got[0], "%d rows", rows)
		require.Equal(t, want, got[1], "%d rows", rows)
	}
}
