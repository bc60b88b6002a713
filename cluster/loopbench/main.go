// Command loopbench measures an umbra cluster on loopback, in one process:
// search latency and throughput of one node alone against a three-node
// cluster (three NATS servers, R3 streams, one shard per node) at the same
// total rows; write throughput into one shard with sync always; and how
// long a new replica takes to catch up from a snapshot.
//
//	go run ./cluster/loopbench                  # the recorded run
//	go run ./cluster/loopbench -rows 20000 -catchup-rows 100000   # quick
//
// Everything runs on the CPU search path, every server and node in this
// process, so the figures include NATS and the nodes sharing the cores.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/cluster"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/cluster/protocol"
)

var (
	rows        = flag.Int("rows", 200000, "rows for the search comparison")
	dim         = flag.Int("dim", 128, "dimension")
	k           = flag.Int("k", 10, "k")
	nLatency    = flag.Int("latency-queries", 200, "queries, one at a time, for latency")
	conc        = flag.Int("conc", 4, "concurrent searchers for throughput")
	dur         = flag.Duration("dur", 5*time.Second, "how long each throughput run lasts")
	writeDur    = flag.Duration("write-dur", 4*time.Second, "how long each write run lasts")
	catchupRows = flag.Int("catchup-rows", 1000000, "rows in the shard a new replica recovers (0: skip)")
	skipSearch  = flag.Bool("skip-search", false, "skip the search comparison")
	skipWrite   = flag.Bool("skip-write", false, "skip the write runs")
	idBlock     = flag.Int("id-block", 1024, "IDs a collection handle reserves from the counter at a time (1: one compare-and-set a call, as before blocks)")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "loopbench:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func run() error {
	ctx := context.Background()
	load, _ := os.ReadFile("/proc/loadavg")
	logf("# loopbench %s", strings.Join(os.Args[1:], " "))
	logf("# %s, GOMAXPROCS %d, %s/%s, %s, load average at start: %s", time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), strings.TrimSpace(string(load)))
	tmp, err := os.MkdirTemp("", "umbra-loopbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if !*skipSearch {
		if err := searchRuns(ctx, tmp); err != nil {
			return err
		}
	}
	if !*skipWrite {
		if err := writeRuns(ctx, tmp); err != nil {
			return err
		}
	}
	if *catchupRows > 0 {
		if err := catchup(ctx, tmp); err != nil {
			return err
		}
	}
	return nil
}

func randRows(r *rand.Rand, n, dim int) []float32 {
	out := make([]float32, n*dim)
	for i := range out {
		out[i] = float32(r.NormFloat64())
	}
	return out
}

