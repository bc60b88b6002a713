package cluster

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
	"github.com/umbravec/umbra/engine"
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

// Three nodes under placement, R = 1 and 2: answers equal a local reference
// while a node joins (shards move to it) and one leaves (its shards move
// away); every move is make-before-break, so every search during them is
// exact (none fails). Then a node dies without a word: its shards move
// once its record expires.
func TestClusterPlacementMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster tests start a NATS server (skipped under -short)")
	}
	oldTick, oldLease, oldTTL := placementTick, leaseTTL, nodeTTL
	placementTick, leaseTTL, nodeTTL = 100*time.Millisecond, 600*time.Millisecond, 1500*time.Millisecond
	t.Cleanup(func() { placementTick, leaseTTL, nodeTTL = oldTick, oldLease, oldTTL })
	for _, R := range []int{1, 2} {
		t.Run(fmt.Sprintf("R%d", R), func(t *testing.T) { placementMoves(t, R) })
	}
}

func placementMoves(t *testing.T, R int) {
	dir, srv, c := serverAndClient(t, Timeout(20*time.Second))
	ctx := context.Background()
	const dim, shards = 8, 4
	col, err := c.Create(ctx, "pl", CollectionConfig{Dim: dim, Shards: shards, NodeReplicas: R})
	if err != nil {
		t.Fatal(err)
	}
	r := testkit.Rand(t)
	ref := newMirror(t, dim, engine.Cosine)
	for range 20 {
		vs := testkit.Vectors(r, 20, dim)
		ids, err := col.Add(ctx, engine.Vectors(vs), NoWait())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ref.ix.Add(ctx, engine.Vectors(vs), engine.WithIDs(ids...)); err != nil {
			t.Fatal(err)
		}
	}
	queries := testkit.Vectors(r, 16, dim)
	want := make([][]engine.Hit, len(queries))
	for i, q := range queries {
		if want[i], err = ref.ix.Search(ctx, q, 10); err != nil {
			t.Fatal(err)
		}
	}
	nodes := map[string]*Node{}
	conns := map[string]*Client{}
	var nodesMu sync.Mutex
	start := func(id string) {
		nc, err := Connect(ctx, srv.URL(), Timeout(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		n, err := StartNode(ctx, nc, NodeConfig{Dir: filepath.Join(dir, id), Device: engine.CPU, Placement: true,
			ID: id, Memory: 1 << 30, Logf: func(f string, a ...any) { t.Logf(time.Now().Format("15:04:05.000 ")+id+": "+f, a...) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodesMu.Lock()
		nodes[id] = n
		conns[id] = nc
		nodesMu.Unlock()
	}
	// answered says whether some node answers shard s's searches now,
	// having applied every write made (the searches' token).
	tok := col.Token()
	answered := func(s int) bool {
		nodesMu.Lock()
		defer nodesMu.Unlock()
		for _, n := range nodes {
			n.mu.Lock()
			reps := n.replicas["pl"]
			ok := s < len(reps) && reps[s] != nil && reps[s].answering() && reps[s].applied.Load() >= tok[s]
			n.mu.Unlock()
			if ok {
				return true
			}
		}
		return false
	}
	pkv, err := c.js.KeyValue(ctx, bucketPlacement)
	// settled waits until every shard is served by R of live and by
	// nothing else, with no move pending, and each node holds exactly
	// what it serves.
	settled := func(what string, live ...string) assignment {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		var last string
		for time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			if pkv == nil {
				if pkv, err = c.js.KeyValue(ctx, bucketPlacement); err != nil {
					continue
				}
			}
			e, err := pkv.Get(ctx, assignKey("pl"))
			if err != nil {
				continue
			}
			last = string(e.Value())
			var a assignment
			if json.Unmarshal(e.Value(), &a) != nil || len(a.Shards) != shards {
				continue
			}
			ok := true
			for _, id := range live {
				ok = ok && slices.ContainsFunc(a.Shards, func(sp shardPlacement) bool { return slices.Contains(sp.Serving, id) })
			}
			for s, sp := range a.Shards {
				ok = ok && len(sp.Adding) == 0 && len(sp.Serving) == R
				for _, id := range sp.Serving {
					ok = ok && slices.Contains(live, id)
				}
				for id, n := range nodes {
					_, holds := n.Applied("pl", s)
					ok = ok && holds == slices.Contains(sp.Serving, id)
				}
			}
			if ok {
				return a
			}
		}
		t.Fatalf("%s: placement did not settle on %v in 10 s; last record %s", what, live, last)
		return assignment{}
	}
	start("a")
	start("b")
	settled("two nodes", "a", "b")
	// Searchers run through the moves; each answer must be exact.
	var searches atomic.Int64
	var mu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				q := i % len(queries)
				got, err := col.Search(ctx, queries[q], 10)
				if err == nil && !slices.Equal(got, want[q]) {
					err = fmt.Errorf("query %d: %v, want %v", q, got, want[q])
				}
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
				}
				searches.Add(1)
			}
		})
	}
	// Make-before-break, watched directly: from here on every shard has
	// a node answering it at every moment (a gap would only delay the
	// searches above, which ask again until their deadline).
	var gaps []string
	var watching atomic.Bool
	watching.Store(true)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			for s := range shards {
				if watching.Load() && !answered(s) {
					mu.Lock()
					gaps = append(gaps, fmt.Sprintf("shard %d at %v", s, time.Now().Format("15:04:05.000")))
					mu.Unlock()
				}
			}
		}
	})
	waitSearches := func(what string) {
		t.Helper()
		from := searches.Load()
		for deadline := time.Now().Add(10 * time.Second); searches.Load() < from+20; {
			if time.Now().After(deadline) {
				t.Fatalf("%s: searches stalled", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitSearches("before the join")
	// c applies slowly (20 ms a message, 20 messages a shard), so a
	// replica taken from a or b before c caught up would leave its shard
	// behind the searches' token.
	slow := func(n *Node) {
		nodesMu.Lock()
		isC := nodes["c"] == n
		nodesMu.Unlock()
		if isC {
			time.Sleep(20 * time.Millisecond)
		}
	}
	testHooks.apply.Store(&slow)
	defer testHooks.apply.Store(nil)
	start("c")
	a := settled("c joined", "a", "b", "c")
	held := map[string]int{}
	for _, sp := range a.Shards {
		for _, id := range sp.Serving {
			held[id]++
		}
	}
	if lo := shards * R / 3; held["c"] < lo || held["a"] < lo || held["b"] < lo {
		t.Fatalf("after c joined, replicas per node %v: not balanced (%d over 3 equal nodes)", held, shards*R)
	}
	waitSearches("after the join")
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err = nodes["a"].Leave(lctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitSearches("after a left")
	nodesMu.Lock()
	leaver := nodes["a"]
	delete(nodes, "a")
	nodesMu.Unlock()
	leaver.Close()
	settled("a left", "b", "c")
	waitSearches("after a closed")
	// d joins, then c dies (its connection closed, nothing said): after
	// its record expires (TTL 1.5 s here) its shards go to b and d. Under
	// R = 2 each of them had another replica all along; under R = 1 they
	// are unavailable until moved (searches wait, then answer exactly).
	start("d")
	settled("d joined", "b", "c", "d")
	waitSearches("after d joined")
	if R == 1 {
		watching.Store(false)
	}
	nodesMu.Lock()
	crashed := conns["c"]
	delete(nodes, "c")
	nodesMu.Unlock()
	crashed.Close()
	settled("c died", "b", "d")
	waitSearches("after c died")
	close(stop)
	wg.Wait()
	if len(gaps) > 0 {
		t.Fatalf("no replica answered (%d samples): %v", len(gaps), gaps[:min(5, len(gaps))])
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d searches during the moves were not exact: %v", len(failures), searches.Load(), failures[:min(5, len(failures))])
	}
	t.Logf("%d searches during the moves, all exact", searches.Load())
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
	dir, _, c := serverAndClient(t, Timeout(20*time.Second))
	ctx := context.Background()
	col, err := c.Create(ctx, "lone", CollectionConfig{Dim: 3, Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	n, err := StartNode(ctx, c, NodeConfig{Dir: dir, Device: engine.CPU, Placement: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.ID() == "" {
		t.Fatal("a placement node has no ID")
	}
	ids, err := col.Add(ctx, engine.Vectors([][]float32{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 0}}))
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
	if testing.Short() {
		t.Skip("cluster tests start a NATS server (skipped under -short)")
	}
	oldTick, oldLease, oldTTL := placementTick, leaseTTL, nodeTTL
	placementTick, leaseTTL, nodeTTL = 100*time.Millisecond, 600*time.Millisecond, 1500*time.Millisecond
	t.Cleanup(func() { placementTick, leaseTTL, nodeTTL = oldTick, oldLease, oldTTL })
	dir, srv, c := serverAndClient(t, Timeout(20*time.Second))
	ctx := context.Background()
	if _, err := c.Create(ctx, "mc", CollectionConfig{Dim: 4, Shards: 6, NodeReplicas: 1}); err != nil {
		t.Fatal(err)
	}
	var pkv jetstream.KeyValue
	controller := func() string {
		var err error
		if pkv == nil {
			if pkv, err = c.js.KeyValue(ctx, bucketPlacement); err != nil {
				return ""
			}
		}
		e, err := pkv.Get(ctx, keyController)
		if err != nil {
			return ""
		}
		return string(e.Value())
	}
	nodes := map[string]*Node{}
	for _, id := range []string{"a", "b", "c"} {
		nc, err := Connect(ctx, srv.URL(), Timeout(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		n, err := StartNode(ctx, nc, NodeConfig{Dir: filepath.Join(dir, id), Device: engine.CPU, Placement: true,
			ID: id, Memory: 1 << 30, Logf: func(f string, a ...any) { t.Logf(time.Now().Format("15:04:05.000 ")+id+": "+f, a...) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes[id] = n
		// a starts first and so holds the controller key.
		if id == "a" {
			waitFor(t, "a to control", func() bool { return controller() == "a" })
		}
	}
	read := func() (assignment, bool) {
		e, err := pkv.Get(ctx, assignKey("mc"))
		if err != nil {
			return assignment{}, false
		}
		var a assignment
		return a, json.Unmarshal(e.Value(), &a) == nil
	}
	serves := func(a assignment, id string) int {
		k := 0
		for _, sp := range a.Shards {
			if slices.Contains(sp.Serving, id) {
				k++
			}
		}
		return k
	}
	waitFor(t, "a to hand its shards over", func() bool {
		a, ok := read()
		return ok && serves(a, "b") > 0 && serves(a, "c") > 0
	})
	// From here on every listing misses c; a, which saw c, leaves and
	// closes, and b or c takes the controller over.
	hide := func(id string) bool { return id == "c" }
	testHooks.listNodes.Store(&hide)
	defer testHooks.listNodes.Store(nil)
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err := nodes["a"].Leave(lctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	nodes["a"].Close()
	waitFor(t, "b or c to take the controller over", func() bool { k := controller(); return k == "b" || k == "c" })
	// Ten rounds of the new controller: c serves throughout.
	for range 10 {
		time.Sleep(placementTick)
		a, ok := read()
		if !ok {
			t.Fatal("assignment unreadable")
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
