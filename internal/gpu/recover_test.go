//go:build cgo && !nogpu

package gpu

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestRenewReplacesALostDevice makes a device fail its self-test, as a
// lost one would: Renew must drop the adapter's cached verdict, open and
// probe a new device, and return an index on it that searches exactly;
// while the device still passes, Renew keeps it.
func TestRenewReplacesALostDevice(t *testing.T) {
	if !testkit.Full() {
		t.Skip("a second probe of the adapter, seconds on a software one, whatever its subgroup size: UMBRA_FULL=1 (CI)")
	}
	_, dev := WorkingAdapter(t)
	g, err := dev.NewIndex(packed.StrideFor(12), core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	ctx := context.Background()

	same, err := g.Renew(ctx, time.Minute)
	require.NoError(t, err)
	require.Same(t, dev, same.dev, "a device that passes its self-test is kept")
	same.Release()

	lost := g.dev
	recheckFault = func(d *Device) error {
		if d == lost {
			return errors.New("device lost (injected)")
		}
		return nil
	}
	defer func() { recheckFault = nil }()
	fresh, err := g.Renew(ctx, time.Minute)
	require.NoError(t, err)
	defer fresh.Release()
	require.NotSame(t, lost, fresh.dev, "a device that fails its self-test is replaced")

	slab := packed.Synthetic(500, 12)
	require.NoError(t, fresh.Upload(ctx, slab, 0, nil, nil))
	q := packed.Padded(slab.Row(7), slab.Stride)
	hits, err := fresh.Search(ctx, [][]float32{q}, 5, slab.Rows, nil, nil)
	require.NoError(t, err)
	view := fallback.Slab{Data: slab.Data, Rows: slab.Rows, Dim: slab.Dim, Stride: slab.Stride}
	want, err := fallback.Search(ctx, view, q, 5, fallback.Dot, 1)
	require.NoError(t, err)
	require.Len(t, hits[0], 5)
	for i := range want {
		require.Equal(t, want[i].Row, hits[0][i].Row, "rank %d", i)
		require.InDelta(t, want[i].Score, hits[0][i].Score, 1e-4, "rank %d", i)
	}
}
