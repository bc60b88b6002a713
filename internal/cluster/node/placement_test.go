package node

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/cluster"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
)

// Replicas are spread in proportion to memory, R distinct nodes a shard,
// and current holders are kept where the balance allows.
func TestPlaceShardsByMemory(t *testing.T) {
	count := func(a [][]string) map[string]int {
		m := map[string]int{}
		for _, h := range a {
			if len(h) != len(slices.Compact(slices.Clone(h))) {
				t.Fatalf("a shard placed twice on one node: %v", a)
			}
			for _, id := range h {
				m[id]++
			}
		}
		return m
	}
	mem := map[string]int64{"a": 1 << 30, "b": 1 << 30, "c": 2 << 30}
	got := count(placeShards([]string{"c", "a", "b"}, mem, make([][]string, 8), 1))
	if got["a"] != 2 || got["b"] != 2 || got["c"] != 4 {
		t.Fatalf("8 shards, R1, memory 1:1:2: %v", got)
	}
	mem["c"] = 1 << 30
	two := placeShards([]string{"a", "b"}, mem, make([][]string, 6), 3)
	for _, h := range two {
		if !slices.Equal(h, []string{"a", "b"}) {
			t.Fatalf("R3 on two nodes: %v", two)
		}
	}
	// c joins: R2 over three equal nodes, 4 each, and every shard keeps
	// at least one of its holders (a move, not a reshuffle).
	three := placeShards([]string{"a", "b", "c"}, mem, two, 2)
	if got := count(three); got["a"] != 4 || got["b"] != 4 || got["c"] != 4 {
		t.Fatalf("6 shards, R2, three equal nodes: %v", three)
	}
	for s, h := range three {
		if !slices.ContainsFunc(h, func(id string) bool { return slices.Contains(two[s], id) }) {
			t.Fatalf("shard %d moved whole: %v → %v", s, two[s], h)
		}
	}
	if got := count(placeShards(nil, mem, two, 2)); len(got) != 0 {
		t.Fatalf("no nodes: %v", got)
	}
}

// fastPlacement shortens the placement timings for a test.
func fastPlacement(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster tests start a NATS server (skipped under -short)")
	}
	oldTick, oldLease, oldTTL := placementTick, leaseTTL, nodeTTL
	placementTick, leaseTTL, nodeTTL = 100*time.Millisecond, 600*time.Millisecond, 1500*time.Millisecond
	t.Cleanup(func() { placementTick, leaseTTL, nodeTTL = oldTick, oldLease, oldTTL })
}

// placed is a placement test's cluster: one NATS server, the collection
// "pl" of shards shards and R node replicas, and the nodes started on it,
// each on a connection of its own.
type placed struct {
	t      *testing.T
	ctx    context.Context
	dir    string
	urls   []string // the servers; node i connects to urls[i % len]
	c      *cluster.Client
	col    *cluster.Collection
	shards int
	R      int
	mu     sync.Mutex
	nodes  map[string]*Node
	conns  map[string]*protocol.Conn
	pkv    jetstream.KeyValue
	creds  string // the node credentials file
}

func newPlaced(t *testing.T, dim, shards, R int) *placed {
	dir, srv, c := serverAndClient(t, cluster.Timeout(20*time.Second))
	return placedOn(t, dir, []string{srv.URL()}, srv.NodeCreds(), c, dim, shards, R)
}

func placedOn(t *testing.T, dir string, urls []string, creds string, c *cluster.Client, dim, shards, R int) *placed {
	h := &placed{t: t, ctx: context.Background(), dir: dir, urls: urls, creds: creds, c: c, shards: shards, R: R, nodes: map[string]*Node{}, conns: map[string]*protocol.Conn{}}
	var err error
	if h.col, err = h.c.Create(h.ctx, "pl", cluster.CollectionConfig{Dim: dim, Shards: shards, NodeReplicas: R}); err != nil {
		t.Fatal(err)
	}
	return h
}

