//go:build cgo && !nogpu

package gpu

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestDeviceMemoryBudget: everything an index allocates on the device is
// counted (rows, their growth, every scratch buffer, the read back) and
// bounded. Without a budget its scratch stays within scratchCap (1/8 of
// its rows, at least 16 MiB, at most 1 GiB): a batch whose scores would
// not fit is cut into more submissions. With one (SetBudget, the
// engine's MaxDeviceBytes of rows), the rows may fill it and everything
// together stays within it plus that cap, appends included, whose growth
// by a device copy would need the old and the new buffer at once (it
// sends the resident rows again instead). Every answer is the CPU's.
// Before, scratch grew by doubling up to the binding limit (2 GiB on
// NVIDIA, per buffer, the read back besides) and nothing counted it.
func TestDeviceMemoryBudget(t *testing.T) {
	d := softwareDevice(t)
	r := testkit.Rand(t)
	const dim, rows = 16, 40000 // 64 bytes a row: 2.4 MiB
	slab := randomSlab(r, rows, dim)
	qs := make([][]float32, 120)
	for i := range qs {
		qs[i] = packed.Padded(testkit.Vector(r, dim), slab.Stride)
	}
	view := fallback.Slab{Data: slab.Data, Rows: slab.Rows, Dim: slab.Dim, Stride: slab.Stride}
	ctx := context.Background()
	check := func(g *Index, k int, what string) {
		t.Helper()
		got, err := g.Search(ctx, qs, k, rows, nil, nil)
		require.NoError(t, err, what)
		for _, qi := range []int{0, 57, len(qs) - 1} {
			want, err := fallback.Search(ctx, view, qs[qi], min(k, 20), fallback.Dot, 1)
			require.NoError(t, err)
			for i := range want {
				require.Equal(t, want[i].Row, got[qi][i].Row, "%s: query %d rank %d", what, qi, i)
			}
		}
	}

	// No budget: scratch within the cap. k = rows reads every score back
	// (4 bytes a row a query in the scores buffer and as many in the read
	// back: 38 MB for this batch at once).
	g, err := newIndex(d, slab.Stride, core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	require.NoError(t, g.Upload(ctx, slab, 0, nil, nil))
	resident, _ := g.DeviceBytes()
	for _, k := range []int{rows, 3000, 10} {
		check(g, k, fmt.Sprintf("no budget, k %d", k))
		_, peak := g.DeviceBytes()
		t.Logf("no budget, k %d: %d bytes resident, peak %d", k, resident, peak)
		require.LessOrEqual(t, peak-resident, g.scratchCap(), "k %d: scratch past its cap", k)
	}

	// A budget of exactly the rows, filled in eight appends.
	rowBytes := uint64(rows) * uint64(slab.Stride) * 4
	b, err := newIndex(d, slab.Stride, core.Dot, 0)
	require.NoError(t, err)
	defer b.Release()
	b.SetBudget(int64(rowBytes))
	limit := rowBytes + scratchCapFor(rowBytes)
	require.Equal(t, limit, b.Limits().DeviceBudget)
	for i := 1; i <= 8; i++ {
		part := slab.Part(0, rows*i/8)
		require.NoError(t, b.Upload(ctx, part, rows*(i-1)/8, nil, nil), "append %d", i)
		now, peak := b.DeviceBytes()
		require.LessOrEqual(t, peak, limit, "append %d: %d bytes now", i, now)
	}
	for _, k := range []int{rows, 3000, 10} {
		check(b, k, fmt.Sprintf("budget, k %d", k))
		_, peak := b.DeviceBytes()
		require.LessOrEqual(t, peak, limit, "k %d", k)
	}
	// A budget the rows alone pass: the upload is refused as too large.
	small, err := newIndex(d, slab.Stride, core.Dot, 0)
	require.NoError(t, err)
	defer small.Release()
	small.SetBudget(int64(rowBytes / 2))
	err = small.Upload(ctx, slab, 0, nil, nil)
	require.ErrorIs(t, err, ErrTooLarge)
	now, _ := small.DeviceBytes()
	require.LessOrEqual(t, now, small.Limits().DeviceBudget)

	// At dimension 768 the rows outweigh the scratch cap: growing the
	// chunk by a copy would hold the old and the new buffer at once, past
	// the budget, so the appends that cross it send the resident rows
	// again; the answers stay the CPU's.
	wide := randomSlab(r, 12000, 768) // 36.9 MB, one chunk on a 128 MiB binding
	wb := uint64(wide.Rows) * uint64(wide.Stride) * 4
	v, err := newIndex(d, wide.Stride, core.Dot, 0)
	require.NoError(t, err)
	defer v.Release()
	v.SetBudget(int64(wb))
	resent := 0
	for i := 1; i <= 6; i++ {
		from, to := wide.Rows*(i-1)/6, wide.Rows*i/6
		var st core.Stages
		require.NoError(t, v.Upload(ctx, wide.Part(0, to), from, &st, nil), "append %d", i)
		if sent := st.BytesUp - int64(to-from)*int64(wide.Stride)*4; sent > 0 {
			resent++
			t.Logf("append %d sent %d resident bytes again", i, sent)
		}
		_, peak := v.DeviceBytes()
		require.LessOrEqual(t, peak, v.Limits().DeviceBudget, "append %d", i)
	}
	require.Positive(t, resent, "some append had to send the resident rows again")
	wq := [][]float32{wide.PaddedRow(5), wide.PaddedRow(11999)}
	got, err := v.Search(ctx, wq, 10, wide.Rows, nil, nil)
	require.NoError(t, err)
	wv := fallback.Slab{Data: wide.Data, Rows: wide.Rows, Dim: wide.Dim, Stride: wide.Stride}
	for qi, q := range wq {
		want, err := fallback.Search(ctx, wv, q, 10, fallback.Dot, 1)
		require.NoError(t, err)
		for i := range want {
			require.Equal(t, want[i].Row, got[qi][i].Row, "wide query %d rank %d", qi, i)
		}
	}
}

// TestRegrowFailureLosesRowsLoudly: a growth that had to send the
// resident rows again (TestDeviceMemoryBudget) and failed midway has
// freed the old buffer: every search then fails with ErrRowsLost, never
// answers from rows that are not there, until Truncate(0) and an upload
// from row 0 bring them back.
func TestRegrowFailureLosesRowsLoudly(t *testing.T) {
	d := softwareDevice(t)
	r := testkit.Rand(t)
	ctx := context.Background()
	wide := randomSlab(r, 12000, 768)
	v, err := newIndex(d, wide.Stride, core.Dot, 0)
	require.NoError(t, err)
	defer v.Release()
	v.SetBudget(int64(wide.Rows) * int64(wide.Stride) * 4)
	require.NoError(t, v.Upload(ctx, wide.Part(0, 6000), 0, nil, nil))
	// The growth to 12,000 rows cannot hold 6,000 and 12,000 at once
	// (36.9 MB of rows and a 16 MiB scratch cap): the rows are sent
	// again, and that send fails.
	last := ""
	v.SetFault(func(step string) error {
		defer func() { last = step }()
		if step == "write rows" && last == "create rows buffer" {
			return fmt.Errorf("injected")
		}
		return nil
	})
	err = v.Upload(ctx, wide, 6000, nil, nil)
	v.SetFault(nil)
	require.ErrorIs(t, err, ErrRowsLost)
	q := [][]float32{wide.PaddedRow(1)}
	_, err = v.Search(ctx, q, 5, 6000, nil, nil)
	require.ErrorIs(t, err, ErrRowsLost, "a search of the lost rows fails")
	v.Truncate(0)
	require.NoError(t, v.Upload(ctx, wide, 0, nil, nil))
	got, err := v.Search(ctx, q, 5, wide.Rows, nil, nil)
	require.NoError(t, err)
	require.Equal(t, 1, got[0][0].Row)
}
