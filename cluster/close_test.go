package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/testkit"
)

// Nodes closed while searches keep arriving: no request goroutine may
// start once Close is waiting for the others (before the guard, a request
// whose callback was under way when Close unsubscribed started one after
// Close had returned, on closed stores: a WaitGroup misuse -race can
// report), and every search meanwhile is exact or an error, never short.
func TestClusterNodeClosedWhileSearching(t *testing.T) {
	// Requests to the node being closed are held in their callback for a
	// moment, so that some are under way while Close runs; a request
	// goroutine that starts after Close returned is a failure.
	var closing atomic.Pointer[node.Node]
	var closedDone atomic.Bool
	var late atomic.Int64
	hold := func(n *node.Node) {
		if closing.Load() == n {
			time.Sleep(20 * time.Millisecond)
		}
	}
	check := func(n *node.Node) {
		if closing.Load() == n && closedDone.Load() {
			late.Add(1)
		}
	}
	node.TestHooks.Request.Store(&hold)
	node.TestHooks.Serve.Store(&check)
	t.Cleanup(func() { node.TestHooks.Request.Store(nil); node.TestHooks.Serve.Store(nil) })
	h := newHarness(t, nil)
	ctx := context.Background()
	const dim, shards = 6, 3
	col, err := h.c.Create(ctx, "cl", CollectionConfig{Dim: dim, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	ref := newMirror(t, dim, umbra.Cosine)
	r := testkit.Rand(t)
	vs := make([][]float32, 400)
	for i := range vs {
		vs[i] = testkit.Grid(r, dim)
		vs[i][0] += 1.0 / 64
	}
	ids, err := col.Add(ctx, umbra.Vectors(vs))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ref.ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...)); err != nil {
		t.Fatal(err)
	}
	qs := make([][]float32, 8)
	want := make([][]umbra.Hit, len(qs))
	for i := range qs {
		qs[i] = testkit.Grid(r, dim)
		qs[i][1] += 1.0 / 64
		want[i], _ = ref.ix.Search(ctx, qs[i], 20)
	}
	// Searchers run through every round; each round starts a node, lets
	// it answer, and closes it mid-traffic. The harness's node stays, so
	// every search can be answered.
	var stop atomic.Bool
	var answered, failed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				q := (g + i) % len(qs)
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				got, err := col.Search(sctx, qs[q], 20)
				cancel()
				if err != nil {
					if !errors.Is(err, ErrShardsUnavailable) {
						errs <- fmt.Errorf("search: %v (not ErrShardsUnavailable)", err)
						return
					}
					failed.Add(1)
					continue
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
				answered.Add(1)
			}
		})
	}
	const rounds = 6
	served := 0
	for round := range rounds {
		n, err := node.Start(ctx, h.c.x, node.Config{Dir: t.TempDir(), Device: engine.CPU})
		if err != nil {
			t.Fatal(err)
		}
		// Close once this node has answered searches for a while (its
		// replicas caught up; the queue group sends it some).
		before := answered.Load()
		deadline := time.Now().Add(10 * time.Second)
		for answered.Load() < before+40 && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		for s := range shards {
			if a, _ := n.Applied("cl", s); a > 0 {
				served++
				break
			}
		}
		closedDone.Store(false)
		closing.Store(n)
		time.Sleep(5 * time.Millisecond) // requests now held in its callbacks
		if err := n.Close(); err != nil {
			t.Fatalf("round %d: closing the node: %v", round, err)
		}
		closedDone.Store(true)
		time.Sleep(40 * time.Millisecond) // past every held callback
		// Closing again is harmless.
		if err := n.Close(); err != nil {
			t.Fatalf("round %d: closing the node twice: %v", round, err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if l := late.Load(); l > 0 {
		t.Errorf("%d request goroutines started after their node's Close returned", l)
	}
	if served == 0 {
		t.Fatal("no closed node ever held an applied replica: the test closed idle nodes only")
	}
	if answered.Load() < rounds*40 {
		t.Fatalf("only %d searches answered", answered.Load())
	}
	t.Logf("%d searches answered, %d failed with ErrShardsUnavailable, over %d node closes", answered.Load(), failed.Load(), rounds)
}
