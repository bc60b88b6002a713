package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
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

// harness is one embedded NATS server, a client and a node, all under a
// test's temporary directory.
type harness struct {
	t    *testing.T
	dir  string
	srv  *node.Embedded
	c    *Client
	node *node.Node
}

func newHarness(t *testing.T, serve func(string, int) bool) *harness {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster tests start a NATS server (skipped under -short)")
	}
	h := &harness{t: t}
	h.dir, h.srv, h.c = serverAndClient(t, Timeout(20*time.Second))
	ctx := context.Background()
	var err error
	h.node, err = node.Start(ctx, h.c.x, node.Config{Dir: h.dir, Device: engine.CPU, Serve: serve, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.node.Close() })
	return h
}

// serverAndClient starts an embedded NATS server in a test's temporary
// directory and connects a client to it with the node's credentials (it
// may run a node), both closed when the test ends.
func serverAndClient(t *testing.T, opts ...ClientOption) (dir string, srv *node.Embedded, c *Client) {
	t.Helper()
	dir = t.TempDir()
	srv, err := node.StartEmbedded(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if c, err = Connect(context.Background(), srv.URL(), append([]ClientOption{Credentials(srv.NodeCreds()), AsNode()}, opts...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	noDenials(t, c) // the node role has every right a node and a test need
	return dir, srv, c
}

// mirror applies the same writes to a local engine index: the reference
// every cluster answer must equal exactly (the engine's own tests check it
// against float64 brute force, ties by lower ID included).
type mirror struct {
	ix *engine.Index
}

func newMirror(t *testing.T, dim int, metric umbra.Metric) *mirror {
	ix, err := engine.New(context.Background(), engine.Config{Dim: dim, Metric: metric, Device: engine.CPU})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return &mirror{ix: ix}
}

func sameHits(t *testing.T, what string, want, got []umbra.Hit) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d hits, want %d\n got %v\nwant %v", what, len(got), len(want), got, want)
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: hit %d is %+v, want %+v\n got %v\nwant %v", what, i, got[i], want[i], got, want)
		}
	}
}