// start starts node id (memory 1 GiB, logging with times).
func (h *placed) start(id string) {
	t := h.t
	h.mu.Lock()
	url := h.urls[len(h.conns)%len(h.urls)]
	h.mu.Unlock()
	nc, err := protocol.Dial(h.ctx, url, protocol.DialConfig{Creds: h.creds, Node: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	noDenials(t, nc)
	n, err := Start(h.ctx, nc, Config{Dir: filepath.Join(h.dir, id), Device: engine.CPU, Placement: true,
		ID: id, Memory: 1 << 30, Logf: func(f string, a ...any) { t.Logf(time.Now().Format("15:04:05.000 ")+id+": "+f, a...) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	h.mu.Lock()
	h.nodes[id], h.conns[id] = n, nc
	h.mu.Unlock()
}

// node returns node id (nil once gone).
func (h *placed) node(id string) *Node {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nodes[id]
}

// kill ends node id without a word: its connection closes, its record
// expires after the TTL.
func (h *placed) kill(id string) {
	h.mu.Lock()
	nc := h.conns[id]
	delete(h.nodes, id)
	h.mu.Unlock()
	nc.Close()
}

// forget drops node id from the nodes watched (after it left and closed).
func (h *placed) forget(id string) *Node {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.nodes[id]
	delete(h.nodes, id)
	return n
}

// answered says whether some node answers shard s's searches now, having
// applied through tok.
func (h *placed) answered(s int, tok uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.nodes {
		n.mu.Lock()
		reps := n.replicas["pl"]
		ok := s < len(reps) && reps[s] != nil && reps[s].answering() && reps[s].applied.Load() >= tok
		n.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// assignment reads the collection's placement record.
func (h *placed) assignment() (assignment, string, bool) {
	if h.pkv == nil {
		var err error
		if h.pkv, err = connOf(h.t, h.c).JS.KeyValue(h.ctx, BucketPlacement); err != nil {
			return assignment{}, "", false
		}
	}
	e, err := h.pkv.Get(h.ctx, assignKey("pl"))
	if err != nil {
		return assignment{}, "", false
	}
	var a assignment
	if json.Unmarshal(e.Value(), &a) != nil || len(a.Shards) != h.shards {
		return assignment{}, string(e.Value()), false
	}
	return a, string(e.Value()), true
}

// settled waits until every shard is served by R of live and by nothing
// else, with no move pending, and each node holds exactly what it serves.
func (h *placed) settled(what string, live ...string) assignment {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		a, raw, ok := h.assignment()
		if last = raw; !ok {
			continue
		}
		for _, id := range live {
			ok = ok && slices.ContainsFunc(a.Shards, func(sp shardPlacement) bool { return slices.Contains(sp.Serving, id) })
		}
		h.mu.Lock()
		for s, sp := range a.Shards {
			ok = ok && len(sp.Adding) == 0 && len(sp.Serving) == h.R
			for _, id := range sp.Serving {
				ok = ok && slices.Contains(live, id)
			}
			for id, n := range h.nodes {
				_, holds := n.Applied("pl", s)
				ok = ok && holds == slices.Contains(sp.Serving, id)
			}
		}
		h.mu.Unlock()
		if ok {
			return a
		}
	}
	h.t.Fatalf("%s: placement did not settle on %v in 10 s; last record %s", what, live, last)
	return assignment{}
}

// load writes calls × 20 rows (NoWait) and returns queries and their
// exact answers at k 10, from a local reference.
func (h *placed) load(dim, calls int) (queries [][]float32, want [][]umbra.Hit) {
	t := h.t
	r := testkit.Rand(t)
	ref := newMirror(t, dim, umbra.Cosine)
	for range calls {
		vs := testkit.Vectors(r, 20, dim)
		ids, err := h.col.Add(h.ctx, umbra.Vectors(vs), umbra.NoWait())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ref.ix.Add(h.ctx, umbra.Vectors(vs), umbra.WithIDs(ids...)); err != nil {
			t.Fatal(err)
		}
	}
	queries = testkit.Vectors(r, 16, dim)
	want = make([][]umbra.Hit, len(queries))
	for i, q := range queries {
		var err error
		if want[i], err = ref.ix.Search(h.ctx, q, 10); err != nil {
			t.Fatal(err)
		}
	}
	return queries, want
}

// watch runs two searchers (each answer must equal want) and a watcher
// that samples every 2 ms, while watching says so, whether each shard has
// a node answering it that applied tok. stop ends them and returns the
// searches made, the failed or inexact ones and the gaps seen.
type watch struct {
	searches atomic.Int64
	watching atomic.Bool
	mu       sync.Mutex
	failures []string
	gaps     []string
	stop     chan struct{}
	wg       sync.WaitGroup
}

func (h *placed) watch(queries [][]float32, want [][]umbra.Hit) *watch {
	w := &watch{stop: make(chan struct{})}
	w.watching.Store(true)
	for g := range 2 {
		w.wg.Go(func() {
			for i := g; ; i++ {
				select {
				case <-w.stop:
					return
				default:
				}
				q := i % len(queries)
				got, err := h.col.Search(h.ctx, queries[q], 10)
				if err == nil && !slices.Equal(got, want[q]) {
					err = fmt.Errorf("query %d: %v, want %v", q, got, want[q])
				}
				if err != nil {
					w.mu.Lock()
					w.failures = append(w.failures, err.Error())
					w.mu.Unlock()
				}
				w.searches.Add(1)
			}
		})
	}
	tok := h.col.Token()
	w.wg.Go(func() {
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			for s := range h.shards {
				if w.watching.Load() && !h.answered(s, tok[s]) {
					w.mu.Lock()
					w.gaps = append(w.gaps, fmt.Sprintf("shard %d at %v", s, time.Now().Format("15:04:05.000")))
					w.mu.Unlock()
				}
			}
		}
	})
	return w
}

// more waits until 20 more searches have been made.
func (w *watch) more(t *testing.T, what string) {
	t.Helper()
	from := w.searches.Load()
	for deadline := time.Now().Add(10 * time.Second); w.searches.Load() < from+20; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: searches stalled", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// end stops the searchers and the watcher and fails t on a gap or a
// search that was not exact.
func (w *watch) end(t *testing.T) {
	t.Helper()
	close(w.stop)
	w.wg.Wait()
	if len(w.gaps) > 0 {
		t.Fatalf("no replica answered (%d samples): %v", len(w.gaps), w.gaps[:min(5, len(w.gaps))])
	}
	if len(w.failures) > 0 {
		t.Fatalf("%d of %d searches during the moves were not exact: %v", len(w.failures), w.searches.Load(), w.failures[:min(5, len(w.failures))])
	}
	t.Logf("%d searches during the moves, all exact", w.searches.Load())
}

// slowNode makes node id apply 20 ms a message, for the rest of the test.
func (h *placed) slowNode(id string) {
	slow := func(n *Node) {
		if h.node(id) == n {
			time.Sleep(20 * time.Millisecond)
		}
	}
	TestHooks.Apply.Store(&slow)
	h.t.Cleanup(func() { TestHooks.Apply.Store(nil) })
}

// twoNodesWatched starts a placement cluster of shards shards and R node
// replicas with 400 rows, nodes a and b settled on it, and the searchers
// and watcher running: each answer must be exact, and (make-before-break,
// watched directly) every shard has a node answering it at every moment
// (a gap would only delay the searches, which ask again until their
// deadline).
func twoNodesWatched(t *testing.T, shards, R int) (*placed, *watch) {
	h := newPlaced(t, 8, shards, R)
	return h, h.twoWatched(8)
}

// twoWatched writes 400 rows of dim, settles nodes a and b and starts the
// searchers and the watcher.
func (h *placed) twoWatched(dim int) *watch {
	queries, want := h.load(dim, 20)
	h.start("a")
	h.start("b")
	h.settled("two nodes", "a", "b")
	w := h.watch(queries, want)
	w.more(h.t, "before the join")
	return w
}

// Three nodes under placement, R = 1 and 2: answers equal a local reference
// while a node joins (shards move to it) and one leaves (its shards move
// away); every move is make-before-break, so every search during them is
// exact (none fails). Then a node dies without a word: its shards move
// once its record expires.
func TestClusterPlacementMoves(t *testing.T) {
	fastPlacement(t)
	for _, R := range []int{1, 2} {
		t.Run(fmt.Sprintf("R%d", R), func(t *testing.T) { placementMoves(t, R) })
	}
}

func placementMoves(t *testing.T, R int) {
	const shards = 4
	h, w := twoNodesWatched(t, shards, R)
	// c applies slowly (20 ms a message, 20 messages a shard), so a
	// replica taken from a or b before c caught up would leave its shard
	// behind the searches' token.
	h.slowNode("c")
	h.start("c")
	a := h.settled("c joined", "a", "b", "c")
	held := map[string]int{}
	for _, sp := range a.Shards {
		for _, id := range sp.Serving {
			held[id]++
		}
	}
	if lo := shards * R / 3; held["c"] < lo || held["a"] < lo || held["b"] < lo {
		t.Fatalf("after c joined, replicas per node %v: not balanced (%d over 3 equal nodes)", held, shards*R)
	}
	w.more(t, "after the join")
	lctx, cancel := context.WithTimeout(h.ctx, 15*time.Second)
	err := h.node("a").Leave(lctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	w.more(t, "after a left")
	h.forget("a").Close()
	h.settled("a left", "b", "c")
	w.more(t, "after a closed")
	// d joins, then c dies (its connection closed, nothing said): after
	// its record expires (TTL 1.5 s here) its shards go to b and d. Under
	// R = 2 each of them had another replica all along; under R = 1 they
	// are unavailable until moved (searches wait, then answer exactly).
	h.start("d")
	h.settled("d joined", "b", "c", "d")
	w.more(t, "after d joined")
	if R == 1 {
		w.watching.Store(false)
	}
	h.kill("c")
	h.settled("c died", "b", "d")
	w.more(t, "after c died")
	w.end(t)
}

// Placement across a NATS cluster of three servers (its KV buckets and
// streams R3, each node on a server of its own), R = 2: c joins and a
// leaves while searches run, every answer exact and every shard answered
// at every moment.
func TestClusterPlacementAcrossServers(t *testing.T) {
	fastPlacement(t)
	srvs, c := threeServers(t)
	var urls []string
	for _, s := range srvs {
		urls = append(urls, s.URL())
	}
	h := placedOn(t, t.TempDir(), urls, srvs[0].NodeCreds(), c, 8, 4, 2)
	w := h.twoWatched(8)
	h.start("c")
	h.settled("c joined", "a", "b", "c")
	w.more(t, "after the join")
	lctx, cancel := context.WithTimeout(h.ctx, 15*time.Second)
	err := h.node("a").Leave(lctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	h.forget("a").Close()
	h.settled("a left", "b", "c")
	w.more(t, "after a left")
	w.end(t)
}

// A node killed while it is being added (following the stream toward
// since, not yet serving) changes nothing for the searches: the shards it
// was to take are served by their holders throughout, and once its record
// expires the controller gives up the move and settles on the nodes left.
// A node that joins afterwards takes its share as usual.
func TestClusterPlacementNodeKilledMidMove(t *testing.T) {
	fastPlacement(t)
	h, w := twoNodesWatched(t, 4, 1)
	// c applies slowly enough (20 ms a message, 20 a shard) to be caught
	// mid-move.
	h.slowNode("c")
	h.start("c")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("c was never being added in 10 s")
		}
		a, _, ok := h.assignment()
		if ok && slices.ContainsFunc(a.Shards, func(sp shardPlacement) bool { return slices.Contains(sp.Adding, "c") }) {
			break
		}
	}
	h.kill("c")
	h.settled("c killed mid-move", "a", "b")
	w.more(t, "after c was killed")
	h.start("d")
	h.settled("d joined", "a", "b", "d")
	w.more(t, "after d joined")
	w.end(t)
}

// A lone node under placement serves every shard (R capped by the live
// nodes), and Leave says at once that no node can take them.
func TestClusterPlacementLoneNodeLeave(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster tests start a NATS server (skipped under -short)")
	}
	oldTick := placementTick
	placementTick = 100 * time.Millisecond
	t.Cleanup(func() { placementTick = oldTick })
	dir, _, c := serverAndClient(t, cluster.Timeout(20*time.Second))
	ctx := context.Background()
	col, err := c.Create(ctx, "lone", cluster.CollectionConfig{Dim: 3, Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Start(ctx, connOf(t, c), Config{Dir: dir, Device: engine.CPU, Placement: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.ID() == "" {
		t.Fatal("a placement node has no ID")
	}
	ids, err := col.Add(ctx, umbra.Vectors([][]float32{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 0}}))
	if err != nil {
		t.Fatal(err) // waits for a replica of each shard touched: all assigned
	}
	hits, err := col.Search(ctx, []float32{1, 0, 0}, 10)
	if err != nil || len(hits) != 4 || hits[0].ID != ids[0] {
		t.Fatalf("hits %v, %v; want 4, first %d", hits, err, ids[0])
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := n.Leave(lctx); err == nil || !strings.Contains(err.Error(), "no other node") {
		t.Fatalf("Leave of a lone node: %v", err)
	}
	for s := range 3 {
		if _, ok := n.Applied("lone", s); !ok {
			t.Fatalf("shard %d let go with no node to take it", s)
		}
	}
}

// A controller that has just taken over and whose listing of the nodes
// misses a live node serving shards (a listing can miss a key put again
// while it runs) keeps that node: only a record that is gone counts as a
// node gone. Before, such a controller moved the node's shards away and
// left them with no replica answering until the move was made.
func TestClusterNewControllerKeepsAMissedNode(t *testing.T) {
	fastPlacement(t)
	h := newPlaced(t, 4, 6, 1)
	controller := func() string {
		if _, _, ok := h.assignment(); !ok && h.pkv == nil {
			return ""
		}
		e, err := h.pkv.Get(h.ctx, keyController)
		if err != nil {
			return ""
		}
		return string(e.Value())
	}
	// a starts first and so holds the controller key.
	h.start("a")
	waitFor(t, "a to control", func() bool { return controller() == "a" })
	h.start("b")
	h.start("c")
	serves := func(a assignment, id string) int {
		k := 0
		for _, sp := range a.Shards {
			if slices.Contains(sp.Serving, id) {
				k++
			}
		}
		return k
	}
	waitFor(t, "a to hand shards to b and c", func() bool {
		a, _, ok := h.assignment()
		return ok && serves(a, "b") > 0 && serves(a, "c") > 0
	})
	// From here on every listing misses c; a, which saw c, leaves and
	// closes, and b or c takes the controller over.
	hide := func(id string) bool { return id == "c" }
	TestHooks.ListNodes.Store(&hide)
	defer TestHooks.ListNodes.Store(nil)
	lctx, cancel := context.WithTimeout(h.ctx, 15*time.Second)
	err := h.node("a").Leave(lctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	h.forget("a").Close()
	waitFor(t, "b or c to take the controller over", func() bool { k := controller(); return k == "b" || k == "c" })
	// Ten rounds of the new controller: c serves throughout.
	for range 10 {
		time.Sleep(placementTick)
		a, raw, ok := h.assignment()
		if !ok {
			t.Fatalf("assignment unreadable: %s", raw)
		}
		if serves(a, "c") == 0 || serves(a, "a") != 0 {
			t.Fatalf("after a left, under a new controller that misses c in its listings: %+v", a)
		}
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("waited 15 s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
