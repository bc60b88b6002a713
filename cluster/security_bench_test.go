package cluster

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// What authentication and the frames' checksums cost, side by side in one
// run on one machine: the same loopback workload (one embedded server, one
// node, one shard) under four setups — an anonymous server without
// checksums (what umbra was before both), each of the two alone, and both
// (what umbra is) — in rounds that rotate their order, so a machine
// getting busier or quieter shows in every setup alike. Each round starts
// a fresh server and node. Reported: acknowledged writes a second (one
// row a call, and 100 rows a call) and the median search latency; the
// medians over the rounds, and each setup's ratio to the first.
//
//	go test -run '^$' -bench LoopbackSecurity -benchtime 1x ./cluster
//
// UMBRA_SECURITY_ROUNDS (default 5), _ROWS (20000), _DUR (2s) change the
// run's size.
func BenchmarkLoopbackSecurity(b *testing.B) {
	rounds := envInt(b, "UMBRA_SECURITY_ROUNDS", 5)
	rows := envInt(b, "UMBRA_SECURITY_ROWS", 20000)
	dur := 2 * time.Second
	if s := os.Getenv("UMBRA_SECURITY_DUR"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("UMBRA_SECURITY_DUR=%q: %v", s, err)
		}
		dur = d
	}
	const dim, k, latencyQueries = 128, 10, 200
	setups := []struct {
		name           string
		auth, checksum bool
	}{
		{"anonymous, no checksums", false, false},
		{"authenticated, no checksums", true, false},
		{"anonymous, checksums", false, true},
		{"authenticated, checksums", true, true},
	}
	type result struct{ one, hundred, p50 []float64 }
	results := make([]result, len(setups))
	r := testkit.Rand(b)
	data := make([][]float32, rows)
	for i := range data {
		data[i] = testkit.Unit(r, dim)
	}
	queries := make([][]float32, latencyQueries)
	for i := range queries {
		queries[i] = testkit.Unit(r, dim)
	}
	for b.Loop() {
		for round := range rounds {
			for j := range setups {
				i := (j + round) % len(setups) // rotate the order each round
				s := setups[i]
				one, hundred, p50 := securityRound(b, s.auth, s.checksum, data, queries, k, dur)
				results[i].one = append(results[i].one, one)
				results[i].hundred = append(results[i].hundred, hundred)
				results[i].p50 = append(results[i].p50, p50)
				b.Logf("round %d, %s: %.0f calls/s (1 row), %.0f calls/s (100 rows), search p50 %.3f ms", round, s.name, one, hundred, p50)
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	var out strings.Builder
	fmt.Fprintf(&out, "\n%d rounds, %d × %d, k = %d, %v a write run, %d queries; GOMAXPROCS %d; load average at the end: %s\n",
		rounds, rows, dim, k, dur, latencyQueries, runtime.GOMAXPROCS(0), strings.TrimSpace(string(load)))
	fmt.Fprintf(&out, "| setup | writes/s, 1 row a call | writes/s, 100 rows a call | search p50 (ms) |\n|---|---|---|---|\n")
	base := results[0]
	for i, s := range setups {
		res := results[i]
		fmt.Fprintf(&out, "| %s | %.0f (%.3f×) | %.0f (%.3f×) | %.3f (%.3f×) |\n", s.name,
			median(res.one), median(res.one)/median(base.one), median(res.hundred), median(res.hundred)/median(base.hundred),
			median(res.p50), median(res.p50)/median(base.p50))
	}
	b.Log(out.String())
	last := results[len(results)-1]
	b.ReportMetric(median(last.one)/median(base.one), "writes-ratio")
	b.ReportMetric(median(last.p50)/median(base.p50), "p50-ratio")
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
		b.Fatalf("%s=%q: want a count above 0", name, s)
	}
	return n
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// securityRound starts a server (with the two users, or anonymous) and a
// node, loads rows, and measures: acknowledged calls a second of one row
// and of 100 rows, and the median latency of one-query searches.
func securityRound(b *testing.B, auth, checksum bool, data, queries [][]float32, k int, dur time.Duration) (one, hundred, p50 float64) {
	b.Helper()
	testHooks.noChecksum.Store(!checksum)
	defer testHooks.noChecksum.Store(false)
	dir := b.TempDir()
	opts, _, err := embeddedOptions(EmbeddedConfig{Listen: "127.0.0.1:0", Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	if !auth {
		opts.Nkeys = nil
	}
	srv, err := startServer(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	copts := []ClientOption{AsNode(), Timeout(time.Minute)}
	if auth {
		creds, err := LoadCreds(dir + "/creds")
		if err != nil {
			b.Fatal(err)
		}
		copts = append(copts, Credentials(creds.NodeFile()))
	}
	c, err := Connect(ctx, srv.URL(), copts...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	node, err := StartNode(ctx, c, NodeConfig{Dir: dir, Device: engine.CPU})
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	col, err := c.Create(ctx, "sec", CollectionConfig{Dim: len(data[0]), Shards: 1})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(data); i += 1000 {
		if _, err := col.Add(ctx, engine.Vectors(data[i:min(i+1000, len(data))]), NoWait()); err != nil {
			b.Fatal(err)
		}
	}
	rate := func(batch int) float64 {
		calls := 0
		start := time.Now()
		for time.Since(start) < dur {
			if _, err := col.Add(ctx, engine.Vectors(data[:batch]), NoWait()); err != nil {
				b.Fatal(err)
			}
			calls++
		}
		return float64(calls) / time.Since(start).Seconds()
	}
	one, hundred = rate(1), rate(100)
	// The first search waits for the node to apply every write above.
	if _, err := col.Search(ctx, queries[0], k); err != nil {
		b.Fatal(err)
	}
	lat := make([]float64, len(queries))
	for i, q := range queries {
		start := time.Now()
		if _, err := col.Search(ctx, q, k); err != nil {
			b.Fatal(err)
		}
		lat[i] = float64(time.Since(start)) / float64(time.Millisecond)
	}
	return one, hundred, median(lat)
}
