package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/umbravec/umbra/internal/bench"
)

// parseLevels reads --concurrency's comma list of caller counts.
func parseLevels(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 || n > 1<<14 {
			return nil, usagef("--concurrency: %q is not a caller count between 1 and %d", part, 1<<14)
		}
		out = append(out, n)
	}
	return out, nil
}

// runConcurrency is --concurrency: single searches from many callers, with
// coalescing on and off, beside the peers.
func runConcurrency(ctx context.Context, f *flags, opt bench.Options, stdout, stderr io.Writer) int {
	levels, err := parseLevels(f.Concurrency)
	if err == nil {
		err = inRange("n", f.N, 1, maxValues/max(f.Dim, 1))
	}
	if err == nil && (f.Data != "" || f.JSONOut != "" || f.PlotOut != "" || f.Soak != 0) {
		err = usagef("--concurrency runs on random data and prints a table: drop --data, --json, --plot and --soak")
	}
	if err == nil && (f.CoalesceMax < 0 || f.CoalesceMax > 1<<16 || f.CoalesceWait < 0 || f.CoalesceWait > time.Second) {
		err = usagef("--coalesce-max %d / --coalesce-wait %v out of range: want 0..65536 and 0..1s", f.CoalesceMax, f.CoalesceWait)
	}
	if err == nil && (f.Duration <= 0 || f.Duration > time.Hour) {
		err = usagef("--duration %v out of range: want more than 0 and at most 1h", f.Duration)
	}
	return runChecked(ctx, f, stdout, stderr, err, "--concurrency "+f.Concurrency,
		func(seed uint64, progress func(string)) (checkedReport, error) {
			return bench.RunConcurrency(ctx, bench.ConcurrencyOptions{N: f.N, Dim: f.Dim, K: f.K, Metric: opt.Metric,
				Levels: levels, Duration: f.Duration, BatchQueries: f.CoalesceMax, BatchWait: f.CoalesceWait,
				Device: opt.Device, Adapter: opt.Adapter, Seed: seed, Peers: f.Peers, Pythons: opt.Pythons, Progress: progress})
		})
}

// checkedReport is a measurement that also checks answers: it prints a
// table and says whether anything failed.
type checkedReport interface {
	Write(io.Writer)
	Failed() bool
}

// runChecked runs a checked measurement after its flags were checked
// (usage, when not nil, is exit 2): the seed, the progress line, the table,
// and exit 1 when it failed.
func runChecked(ctx context.Context, f *flags, stdout, stderr io.Writer, usage error, title string,
	run func(seed uint64, progress func(string)) (checkedReport, error)) int {
	if usage != nil {
		fmt.Fprintln(stderr, "bench:", usage)
		return 2
	}
	seed := f.runSeed()
	progress := newProgress(stderr)
	defer progress.done()
	fmt.Fprintf(stdout, "umbra bench %s · seed %d\n", title, seed)
	rep, err := run(seed, progress.show)
	progress.done()
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	rep.Write(stdout)
	if rep.Failed() {
		return 1
	}
	return 0
}

// runSoak is --soak: mixed searches and writes for a while, every answer
// checked, memory sampled.
func runSoak(ctx context.Context, f *flags, opt bench.Options, stdout, stderr io.Writer) int {
	err := inRange("n", f.N, 1, maxValues/max(f.Dim, 1))
	if err == nil && (f.Data != "" || f.JSONOut != "" || f.PlotOut != "" || f.Peers) {
		err = usagef("--soak runs on random data and prints a table: drop --data, --json, --plot and --peers")
	}
	if err == nil && (f.Soak < 0 || f.Soak > 24*time.Hour) {
		err = usagef("--soak %v out of range: want at most 24h", f.Soak)
	}
	return runChecked(ctx, f, stdout, stderr, err, fmt.Sprintf("--soak %v", f.Soak),
		func(seed uint64, progress func(string)) (checkedReport, error) {
			return bench.RunSoak(ctx, bench.SoakOptions{N: f.N, Dim: f.Dim, K: f.K, Duration: f.Soak, Device: opt.Device,
				Adapter: opt.Adapter, Seed: seed, Searchers: 32, Writers: 4, Progress: progress})
		})
}
