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

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
)

// What authentication and the frames' checksums cost, side by side in one
// run on one machine: the same loopback workload (one embedded server, one
// node, one shard each) under four setups — an anonymous server without
// checksums (what umbra was before both), each of the two alone, and both
// (what umbra is). The four run at once and take turns, a short slice
// each in an order that rotates, so whatever else the machine does falls
// on every setup alike: writes in slices of 250 ms, each ended by a search
// that waits until the node applied them (so a slice's time holds the
// applying too), and searches one query a turn. Reported: acknowledged
// writes a second (one row a call, and 100 rows a call) and the median
// search latency, with each setup's ratio to the first. The checksums are
// switched at each turn (a process-wide test hook): nothing of one setup
// is in flight while another's turn runs.
//
//	go test -run '^$' -bench LoopbackSecurity -benchtime 1x ./cluster
//
// UMBRA_SECURITY_SLICES (default 12 a kind of write), _ROWS (20000) and
// _QUERIES (1000) change the run's size.
func BenchmarkLoopbackSecurity(b *testing.B) {
	nslices := envInt(b, "UMBRA_SECURITY_SLICES", 12)
	rows := envInt(b, "UMBRA_SECURITY_ROWS", 20000)
	nq := envInt(b, "UMBRA_SECURITY_QUERIES", 1000)
	const dim, k, slice = 128, 10, 250 * time.Millisecond
	setups := []*securitySetup{
		{name: "anonymous, no checksums"},
		{name: "authenticated, no checksums", auth: true},
		{name: "anonymous, checksums", checksum: true},
		{name: "authenticated, checksums", auth: true, checksum: true},
	}
	r := testkit.Rand(b)
	data := make([][]float32, rows)
	for i := range data {
		data[i] = testkit.Unit(r, dim)
	}
	queries := make([][]float32, nq)
	for i := range queries {
		queries[i] = testkit.Unit(r, dim)
	}
	defer protocol.NoChecksum.Store(false)
	for _, s := range setups {
		s.start(b, data)
	}
	for b.Loop() {
		for _, batch := range []int{1, 100} {
			for turn := range nslices {
				for j := range setups {
					s := setups[(j+turn)%len(setups)]
					s.use()
					calls, took := s.writeSlice(b, data[:batch], slice)
					w := &s.one
					if batch != 1 {
						w = &s.hundred
					}
					w.calls, w.took = w.calls+calls, w.took+took
				}
			}
		}
		for i, q := range queries {
			for j := range setups {
				s := setups[(j+i)%len(setups)]
				s.use()
				start := time.Now()
				if _, err := s.col.Search(context.Background(), q, k); err != nil {
					b.Fatal(err)
				}
				s.lat = append(s.lat, float64(time.Since(start))/float64(time.Millisecond))
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	var out strings.Builder
	fmt.Fprintf(&out, "\n%d × %d rows, k = %d; writes in %d slices of %v a setup and kind, %d queries a setup; GOMAXPROCS %d; load average at the end: %s\n",
		rows, dim, k, nslices, slice, nq, runtime.GOMAXPROCS(0), strings.TrimSpace(string(load)))
	fmt.Fprintf(&out, "| setup | writes/s, 1 row a call | writes/s, 100 rows a call | search p50 (ms) |\n|---|---|---|---|\n")
	base := setups[0]
	for _, s := range setups {
		fmt.Fprintf(&out, "| %s | %.0f (%.3f×) | %.0f (%.3f×) | %.3f (%.3f×) |\n", s.name,
			s.one.rate(), s.one.rate()/base.one.rate(), s.hundred.rate(), s.hundred.rate()/base.hundred.rate(),
			median(s.lat), median(s.lat)/median(base.lat))
	}
	b.Log(out.String())
	last := setups[len(setups)-1]
	b.ReportMetric(last.one.rate()/base.one.rate(), "writes-ratio")
	b.ReportMetric(median(last.lat)/median(base.lat), "p50-ratio")
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

// securitySetup is one server (with the two users, or anonymous), its
// node and a collection, and what was measured on it.
type securitySetup struct {
	name           string
	auth, checksum bool
	col            *Collection
	one, hundred   writeTally
	lat            []float64
}

func (s *securitySetup) use() { protocol.NoChecksum.Store(!s.checksum) }

func (s *securitySetup) start(b *testing.B, data [][]float32) {
	b.Helper()
	s.use()
	dir := b.TempDir()
	opts, _, err := node.EmbeddedOptions(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	if !s.auth {
		opts.Nkeys = nil
	}
	srv, err := node.StartServer(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	ctx := context.Background()
	copts := []ClientOption{AsNode(), Timeout(time.Minute)}
	if s.auth {
		creds, err := node.LoadCreds(dir + "/creds")
		if err != nil {
			b.Fatal(err)
		}
		copts = append(copts, Credentials(creds.NodeFile()))
	}
	c, err := Connect(ctx, srv.URL(), copts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	node, err := node.Start(ctx, c.x, node.Config{Dir: dir, Device: engine.CPU})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { node.Close() })
	if s.col, err = c.Create(ctx, "sec", CollectionConfig{Dim: len(data[0]), Shards: 1}); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(data); i += 1000 {
		if _, err := s.col.Add(ctx, umbra.Vectors(data[i:min(i+1000, len(data))]), umbra.NoWait()); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.col.Search(ctx, data[0], 1); err != nil { // applied through the last write
		b.Fatal(err)
	}
}

// writeSlice writes rows a call (acknowledged, NoWait) for d, then waits
// with a search until the node applied them; it returns the calls and the
// time both took.
func (s *securitySetup) writeSlice(b *testing.B, rows [][]float32, d time.Duration) (int, time.Duration) {
	ctx := context.Background()
	start := time.Now()
	calls := 0
	for time.Since(start) < d {
		if _, err := s.col.Add(ctx, umbra.Vectors(rows), umbra.NoWait()); err != nil {
			b.Fatal(err)
		}
		calls++
	}
	if _, err := s.col.Search(ctx, rows[0], 1); err != nil {
		b.Fatal(err)
	}
	return calls, time.Since(start)
}

// writeTally is the calls of one kind of write and the time they took.
type writeTally struct {
	calls int
	took  time.Duration
}

func (w writeTally) rate() float64 {
	return float64(w.calls) / w.took.Seconds()
}
