//go:build cgo && !nogpu

package gpu

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestGatherScoresAreTheScans: gather.wgsl scores each listed row with the
// bits the scan gives it (every row read back by Scores), for both
// metrics, single queries and batches, lists from one row to every row,
// across chunk boundaries and dimensions that leave a partial team; it
// reads only the listed rows and issues one dispatch per chunk holding
// some, one submission and one map; a bad list is refused.
func TestGatherScoresAreTheScans(t *testing.T) {
	d := softwareDevice(t)
	r := testkit.Rand(t)
	ctx := context.Background()
	for _, dim := range []int{7, 24, 300} {
		const n, chunk = 1500, 640 // three chunks
		s, qs := fusedSlab(r, n, dim, 5)
		for _, metric := range []core.Metric{core.Dot, core.L2} {
			g, err := d.NewIndex(s.Stride, metric, chunk)
			require.NoError(t, err)
			require.NoError(t, g.Upload(ctx, s, 0, nil, nil))
			all := make([][]float32, len(qs))
			for qi, q := range qs {
				all[qi], err = g.Scores(ctx, q, n)
				require.NoError(t, err)
			}
			for _, frac := range []float64{0, 0.003, 0.1, 1} {
				var rows []uint32
				for i := range n {
					if r.Float64() < frac || frac > 0 && len(rows) == 0 && i == n-1 {
						rows = append(rows, uint32(i))
					}
				}
				for _, batch := range [][][]float32{qs[:1], qs} {
					what := fmt.Sprintf("dim %d metric %v, %d rows, %d queries", dim, metric, len(rows), len(batch))
					var st core.Stages
					got, err := g.Gather(ctx, batch, rows, &st)
					require.NoError(t, err, what)
					require.Len(t, got, len(rows)*len(batch), what)
					for qi := range batch {
						for i, row := range rows {
							if a, b := got[qi*len(rows)+i], all[qi][row]; math.Float32bits(a) != math.Float32bits(b) {
								t.Fatalf("%s: query %d row %d: gather %g, scan %g", what, qi, row, a, b)
							}
						}
					}
					if len(rows) == 0 {
						continue
					}
					chunks := map[uint32]bool{}
					for _, row := range rows {
						chunks[row/chunk] = true
					}
					require.Equal(t, "gather", st.Path, what)
					require.Equal(t, int64(len(chunks)), st.Dispatches, what)
					require.Equal(t, int64(1), st.Submissions, what)
					require.Equal(t, int64(1), st.Maps, what)
					require.Equal(t, int64(len(rows))*int64(s.Stride)*4*int64(len(batch)), st.BytesRead, what)
				}
			}
			_, err = g.Gather(ctx, qs[:1], []uint32{3, 2}, nil)
			require.ErrorIs(t, err, ErrFailed)
			_, err = g.Gather(ctx, qs[:1], []uint32{n}, nil)
			require.ErrorIs(t, err, ErrFailed)
			g.Release()
		}
	}
}

// TestGatherWithinTheBudget: a gather's buffers are the index's scratch:
// counted in its device memory, bounded by the scratch cap and the budget
// (a batch whose scores would pass them is cut into more submissions,
// each answer still the scan's bits), and freed with the rest of the
// scratch when a gather fails, after which the next one starts clean.
func TestGatherWithinTheBudget(t *testing.T) {
	d := softwareDevice(t)
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim, n = 16, 40000 // 64 bytes a row: 2.4 MiB, a 16 MiB scratch cap
	s := randomSlab(r, n, dim)
	qs := make([][]float32, 120)
	for i := range qs {
		qs[i] = s.PaddedRow(r.IntN(n))
	}
	rowBytes := uint64(n) * uint64(s.Stride) * 4
	g, err := newIndex(d, s.Stride, core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	g.SetBudget(int64(rowBytes))
	limit := g.Limits().DeviceBudget
	require.NoError(t, g.Upload(ctx, s, 0, nil, nil))
	resident, _ := g.DeviceBytes()
	// Every other row: 120 queries' scores are 9.6 MB, as much again
	// read back, past the cap at once.
	var rows []uint32
	for i := 0; i < n; i += 2 {
		rows = append(rows, uint32(i))
	}
	var st core.Stages
	got, err := g.Gather(ctx, qs, rows, &st)
	require.NoError(t, err)
	now, peak := g.DeviceBytes()
	t.Logf("%d submissions; %d bytes resident, %d now, peak %d, limit %d", st.Submissions, resident, now, peak, limit)
	require.Greater(t, st.Submissions, int64(1), "the batch was cut to fit the scratch cap")
	require.LessOrEqual(t, peak, limit)
	require.LessOrEqual(t, peak-resident, g.scratchCap())
	require.Positive(t, g.gatherRows.size, "the list is scratch")
	require.Equal(t, now-resident, g.scratchHeld(), "every gather buffer is counted")
	for _, qi := range []int{0, 61, len(qs) - 1} {
		all, err := g.Scores(ctx, qs[qi], n)
		require.NoError(t, err)
		for i, row := range rows {
			require.Equal(t, math.Float32bits(all[row]), math.Float32bits(got[qi*len(rows)+i]), "query %d row %d", qi, row)
		}
	}
	// A failure midway frees the scratch, the list included.
	_, err = g.Gather(ctx, qs[:2], rows, nil)
	require.NoError(t, err)
	g.SetFault(func(step string) error {
		if step == "write gather rows" {
			return fmt.Errorf("injected")
		}
		return nil
	})
	_, err = g.Gather(ctx, qs[:2], rows, nil)
	g.SetFault(nil)
	require.ErrorIs(t, err, ErrFailed)
	now, _ = g.DeviceBytes()
	require.Equal(t, resident, now, "a failed gather leaves no scratch")
	require.Zero(t, g.gatherRows.size)
	again, err := g.Gather(ctx, qs[:2], rows, nil)
	require.NoError(t, err)
	require.Equal(t, got[:2*len(rows)], again)
}