func TestClusterMatchesReference(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 3, 7} {
		for _, metric := range []umbra.Metric{umbra.Cosine, umbra.L2} {
			t.Run(fmt.Sprintf("S%d/%v", shards, metric), func(t *testing.T) {
				h := newHarness(t, nil)
				r := testkit.Rand(t)
				ctx := context.Background()
				const dim = 6
				col, err := h.c.Create(ctx, "c", CollectionConfig{Dim: dim, Metric: metric, Shards: shards})
				if err != nil {
					t.Fatal(err)
				}
				ref := newMirror(t, dim, metric)
				grid := func(n int) [][]float32 {
					vs := make([][]float32, n)
					for i := range vs {
						if i > 0 && r.IntN(4) == 0 {
							vs[i] = slices.Clone(vs[r.IntN(i)]) // an exact tie
						} else {
							vs[i] = testkit.Grid(r, dim)
							vs[i][0] += 1.0 / 64 // never the zero vector
						}
					}
					return vs
				}
				// Assigned IDs.
				vs := grid(300)
				ids, err := col.Add(ctx, umbra.Vectors(vs))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ref.ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...)); err != nil {
					t.Fatal(err)
				}
				// The caller's IDs, past the assigned ones.
				vs = grid(100)
				mine := make([]uint64, len(vs))
				for i := range mine {
					mine[i] = 1000 + uint64(i)*7
				}
				if _, err := col.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(mine...)); err != nil {
					t.Fatal(err)
				}
				ref.ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(mine...))
				// Keys: added, then upserted (half stored, half new).
				vs = grid(80)
				keys := make([]string, len(vs))
				for i := range keys {
					keys[i] = fmt.Sprintf("doc/%d", i)
				}
				kids, err := col.Add(ctx, umbra.Vectors(vs), umbra.WithKeys(keys...))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ref.ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(kids...), umbra.WithKeys(keys...)); err != nil {
					t.Fatal(err)
				}
				vs = grid(80)
				ukeys := make([]string, len(vs))
				for i := range ukeys {
					ukeys[i] = fmt.Sprintf("doc/%d", 40+i)
				}
				uids, err := col.Upsert(ctx, umbra.Vectors(vs), umbra.WithKeys(ukeys...))
				if err != nil {
					t.Fatal(err)
				}
				for i := range 40 {
					if uids[i] != kids[40+i] {
						t.Fatalf("upsert of stored key %s gave ID %d, its Add gave %d", ukeys[i], uids[i], kids[40+i])
					}
				}
				var newIDs []uint64
				var newRows, oldRows [][]float32
				var newKeys []string
				for i := range ukeys {
					if i < 40 {
						oldRows = append(oldRows, vs[i])
					} else {
						newIDs, newRows, newKeys = append(newIDs, uids[i]), append(newRows, vs[i]), append(newKeys, ukeys[i])
					}
				}
				ref.ix.Upsert(ctx, umbra.Vectors(oldRows), umbra.WithIDs(uids[:40]...))
				ref.ix.Add(ctx, umbra.Vectors(newRows), umbra.WithIDs(newIDs...), umbra.WithKeys(newKeys...))
				// Upserts by ID (stored and new) and deletes by ID and key.
				vs = grid(30)
				up := append(slices.Clone(ids[:20]), 5000, 5001, 5002, 5003, 5004, 5005, 5006, 5007, 5008, 5009)
				if _, err := col.Upsert(ctx, umbra.Vectors(vs), umbra.WithIDs(up...)); err != nil {
					t.Fatal(err)
				}
				ref.ix.Upsert(ctx, umbra.Vectors(vs), umbra.WithIDs(up...))
				if err := col.Delete(ctx, umbra.WithIDs(ids[50:90]...)); err != nil {
					t.Fatal(err)
				}
				ref.ix.Delete(ctx, umbra.WithIDs(ids[50:90]...))
				if err := col.Delete(ctx, umbra.WithKeys("doc/1", "doc/2", "doc/100")); err != nil {
					t.Fatal(err)
				}
				ref.ix.Delete(ctx, umbra.WithKeys("doc/1", "doc/2", "doc/100"))
				// Lookup: every key's ID, as the reference's; deleted and
				// unknown keys absent; a key no write could store refused.
				var asked []string
				for i := range 130 {
					asked = append(asked, fmt.Sprintf("doc/%d", i))
				}
				held, err := col.Lookup(ctx, append(asked, "nobody")...)
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]uint64{}
				for _, k := range asked {
					if id, ok := ref.ix.Lookup(k); ok {
						want[k] = id
					}
				}
				if len(want) != 117 || !maps.Equal(held, want) {
					t.Fatalf("Lookup: %d keys %v, want %d %v", len(held), held, len(want), want)
				}
				if _, err := col.Lookup(ctx, "doc/3", "two\nlines"); !errors.Is(err, umbra.ErrInvalidKey) {
					t.Fatalf("Lookup of a key with a line break: %v, want ErrInvalidKey", err)
				}
				// The shards' rows add up to the reference's.
				rows, err := col.ShardRows(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if sum := func() (n int) {
					for _, r := range rows {
						n += r
					}
					return n
				}(); len(rows) != shards || sum != ref.ix.Len() {
					t.Fatalf("ShardRows %v (sum %d), want %d shards summing to %d", rows, sum, shards, ref.ix.Len())
				}
				// Apply-time refusals come back as the engine's errors.
				if _, err := col.Add(ctx, umbra.Vectors(grid(1)), umbra.WithIDs(mine[3])); !errors.Is(err, umbra.ErrIDExists) {
					t.Fatalf("Add of a stored ID: %v, want ErrIDExists", err)
				}
				if err := col.Delete(ctx, umbra.WithIDs(ids[50])); !errors.Is(err, umbra.ErrNotFound) {
					t.Fatalf("Delete of a deleted ID: %v, want ErrNotFound", err)
				}
				if _, err := col.Add(ctx, umbra.Vectors(grid(1)), umbra.WithIDs(protocol.ReservedIDs+3)); !errors.Is(err, ErrReservedID) {
					t.Fatalf("Add of a reserved ID: %v", err)
				}

				queries := grid(12)
				queries = append(queries, slices.Clone(vs[0])) // a query equal to stored rows: ties at the top
				for _, k := range []int{1, 10, 1000} {
					got, err := col.SearchBatch(ctx, queries, k)
					if err != nil {
						t.Fatal(err)
					}
					for i, q := range queries {
						want, _ := ref.ix.Search(ctx, q, k)
						sameHits(t, fmt.Sprintf("k=%d query %d", k, i), want, got[i])
					}
				}
				allow := append(slices.Clone(ids[:100:100]), mine[:10]...)
				allow = append(allow, kids[:10]...)
				for i, q := range queries[:4] {
					got, err := col.Search(ctx, q, 15, umbra.Allow(allow...))
					if err != nil {
						t.Fatal(err)
					}
					want, _ := ref.ix.Search(ctx, q, 15, umbra.Allow(allow...))
					sameHits(t, fmt.Sprintf("allow query %d", i), want, got)
					thr := float32(0.5)
					if metric == umbra.L2 {
						thr = 0.6
					}
					got, err = col.SearchRange(ctx, q, thr)
					if err != nil {
						t.Fatal(err)
					}
					want, _ = ref.ix.SearchRange(ctx, q, thr)
					sameHits(t, fmt.Sprintf("range query %d", i), want, got)
					got, err = col.SearchRange(ctx, q, thr, umbra.MaxHits(5))
					if err != nil {
						t.Fatal(err)
					}
					want, _ = ref.ix.SearchRange(ctx, q, thr, umbra.MaxHits(5))
					sameHits(t, fmt.Sprintf("range (max 5) query %d", i), want, got)
				}
			})
		}
	}
}

