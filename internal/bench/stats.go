package bench

import (
	"math"
	"slices"
)

// Summary describes a sample of timings (or ratios) by its median, its
// range, and its jitter (max−min)/median.
type Summary struct {
	Median float64
	Min    float64
	Max    float64
	Jitter float64
	N      int
}

// Median returns the median of xs: the middle value for an odd count, the
// mean of the two middle values for an even one, and NaN for none. xs is
// not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// Jitter returns (max−min)/median of xs: how far apart independent groups
// fall relative to their typical value. It is NaN
// for no values and 0 when the median is 0 and every value equal.
func Jitter(xs []float64) float64 {
	s := Summarize(xs)
	return s.Jitter
}

// Summarize returns the median, min, max and jitter of xs.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		nan := math.NaN()
		return Summary{Median: nan, Min: nan, Max: nan, Jitter: nan}
	}
	s := Summary{Median: Median(xs), Min: slices.Min(xs), Max: slices.Max(xs), N: len(xs)}
	switch {
	case s.Median != 0:
		s.Jitter = (s.Max - s.Min) / s.Median
	case s.Max == s.Min:
		s.Jitter = 0
	default:
		s.Jitter = math.Inf(1)
	}
	return s
}

// GroupMin returns the smallest of one group's repeats: the repeat least
// disturbed by the rest of the machine, which is what a group reports.
func GroupMin(repeats []float64) float64 {
	if len(repeats) == 0 {
		return math.NaN()
	}
	return slices.Min(repeats)
}

// PairedRatios returns base[i]/tier[i] for every group i: the speed-up of a
// tier over the baseline measured inside the same group, so drift of the
// machine between groups cancels out of each ratio. The slices must have
// the same length; a group where tier is 0 gives +Inf.
func PairedRatios(base, tier []float64) []float64 {
	if len(base) != len(tier) {
		panic("bench: PairedRatios of samples with different lengths")
	}
	r := make([]float64, len(base))
	for i := range base {
		r[i] = base[i] / tier[i]
	}
	return r
}
