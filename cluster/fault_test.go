//go:build unix

package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
)

// childServer is one NATS server of a loopback cluster in its own
// process, with the options StartEmbedded uses, until it is killed.
// UMBRA_NATS_ROUTES are the other servers' route URLs, comma-separated.
func childServer() int {
	cfg := node.EmbeddedConfig{
		Listen:        os.Getenv("UMBRA_NATS_LISTEN"),
		Dir:           os.Getenv("UMBRA_NATS_DIR"),
		Name:          os.Getenv("UMBRA_NATS_NAME"),
		ClusterName:   "umbra-fault",
		ClusterListen: os.Getenv("UMBRA_NATS_CLUSTER_LISTEN"),
		Routes:        strings.Split(os.Getenv("UMBRA_NATS_ROUTES"), ","),
		Creds:         os.Getenv("UMBRA_NATS_CREDS_DIR"),
	}
	opts, _, err := node.EmbeddedOptions(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Routes only as configured (a partition test puts proxies on them;
	// gossiped direct routes would go round the cut).
	opts.Cluster.NoAdvertise = true
	if _, err := node.StartServer(opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	select {}
}

// serverProcs is a three-server NATS cluster, one process per server, on
// fixed loopback ports so that a killed server restarts as itself.
type serverProcs struct {
	t       *testing.T
	names   []string
	listen  []string
	cluster []string // cluster listen addresses
	routes  [][]string
	dirs    []string
	creds   *node.CredsDir // shared by the servers
	mu      sync.Mutex
	procs   []*os.Process
}

// startServerProcs starts n servers; routes(i, j) is the address server i
// dials to reach server j's cluster port (the port itself, or a proxy).
func startServerProcs(t *testing.T, n int, routes func(i, j int, clusterAddr string) string) *serverProcs {
	t.Helper()
	sv := &serverProcs{t: t, procs: make([]*os.Process, n)}
	var err error
	if sv.creds, err = node.LoadCreds(filepath.Join(t.TempDir(), "creds")); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		sv.names = append(sv.names, fmt.Sprintf("s%d", i))
		sv.listen = append(sv.listen, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
		sv.cluster = append(sv.cluster, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
		sv.dirs = append(sv.dirs, t.TempDir())
	}
	for i := range n {
		var rs []string
		for j := range n {
			if j == i {
				continue
			}
			addr := sv.cluster[j]
			if routes != nil {
				addr = routes(i, j, addr)
			}
			rs = append(rs, "nats-route://"+addr)
		}
		sv.routes = append(sv.routes, rs)
	}
	t.Cleanup(func() {
		sv.mu.Lock()
		defer sv.mu.Unlock()
		for _, p := range sv.procs {
			if p != nil {
				p.Signal(syscall.SIGCONT)
				p.Kill()
				p.Wait()
			}
		}
	})
	for i := range n {
		sv.start(i)
	}
	return sv
}

func (sv *serverProcs) start(i int) {
	t := sv.t
	t.Helper()
	cmd := testkit.Child("natsd", "UMBRA_NATS_NAME="+sv.names[i], "UMBRA_NATS_LISTEN="+sv.listen[i],
		"UMBRA_NATS_CLUSTER_LISTEN="+sv.cluster[i], "UMBRA_NATS_ROUTES="+strings.Join(sv.routes[i], ","),
		"UMBRA_NATS_DIR="+sv.dirs[i], "UMBRA_NATS_CREDS_DIR="+sv.creds.Dir())
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ready <- sc.Scan() && sc.Text() == "ready"
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Wait()
			t.Fatalf("server %s did not start: %s", sv.names[i], stderr.String())
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("server %s did not start within 2 minutes", sv.names[i])
	}
	sv.mu.Lock()
	sv.procs[i] = cmd.Process
	sv.mu.Unlock()
}

// kill SIGKILLs server i and reaps it.
func (sv *serverProcs) kill(i int) {
	sv.mu.Lock()
	p := sv.procs[i]
	sv.procs[i] = nil
	sv.mu.Unlock()
	if err := p.Signal(syscall.SIGKILL); err != nil {
		sv.t.Fatal(err)
	}
	p.Wait()
}

func (sv *serverProcs) index(name string) int {
	for i, n := range sv.names {
		if n == name {
			return i
		}
	}
	sv.t.Fatalf("no server named %q", name)
	return -1
}

// client connects to the servers named by idx (every server if none) and
// waits for JetStream to have its meta leader.
func (sv *serverProcs) client(ctx context.Context, idx ...int) *Client {
	t := sv.t
	t.Helper()
	if len(idx) == 0 {
		for i := range sv.listen {
			idx = append(idx, i)
		}
	}
	var urls []string
	for _, i := range idx {
		urls = append(urls, "nats://"+sv.listen[i])
	}
	for {
		nc, err := nats.Connect(strings.Join(urls, ","), append(nodeNATS(t, sv.creds.NodeFile()), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.DontRandomize())...)
		if err != nil {
			t.Fatal(err)
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := NewClient(actx, nc, AsNode(), Timeout(20*time.Second), AttemptTimeout(time.Second))
		cancel()
		if err == nil {
			t.Cleanup(nc.Close)
			return c
		}
		nc.Close()
		if ctx.Err() != nil {
			t.Fatalf("the NATS cluster did not form: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// streamCalls reads every message of a shard's stream and counts, per
// write call (named by its first row's ID / rowsPerCall), how often it is
// stored.
func streamCalls(t *testing.T, ctx context.Context, c *Client, stream string, rowsPerCall uint64) map[uint64]int {
	t.Helper()
	st, err := c.x.JS.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Message by message from the stream leader, each read retried while
	// the stream settles after the kill.
	out := map[uint64]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		var msg *jetstream.RawStreamMsg
		for {
			gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			msg, err = st.GetMsg(gctx, seq)
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("reading message %d of %s: %v", seq, stream, err)
		}
		m, err := protocol.DecodeWrite(msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		out[(m.IDs[0]-1)/rowsPerCall]++
	}
	return out
}

// The stream leader's server, SIGKILLed while three writers write: every
// write is acknowledged (two of three servers stay up; the stream's and
// the ID counter's elections are waited out), every acknowledged write is
// stored once and applied once (the answers over every row equal a
// reference holding exactly the stored calls), and no call is stored
// twice (retries after the lost leader go under the same message ID).
func TestClusterLeaderServerKilledMidWrite(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts NATS server processes (skipped under -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sv := startServerProcs(t, 3, nil)
	c := sv.client(ctx)
	const dim, rowsPerCall, writers, calls = 8, 8, 3, 20
	col, err := c.Create(ctx, "w", CollectionConfig{Dim: dim, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	node, err := node.Start(ctx, c.x, node.Config{Dir: t.TempDir(), Device: engine.CPU, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	// Every call's rows, made up front; call i names rows i*8+1 … i*8+8.
	r := testkit.Rand(t)
	rows := make([][][]float32, writers*calls)
	for i := range rows {
		rows[i] = make([][]float32, rowsPerCall)
		for j := range rows[i] {
			rows[i][j] = testkit.Grid(r, dim)
			rows[i][j][0] += 1.0 / 64
		}
	}
	ids := func(call int) []uint64 {
		out := make([]uint64, rowsPerCall)
		for j := range out {
			out[j] = uint64(call*rowsPerCall + j + 1)
		}
		return out
	}
	// Events in order (no clocks): a call is in flight at the kill when it
	// started before it and ended after it.
	var ev atomic.Int64
	var killEv atomic.Int64
	killEv.Store(1 << 62)
	type result struct {
		start, end int64
		err        error
	}
	results := make([]result, len(rows))
	var acked atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range calls {
				call := w*calls + i
				res := result{start: ev.Add(1)}
				wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
				_, res.err = col.Add(wctx, umbra.Vectors(rows[call]), umbra.WithIDs(ids(call)...), umbra.NoWait())
				wcancel()
				res.end = ev.Add(1)
				results[call] = res
				if res.err == nil {
					acked.Add(1)
				}
			}
		})
	}
	for acked.Load() < 12 {
		time.Sleep(time.Millisecond)
	}
	st, err := c.x.JS.Stream(ctx, protocol.StreamName("w", 0))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("no stream leader: %v %+v", err, info)
	}
	leader := sv.index(info.Cluster.Leader)
	killEv.Store(ev.Add(1))
	sv.kill(leader)
	wg.Wait()
	inFlight, nacked := 0, 0
	for i, res := range results {
		if res.start < killEv.Load() && res.end > killEv.Load() {
			inFlight++
		}
		if res.err == nil {
			nacked++
		} else {
			t.Logf("call %d not acknowledged: %v", i, res.err)
		}
	}
	t.Logf("killed the stream leader %s; %d calls in flight at the kill, %d of %d acknowledged", info.Cluster.Leader, inFlight, nacked, len(results))
	if inFlight == 0 {
		t.Fatal("no write was in flight when the leader was killed: the test tested nothing")
	}
	if nacked < len(results) {
		// Two of three servers stay up: each write waits out the
		// elections (seconds) and goes through.
		t.Errorf("only %d of %d writes acknowledged with two of three servers up", nacked, len(results))
	}
	stored := streamCalls(t, ctx, c, protocol.StreamName("w", 0), rowsPerCall)
	ref := newMirror(t, dim, umbra.Cosine)
	for call, res := range results {
		n := stored[uint64(call)]
		if n > 1 {
			t.Errorf("call %d is stored %d times", call, n)
		}
		if res.err == nil && n == 0 {
			t.Errorf("call %d was acknowledged and is not stored", call)
		}
		if n > 0 {
			if _, err := ref.ix.Add(ctx, umbra.Vectors(rows[call]), umbra.WithIDs(ids(call)...)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if t.Failed() {
		return
	}
	// The node applied what the stream holds, once: every row's answer.
	sinfo, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q := testkit.Grid(r, dim)
	q[1] += 1.0 / 64
	got, err := col.Search(ctx, q, len(rows)*rowsPerCall+10, umbra.AfterToken([]uint64{sinfo.State.LastSeq}))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ref.ix.Search(ctx, q, len(rows)*rowsPerCall+10)
	sameHits(t, "every row after the leader's kill", want, got)
}

// A replica process SIGKILLed while searches are under way (each request
// held 30 ms in the replica, so some are in it at the kill): every search
// answers exactly or fails, never short; with no replica left, searches
// fail with ErrShardsUnavailable.
func TestClusterReplicaKilledMidSearch(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts node processes (skipped under -short)")
	}
	dir, srv, c := serverAndClient(t, Timeout(20*time.Second), AttemptTimeout(time.Second))
	ctx := context.Background()
	const dim, shards = 8, 3
	col, err := c.Create(ctx, "r", CollectionConfig{Dim: dim, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	ref := newMirror(t, dim, umbra.Cosine)
	r := testkit.Rand(t)
	vs := make([][]float32, 600)
	for i := range vs {
		vs[i] = testkit.Grid(r, dim)
		vs[i][0] += 1.0 / 64
	}
	ids, err := col.Add(ctx, umbra.Vectors(vs), umbra.NoWait())
	if err != nil {
		t.Fatal(err)
	}
	ref.ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...))
	slow := "UMBRA_SERVE_DELAY_MS=30"
	p1, _ := startChildNode(t, srv, dir+"/n1", slow)
	p2, _ := startChildNode(t, srv, dir+"/n2", slow)
	qs := make([][]float32, 6)
	want := make([][]umbra.Hit, len(qs))
	for i := range qs {
		qs[i] = testkit.Grid(r, dim)
		qs[i][2] += 1.0 / 64
		want[i], _ = ref.ix.Search(ctx, qs[i], 25)
	}
	var phase atomic.Int32 // 0: both up, 1: one killed, 2: both killed
	var counts [3]struct{ ok, failed atomic.Int64 }
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				q := (g + i) % len(qs)
				ph := phase.Load()
				sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				got, err := col.Search(sctx, qs[q], 25)
				cancel()
				done := phase.Load()
				if err != nil {
					if !errors.Is(err, ErrShardsUnavailable) {
						errs <- fmt.Errorf("search: %v (not ErrShardsUnavailable)", err)
						return
					}
					counts[done].failed.Add(1)
					continue
				}
				if ph == 2 {
					errs <- fmt.Errorf("a search begun after every replica was killed answered %d hits", len(got))
					return
				}
				if len(got) != len(want[q]) {
					errs <- fmt.Errorf("query %d: %d hits, want %d", q, len(got), len(want[q]))
					return
				}
				for j := range got {
					if got[j] != want[q][j] {
						errs <- fmt.Errorf("query %d: hit %d is %+v, want %+v", q, j, got[j], want[q][j])
						return
					}
				}
				counts[done].ok.Add(1)
			}
		})
	}
	wait := func(ph int, n int64) {
		for counts[ph].ok.Load() < n {
			select {
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(time.Millisecond):
			}
		}
	}
	wait(0, 20)
	p1.Signal(syscall.SIGKILL)
	p1.Wait() // gone: no answer can come from it after this
	phase.Store(1)
	wait(1, 20) // the other replica answers, the killed one's requests retried
	p2.Signal(syscall.SIGKILL)
	p2.Wait()
	phase.Store(2)
	for counts[2].failed.Load() < 4 {
		select {
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(time.Millisecond):
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for ph := range counts {
		t.Logf("phase %d: %d exact answers, %d ErrShardsUnavailable", ph, counts[ph].ok.Load(), counts[ph].failed.Load())
	}
}