// A message published twice under its ID (a client's retry after a lost
// acknowledgement) is stored and applied once.
func TestClusterRetriedWriteAppliesOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	col, err := h.c.Create(ctx, "r", CollectionConfig{Dim: 3, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	m := &protocol.WriteMsg{Op: protocol.OpAdd, Dim: 3, IDs: []uint64{9}, Rows: []float32{1, 2, 3}}
	var seqs []uint64
	for range 2 {
		seq, err := col.publish(ctx, 0, "call-1.0.0", m.Encode())
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	if seqs[0] != seqs[1] {
		t.Fatalf("the retry was stored again: sequences %v", seqs)
	}
	// A later write must see exactly one row 9 and no refusal for the
	// duplicate (had it been applied twice, the second Add would have been
	// refused and recorded).
	if _, err := col.Add(ctx, umbra.Vectors([][]float32{{3, 2, 1}}), umbra.WithIDs(10)); err != nil {
		t.Fatal(err)
	}
	st, _ := h.c.x.JS.Stream(ctx, protocol.StreamName("r", 0))
	info, _ := st.Info(ctx)
	if info.State.Msgs != 2 {
		t.Fatalf("stream holds %d messages, want 2", info.State.Msgs)
	}
	hits, err := col.Search(ctx, []float32{1, 2, 3}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 || hits[0].ID != 9 || hits[1].ID != 10 {
		t.Fatalf("hits %v, want IDs 9 then 10", hits)
	}
}

// With no replica of some shards, a search fails naming exactly those
// shards, and returns nothing.
func TestClusterMissingShardFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(_ string, s int) bool { return s != 1 && s != 3 })
	ctx := context.Background()
	col, err := h.c.Create(ctx, "m", CollectionConfig{Dim: 4, Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	hits, err := col.Search(tctx, []float32{1, 0, 0, 0}, 5)
	var se *shardsError
	if !errors.As(err, &se) || !errors.Is(err, ErrShardsUnavailable) || hits != nil {
		t.Fatalf("search: %v, %v; want ErrShardsUnavailable", hits, err)
	}
	if !slices.Equal(se.Shards, []int{1, 3}) {
		t.Fatalf("error names shards %v, want [1 3]: %v", se.Shards, err)
	}
	t.Log(err)
}

// A replica behind the caller's token does not answer: with the node's
// follower unable to see new writes in time, the search fails rather than
// miss them.
func TestClusterReadYourWrites(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	col, err := h.c.Create(ctx, "w", CollectionConfig{Dim: 2, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := testkit.Rand(t)
	for i := range 20 {
		v := []float32{float32(r.NormFloat64()), float32(r.NormFloat64())}
		id := uint64(i)
		if _, err := col.Add(ctx, umbra.Vectors([][]float32{v}), umbra.WithIDs(id), umbra.NoWait()); err != nil {
			t.Fatal(err)
		}
		// Without waiting for the apply, the next search still sees it.
		hits, err := col.Search(ctx, v, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 1 || hits[0].ID != id && hits[0].Score < 0.99999 {
			t.Fatalf("after writing %d: %v", id, hits)
		}
	}
	_ = rand.IntN
	_ = nats.Connect
	_ = jetstream.New
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