// servers starts n embedded NATS servers (one NATS cluster when n > 1)
// and a client on each.
func servers(ctx context.Context, dir string, n int) ([]*node.Embedded, []*cluster.Client, error) {
	var srvs []*node.Embedded
	var cfgs []node.EmbeddedConfig
	var routes []string
	for i := range n {
		cfg := node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: fmt.Sprintf("%s/s%d", dir, i), Name: fmt.Sprintf("s%d", i),
			Creds: dir + "/creds"} // one set of keys for the servers of one cluster
		if n > 1 {
			port := 16222 + i + 10*rand.IntN(1000)
			cfg.ClusterName = "loopbench"
			cfg.ClusterListen = fmt.Sprintf("127.0.0.1:%d", port)
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", port))
		}
		cfgs = append(cfgs, cfg)
	}
	for _, cfg := range cfgs {
		if n > 1 {
			cfg.Routes = routes
		}
		s, err := node.StartEmbedded(cfg)
		if err != nil {
			return nil, nil, err
		}
		srvs = append(srvs, s)
	}
	var clients []*cluster.Client
	deadline := time.Now().Add(60 * time.Second)
	// Each client runs a node too: the node's credentials, and its inbox.
	nkey, err := nats.NkeyOptionFromSeed(srvs[0].NodeCreds())
	if err != nil {
		return nil, nil, err
	}
	for _, s := range srvs {
		for {
			nc, err := nats.Connect(s.URL(), nkey, nats.CustomInboxPrefix(protocol.NodeInboxPrefix), nats.MaxReconnects(-1))
			if err != nil {
				return nil, nil, err
			}
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			c, err := cluster.NewClient(actx, nc, cluster.AsNode(), cluster.Timeout(120*time.Second), cluster.IDBlock(*idBlock))
			cancel()
			if err == nil {
				clients = append(clients, c)
				break
			}
			nc.Close()
			if time.Now().After(deadline) {
				return nil, nil, fmt.Errorf("the NATS cluster did not form: %w", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return srvs, clients, nil
}

func closeAll(srvs []*node.Embedded, clients []*cluster.Client, nodes []*node.Node) {
	for _, n := range nodes {
		n.Close()
	}
	for _, c := range clients {
		c.Conn().Close()
	}
	for _, s := range srvs {
		s.Close()
	}
}

// addAll writes data in calls of batch rows under IDs 1…, acknowledged
// only (NoWait), and returns the time it took.
func addAll(ctx context.Context, col *cluster.Collection, data []float32, dim, batch int) (time.Duration, error) {
	start := time.Now()
	n := len(data) / dim
	for lo := 0; lo < n; lo += batch {
		hi := min(n, lo+batch)
		ids := make([]uint64, hi-lo)
		for i := range ids {
			ids[i] = uint64(lo + i + 1)
		}
		if _, err := col.Add(ctx, umbra.Flat(data[lo*dim:hi*dim], dim), umbra.WithIDs(ids...), umbra.NoWait()); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

type searchFunc func(ctx context.Context, q []float32) ([]umbra.Hit, error)

// measure runs the latency and throughput searches of one configuration
// and checks every answer against want (the local index's).
func measure(ctx context.Context, name string, qs [][]float32, want [][]umbra.Hit, search searchFunc) error {
	check := func(i int, got []umbra.Hit) error {
		w := want[i%len(want)]
		if len(got) != len(w) {
			return fmt.Errorf("%s: query %d: %d hits, want %d", name, i, len(got), len(w))
		}
		for j := range got {
			if got[j].ID != w[j].ID || got[j].Score != w[j].Score {
				return fmt.Errorf("%s: query %d hit %d: %+v, want %+v", name, i, j, got[j], w[j])
			}
		}
		return nil
	}
	// Warm up.
	for i := range min(10, len(qs)) {
		if _, err := search(ctx, qs[i]); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	lat := make([]time.Duration, 0, *nLatency)
	for i := range *nLatency {
		q := i % len(qs)
		t0 := time.Now()
		got, err := search(ctx, qs[q])
		lat = append(lat, time.Since(t0))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := check(q, got); err != nil {
			return err
		}
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	stop := time.Now().Add(*dur)
	t0 := time.Now()
	for g := range *conc {
		wg.Go(func() {
			for i := g; time.Now().Before(stop); i += *conc {
				q := i % len(qs)
				got, err := search(ctx, qs[q])
				if err == nil {
					err = check(q, got)
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	el := time.Since(t0)
	if firstErr != nil {
		return firstErr
	}
	logf("%-34s  p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms  |  %d searchers: %7.1f q/s (%d queries in %.1f s)", name,
		ms(pct(0.5)), ms(pct(0.9)), ms(pct(0.99)), *conc, float64(done.Load())/el.Seconds(), done.Load(), el.Seconds())
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func searchRuns(ctx context.Context, tmp string) error {
	logf("")
	logf("## search: %d rows x %d, k=%d, cosine, CPU; latency over %d single queries one at a time, throughput with %d concurrent single-query searchers for %v; every answer checked against the local index", *rows, *dim, *k, *nLatency, *conc, *dur)
	r := rand.New(rand.NewPCG(1, 2))
	data := randRows(r, *rows, *dim)
	qs := make([][]float32, 64)
	for i := range qs {
		qs[i] = randRows(r, 1, *dim)
	}
	local, err := engine.New(ctx, engine.Config{Dim: *dim, Metric: umbra.Cosine, Device: engine.CPU})
	if err != nil {
		return err
	}
	defer local.Close()
	ids := make([]uint64, *rows)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	if _, err := local.Add(ctx, umbra.Flat(data, *dim), umbra.WithIDs(ids...)); err != nil {
		return err
	}
	want := make([][]umbra.Hit, len(qs))
	for i, q := range qs {
		if want[i], err = local.Search(ctx, q, *k); err != nil {
			return err
		}
	}
	if err := measure(ctx, "engine index, no cluster", qs, want, func(ctx context.Context, q []float32) ([]umbra.Hit, error) {
		return local.Search(ctx, q, *k)
	}); err != nil {
		return err
	}
	// One server, one node, all rows in one shard; then in three.
	for _, shards := range []int{1, 3} {
		dir := fmt.Sprintf("%s/one-%d", tmp, shards)
		srvs, clients, err := servers(ctx, dir, 1)
		if err != nil {
			return err
		}
		c := clients[0]
		col, err := c.Create(ctx, "b", cluster.CollectionConfig{Dim: *dim, Shards: shards})
		if err != nil {
			return err
		}
		nd, err := startNode(ctx, c, node.Config{Dir: dir + "/node", Device: engine.CPU})
		if err != nil {
			return err
		}
		took, err := addAll(ctx, col, data, *dim, 2000)
		if err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := col.Search(ctx, qs[0], *k); err != nil { // waits for the node to apply every write
			return err
		}
		logf("# 1 server, 1 node, %d shard(s): loaded in %.1f s (acknowledged), applied %.1f s later", shards, took.Seconds(), time.Since(t0).Seconds())
		if err := measure(ctx, fmt.Sprintf("1 server, 1 node, %d shard(s)", shards), qs, want, func(ctx context.Context, q []float32) ([]umbra.Hit, error) {
			return col.Search(ctx, q, *k)
		}); err != nil {
			return err
		}
		closeAll(srvs, clients, []*node.Node{nd})
	}
	// Three servers (R3), three nodes, node i holding shard i, each on its
	// own server; the client on server 0.
	dir := tmp + "/three"
	srvs, clients, err := servers(ctx, dir, 3)
	if err != nil {
		return err
	}
	col, err := clients[0].Create(ctx, "b", cluster.CollectionConfig{Dim: *dim, Shards: 3})
	if err != nil {
		return err
	}
	var nodes []*node.Node
	for i := range 3 {
		n, err := startNode(ctx, clients[i], node.Config{Dir: fmt.Sprintf("%s/node%d", dir, i), Device: engine.CPU,
			Serve: func(_ string, s int) bool { return s == i }})
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	took, err := addAll(ctx, col, data, *dim, 2000)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := col.Search(ctx, qs[0], *k); err != nil {
		return err
	}
	logf("# 3 servers (R3), 3 nodes, 3 shards: loaded in %.1f s (acknowledged), applied %.1f s later", took.Seconds(), time.Since(t0).Seconds())
	if err := measure(ctx, "3 servers R3, 3 nodes, 3 shards", qs, want, func(ctx context.Context, q []float32) ([]umbra.Hit, error) {
		return col.Search(ctx, q, *k)
	}); err != nil {
		return err
	}
	closeAll(srvs, clients, nodes)
	return nil
}

// writeRuns measures acknowledged writes into one shard (sync always) with
// one writer or several, of single rows or batches, on one server (R1)
// and on three (R3).
func writeRuns(ctx context.Context, tmp string) error {
	logf("")
	logf("## writes into one shard, sync always, acknowledged (NoWait: stored and fsynced by JetStream, not yet applied), IDs assigned by the cluster from blocks of %d a handle (one KV compare-and-set a block, one read of the ID floor a call), %d-dim rows, %v per run; 8 handles: each writer its own collection handle, spread over the servers' clients", *idBlock, *dim, *writeDur)
	for _, n := range []int{1, 3} {
		dir := fmt.Sprintf("%s/write-%d", tmp, n)
		srvs, clients, err := servers(ctx, dir, n)
		if err != nil {
			return err
		}
		col, err := clients[0].Create(ctx, "w", cluster.CollectionConfig{Dim: *dim, Shards: 1})
		if err != nil {
			return err
		}
		r := rand.New(rand.NewPCG(3, 4))
		for _, run := range []struct {
			writers, batch int
			own            bool
		}{{1, 1, false}, {8, 1, false}, {8, 1, true}, {1, 100, false}, {1, 1000, false}} {
			data := randRows(r, run.batch, *dim)
			var calls atomic.Int64
			var firstErr error
			var once sync.Once
			var wg sync.WaitGroup
			stop := time.Now().Add(*writeDur)
			t0 := time.Now()
			handles := make([]*cluster.Collection, run.writers)
			for w := range handles {
				handles[w] = col
				if run.own {
					if handles[w], err = clients[w%len(clients)].Open(ctx, "w"); err != nil {
						return err
					}
				}
			}
			t0 = time.Now()
			stop = t0.Add(*writeDur)
			for w := range run.writers {
				col := handles[w]
				wg.Go(func() {
					for time.Now().Before(stop) {
						if _, err := col.Add(ctx, umbra.Flat(data, *dim), umbra.NoWait()); err != nil {
							once.Do(func() { firstErr = err })
							return
						}
						calls.Add(1)
					}
				})
			}
			wg.Wait()
			el := time.Since(t0).Seconds()
			if firstErr != nil {
				return firstErr
			}
			c := float64(calls.Load())
			handlesNote := "           "
			if run.own {
				handlesNote = ", 8 handles"
			}
			logf("%d server(s) R%d, %d writer(s)%s, %4d rows/call: %8.1f calls/s  %9.0f rows/s  %6.1f MB/s of vectors", n, n, run.writers, handlesNote, run.batch,
				c/el, c*float64(run.batch)/el, c*float64(run.batch*(*dim)*4)/el/1e6)
		}
		closeAll(srvs, clients, nil)
	}
	return nil
}

// catchup loads catchupRows into one shard on one server, has a node apply
// and snapshot it, writes a tail past the snapshot, and times a new node
// (empty directory) until it has applied the whole stream.
func catchup(ctx context.Context, tmp string) error {
	n := *catchupRows
	logf("")
	logf("## catch-up: %d rows x %d in one shard (one server), snapshot, a 1000-row tail, then a new replica from an empty directory", n, *dim)
	dir := tmp + "/catchup"
	srvs, clients, err := servers(ctx, dir, 1)
	if err != nil {
		return err
	}
	defer closeAll(srvs, clients, nil)
	c := clients[0]
	col, err := c.Create(ctx, "big", cluster.CollectionConfig{Dim: *dim, Shards: 1, MaxBytes: 4 << 30})
	if err != nil {
		return err
	}
	a, err := startNode(ctx, c, node.Config{Dir: dir + "/a", Device: engine.CPU})
	if err != nil {
		return err
	}
	defer a.Close()
	r := rand.New(rand.NewPCG(5, 6))
	data := randRows(r, n, *dim)
	took, err := addAll(ctx, col, data, *dim, 2000)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := col.Search(ctx, data[:*dim], *k); err != nil {
		return err
	}
	applied := time.Since(t0)
	logf("load: %.1f s acknowledged (%.0f rows/s, %.0f MB/s), node applied it all %.1f s later", took.Seconds(), float64(n)/took.Seconds(), float64(n**dim*4)/took.Seconds()/1e6, applied.Seconds())
	t0 = time.Now()
	seq, err := a.Snapshot(ctx, "big", 0)
	if err != nil {
		return err
	}
	logf("snapshot at message %d: %.1f s (save, upload to the Object Store; the first snapshot trims nothing)", seq, time.Since(t0).Seconds())
	tail := randRows(r, 1000, *dim)
	ids := make([]uint64, 1000)
	for i := range ids {
		ids[i] = uint64(n + i + 1)
	}
	if _, err := col.Add(ctx, umbra.Flat(tail, *dim), umbra.WithIDs(ids...)); err != nil {
		return err
	}
	last := col.Token()[0]
	t0 = time.Now()
	b, err := startNode(ctx, c, node.Config{Dir: dir + "/b", Device: engine.CPU})
	if err != nil {
		return err
	}
	defer b.Close()
	for {
		if got, _ := b.Applied("big", 0); got >= last {
			break
		}
		if time.Since(t0) > 10*time.Minute {
			return fmt.Errorf("the new replica did not catch up in 10 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	catch := time.Since(t0)
	logf("new replica caught up to message %d (snapshot + tail): %.1f s (%.0f rows/s)", last, catch.Seconds(), float64(n+1000)/catch.Seconds())
	// It answers alone, exactly as the first did.
	q := tail[:*dim]
	want, err := col.Search(ctx, q, *k)
	if err != nil {
		return err
	}
	a.Close()
	got, err := col.Search(ctx, q, *k)
	if err != nil {
		return err
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("the new replica answers %v, the first %v", got, want)
	}
	logf("the new replica, alone, answers as the first did")
	return nil
}

// startNode starts a node on the connection of c, a client made with
// cluster.AsNode.
func startNode(ctx context.Context, c *cluster.Client, cfg node.Config) (*node.Node, error) {
	x, err := protocol.Open(ctx, c.Conn(), true)
	if err != nil {
		return nil, err
	}
	return node.Start(ctx, x, cfg)
}
