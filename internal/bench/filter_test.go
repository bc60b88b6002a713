package bench

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
)

// TestRunFilter runs --filter small: every share's filtered answer is the
// subset index's, a tiny share is gathered, and the table says so.
func TestRunFilter(t *testing.T) {
	rep, err := RunFilter(context.Background(), FilterOptions{Device: engine.CPU, N: 4000, Dim: 24, K: 10,
		Fractions: []float64{0.001, 0.05, 0.5}, Metric: umbra.Cosine, Runs: 2, Repeat: 1, Seed: 3})
	require.NoError(t, err)
	require.Len(t, rep.Rows, 3)
	for _, r := range rep.Rows {
		require.True(t, r.Exact, "share %g", r.Fraction)
		require.True(t, r.Filtered.Ran() && r.Subset.Ran(), "share %g", r.Fraction)
		require.Contains(t, []string{"gather", "scan"}, r.Path)
		require.Equal(t, "cpu", r.Device)
	}
	require.Equal(t, 4, rep.Rows[0].Admitted)
	require.Equal(t, "gather", rep.Rows[0].Path, "4 rows of 4000")
	var b bytes.Buffer
	rep.Write(&b)
	require.Contains(t, b.String(), "gather on cpu")
	_, err = RunFilter(context.Background(), FilterOptions{Device: engine.CPU, N: 100, Dim: 4, K: 1, Fractions: []float64{0.6, 0.6}})
	require.ErrorContains(t, err, "more than every row")
}

// TestCFloor builds and runs the independent C read loop beside the
// fallback (CI has a C compiler: the GPU backend's cgo needs one) and
// states the fallback and the CPU floor as multiples of it.
func TestCFloor(t *testing.T) {
	w := RandomWorkload(3000, 64, 2, 5)
	rep, err := Run(context.Background(), w, Options{K: 5, Repeat: 1, Runs: 3, Tiers: []Tier{TierFallback},
		Metric: umbra.Dot, Device: engine.CPU, CFloor: true})
	require.NoError(t, err)
	require.NotNil(t, rep.Floors)
	c := rep.Floors.C
	require.NotNil(t, c)
	require.Empty(t, c.Error)
	require.True(t, c.Ran())
	require.Equal(t, int64(3000*64*4), c.Bytes)
	require.Len(t, rep.Floors.VsC, 2)
	require.Equal(t, "fallback", rep.Floors.VsC[0].Name)
	require.Equal(t, "cpu floor", rep.Floors.VsC[1].Name)
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b))
	require.Contains(t, b.String(), "against the C read loop")
}
