package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMedian(t *testing.T) {
	cases := []struct {
		name string
		in   []float64
		want float64
	}{
		{"one", []float64{7}, 7},
		{"odd unsorted", []float64{5, 1, 3}, 3},
		{"even is mean of middle two", []float64{4, 1, 3, 2}, 2.5},
		{"even with equal middles", []float64{1, 2, 2, 9}, 2},
		{"duplicates", []float64{2, 2, 2, 2, 2}, 2},
		{"negative and fractional", []float64{-1.5, 0.25, 10}, 0.25},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := append([]float64(nil), c.in...)
			assert.Equal(t, c.want, Median(in))
			assert.Equal(t, c.in, in, "Median must not reorder its input")
		})
	}
	assert.True(t, math.IsNaN(Median(nil)))
}

func TestSummarize(t *testing.T) {
	// Sorted: 9 10 11 12 15; jitter (15-9)/11.
	s := Summarize([]float64{10, 12, 11, 15, 9})
	assert.Equal(t, Summary{Median: 11, Min: 9, Max: 15, Jitter: 6.0 / 11, N: 5}, s)

	s = Summarize([]float64{4, 4})
	assert.Equal(t, Summary{Median: 4, Min: 4, Max: 4, Jitter: 0, N: 2}, s)

	s = Summarize([]float64{2, 6, 4, 8})
	assert.Equal(t, 5.0, s.Median)
	assert.InDelta(t, 1.2, s.Jitter, 1e-15) // (8-2)/5

	assert.Equal(t, 0.0, Summarize([]float64{0, 0, 0}).Jitter)
	assert.True(t, math.IsInf(Summarize([]float64{-1, 0, 1}).Jitter, 1))
	assert.True(t, math.IsNaN(Summarize(nil).Median))
	assert.True(t, math.IsNaN(Jitter(nil)))
	assert.InDelta(t, 0.5, Jitter([]float64{3, 4, 5}), 1e-15) // (5-3)/4
}

func TestGroupMin(t *testing.T) {
	assert.Equal(t, 1.5, GroupMin([]float64{3, 1.5, 2}))
	assert.Equal(t, 4.0, GroupMin([]float64{4}))
	assert.True(t, math.IsNaN(GroupMin(nil)))
}

func TestPairedRatios(t *testing.T) {
	// Group 2 ran on a slower machine state: both numbers doubled, and
	// its ratio is the same as group 1's. Unpaired medians would mix them.
	base := []float64{20, 40, 21}
	tier := []float64{2, 4, 3}
	r := PairedRatios(base, tier)
	assert.Equal(t, []float64{10, 10, 7}, r)
	s := Summarize(r)
	assert.Equal(t, 10.0, s.Median)
	assert.Equal(t, 7.0, s.Min)
	assert.Equal(t, 10.0, s.Max)

	assert.True(t, math.IsInf(PairedRatios([]float64{1}, []float64{0})[0], 1))
	assert.Panics(t, func() { PairedRatios([]float64{1, 2}, []float64{1}) })
}

// TestRotate: every item is called once per repeat in rotating order, an
// item that fails stops being called and gets no groups, the others go on.
func TestRotate(t *testing.T) {
	h := &harness{}
	var order []string
	var failed error
	mk := func(name string, d time.Duration, failAt int) *timed {
		calls := 0
		it := &timed{name: name}
		it.call = func(_ context.Context, slot int) (time.Duration, error) {
			calls++
			order = append(order, fmt.Sprintf("%s%d", name, slot))
			if calls == failAt {
				return 0, errors.New("boom")
			}
			return d + time.Duration(slot)*time.Millisecond, nil
		}
		it.fail = func(err error) { failed = err }
		it.done = func(g []float64) { it.groups = g }
		return it
	}
	a, b := mk("a", time.Millisecond, 0), mk("b", 2*time.Millisecond, 4)
	require.NoError(t, h.rotate(context.Background(), "", []*timed{a, b}, 2, 2, 1))
	assert.Equal(t, []string{"a0", "b0", "a0", "b0", "b1", "a1", "a2", "b2", "a3"}, order, "warm-up, then rotating order")
	assert.Equal(t, []float64{1, 3}, a.groups, "each group keeps its minimum")
	assert.True(t, b.failed)
	assert.EqualError(t, failed, "boom")
	assert.Len(t, b.groups, 1, "a failed item is not completed")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, h.rotate(ctx, "", []*timed{mk("c", time.Millisecond, 0)}, 1, 1, 0), context.Canceled)
}
