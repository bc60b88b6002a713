package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConcurrencyTable runs --concurrency on a small index: a row per
// engine, coalescing setting and caller count, every answer checked (a
// wrong one would exit 1), and the coalescing ratio beside each "on" row.
func TestConcurrencyTable(t *testing.T) {
	code, out, errs := runBench(t, "--concurrency", "1,4", "--n", "500", "--dim", "16", "--duration", "100ms", "--device", "cpu", "--seed", "3")
	require.Equal(t, 0, code, errs)
	for _, want := range []string{"umbra fallback   on", "umbra fallback   off", "the q/s of coalescing off", "coalescing on: at most 256 queries a batch"} {
		require.Contains(t, out, want)
	}
	require.Equal(t, 4, strings.Count(out, "umbra fallback"), out)
}

// TestSoakReport runs --soak briefly: no error, no wrong answer, samples.
func TestSoakReport(t *testing.T) {
	code, out, errs := runBench(t, "--soak", "500ms", "--n", "400", "--dim", "8", "--device", "cpu", "--seed", "5")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "errors 0 (must be 0), wrong answers 0 (must be 0)")
	require.Contains(t, out, "growth from the first sample to the last")
}

// TestConcurrencyBadFlags: bad values are usage errors (exit 2).
func TestConcurrencyBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--concurrency", "0"},
		{"--concurrency", "1,x"},
		{"--concurrency", "4", "--duration", "0s"},
		{"--concurrency", "4", "--coalesce-max", "-1"},
		{"--concurrency", "4", "--soak", "1s"},
		{"--soak", "-1s"},
		{"--soak", "1s", "--peers"},
	} {
		code, _, errs := runBench(t, args...)
		require.Equal(t, 2, code, "%v: %s", args, errs)
		require.NotEmpty(t, errs, "%v", args)
	}
}
