package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
)

// Assigned IDs come from blocks each handle reserves: unique across
// handles, consecutive within a call, increasing along a handle's calls,
// past every ID a caller named in an earlier call (also one inside
// another handle's block), and the counter moves once a block.
func TestClusterAssignedIDBlocks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	r := testkit.Rand(t)
	const dim, block = 4, 64
	c2, err := Connect(ctx, h.srv.URL(), Credentials(h.srv.ClientCreds()), Timeout(20*time.Second), IDBlock(block))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c3, err := Connect(ctx, h.srv.URL(), Credentials(h.srv.ClientCreds()), Timeout(20*time.Second), IDBlock(block))
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	a, err := c2.Create(ctx, "ids", CollectionConfig{Dim: dim, Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c3.Open(ctx, "ids")
	if err != nil {
		t.Fatal(err)
	}
	rows := func(n int) umbra.RowSource {
		vs := make([][]float32, n)
		for i := range vs {
			vs[i] = testkit.Grid(r, dim)
			vs[i][0] += 1.0 / 64
		}
		return umbra.Vectors(vs)
	}
	consecutive := func(what string, ids []uint64, n int) {
		t.Helper()
		if len(ids) != n {
			t.Fatalf("%s: %d IDs for %d rows", what, len(ids), n)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] != ids[i-1]+1 {
				t.Fatalf("%s: IDs %v are not consecutive", what, ids)
			}
		}
	}
	var all []uint64
	a1, err := a.Add(ctx, rows(5))
	if err != nil {
		t.Fatal(err)
	}
	consecutive("a's first call", a1, 5)
	b1, err := b.Add(ctx, rows(3))
	if err != nil {
		t.Fatal(err)
	}
	consecutive("b's first call", b1, 3)
	if b1[0] < a1[0]+block {
		t.Fatalf("b's IDs %v inside a's block from %d", b1, a1[0])
	}
	// A call larger than what is left of the block: a new block, the
	// call's IDs still consecutive and past the handle's earlier ones.
	a2, err := a.Add(ctx, rows(block+6))
	if err != nil {
		t.Fatal(err)
	}
	consecutive("a's call over its block", a2, block+6)
	if a2[0] <= a1[4] || (a2[0] >= b1[0] && a2[0] < b1[0]+block) {
		t.Fatalf("a's IDs %v: not past its own %v or inside b's block from %d", a2, a1, b1[0])
	}
	// b names an ID inside a's current block (a has handed out none of
	// it yet past a2): a's next IDs pass it, and nothing is refused.
	a3, err := a.Add(ctx, rows(1))
	if err != nil {
		t.Fatal(err)
	}
	named := a3[0] + 5
	if _, err := b.Add(ctx, rows(1), umbra.WithIDs(named)); err != nil {
		t.Fatal(err)
	}
	a4, err := a.Add(ctx, rows(4))
	if err != nil {
		t.Fatalf("assigned IDs after a caller's ID inside the block: %v", err)
	}
	consecutive("a's call after b named an ID", a4, 4)
	if a4[0] <= named {
		t.Fatalf("a assigned %v, not past the caller's ID %d named before", a4, named)
	}
	all = slices.Concat(a1, b1, a2, a3, []uint64{named}, a4)
	// Concurrent writers on both handles, IDs assigned and by key.
	kv, err := c2.x.JS.Stream(ctx, "KV_"+protocol.BucketCounters)
	if err != nil {
		t.Fatal(err)
	}
	info, err := kv.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := info.State.LastSeq
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		col := []*Collection{a, b}[w%2]
		mine := make([]umbra.RowSource, 12)
		for i := range mine {
			mine[i] = rows(1 + (w+i)%3)
		}
		wg.Go(func() {
			for i := range 12 {
				n := 1 + (w+i)%3
				var ids []uint64
				var err error
				if i%4 == 3 {
					keys := make([]string, n)
					for j := range keys {
						keys[j] = fmt.Sprintf("w%d/%d/%d", w, i, j)
					}
					ids, err = col.Add(ctx, mine[i], umbra.WithKeys(keys...))
				} else {
					ids, err = col.Add(ctx, mine[i])
					if err == nil {
						for j := 1; j < len(ids); j++ {
							if ids[j] != ids[j-1]+1 {
								err = fmt.Errorf("writer %d: IDs %v not consecutive", w, ids)
							}
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				all = append(all, ids...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sorted := slices.Clone(all)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(all) {
		t.Fatalf("%d IDs assigned, %d distinct", len(all), len(slices.Compact(slices.Clone(sorted))))
	}
	// Every row is stored under its ID, once.
	hits, err := a.Search(ctx, testkit.Grid(r, dim), len(all)+10)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]uint64, len(hits))
	for i, hh := range hits {
		got[i] = hh.ID
	}
	slices.Sort(got)
	if !slices.Equal(got, sorted) {
		t.Fatalf("stored IDs %v, want %v", got, sorted)
	}
	// The counter moved once a block, not once a call: 96 calls of
	// about 300 IDs in all (keys take more than they keep) reserve a
	// dozen blocks of 64.
	if info, err = kv.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if moves := info.State.LastSeq - before; moves > 96/3 {
		t.Fatalf("the counters moved %d times in 96 calls with blocks of %d", moves, block)
	}
}
