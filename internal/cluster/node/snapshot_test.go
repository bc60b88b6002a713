package node

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/cluster"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
)

// A node that joins after the stream was trimmed below a snapshot starts
// from the snapshot, then the tail, and answers exactly.
func TestClusterReplicaRecoversFromSnapshot(t *testing.T) {
	// Small parts: the snapshots go up and come down in several objects.
	defer func(p int64) { snapshotPart = p }(snapshotPart)
	snapshotPart = 4 << 10
	h := newHarness(t, nil)
	ctx := context.Background()
	const dim = 5
	col, err := h.c.Create(ctx, "s", cluster.CollectionConfig{Dim: dim, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	ref := newMirror(t, dim, umbra.Cosine)
	r := testkit.Rand(t)
	write := func() {
		vs := make([][]float32, 30)
		for j := range vs {
			vs[j] = testkit.Grid(r, dim)
			vs[j][0] += 1.0 / 64
		}
		ids, err := col.Add(ctx, umbra.Vectors(vs))
		if err != nil {
			t.Fatal(err)
		}
		ref.ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...))
	}
	// Two snapshots of each shard: the first trims nothing, the second
	// trims the stream below the first.
	first := make([]uint64, 2)
	for round := range 2 {
		for range 10 {
			write()
		}
		for s := range 2 {
			seq, err := h.node.Snapshot(ctx, "s", s)
			if err != nil {
				t.Fatal(err)
			}
			st, _ := h.x.JS.Stream(ctx, protocol.StreamName("s", s))
			info, _ := st.Info(ctx)
			want := uint64(1)
			if round == 0 {
				first[s] = seq
			} else {
				want = first[s] + 1
			}
			if info.State.FirstSeq != want {
				t.Fatalf("shard %d: snapshot %d at %d, stream starts at %d, want %d", s, round+1, seq, info.State.FirstSeq, want)
			}
		}
	}
	for range 5 {
		write() // the tail past the snapshots
	}
	// The first node leaves; a new one with an empty directory recovers
	// from the newest snapshots (the stream no longer starts at 1, and a
	// replica with nothing applied starts from a snapshot anyway).
	h.node.Close()
	n2, err := Start(ctx, connOf(t, h.c), Config{Dir: t.TempDir(), Device: engine.CPU, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	qs := make([][]float32, 8)
	for i := range qs {
		qs[i] = testkit.Grid(r, dim)
		qs[i][2] += 1.0 / 64
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := col.SearchBatch(sctx, qs, 40)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range qs {
		want, _ := ref.ix.Search(ctx, q, 40)
		sameHits(t, fmt.Sprintf("query %d", i), want, got[i])
	}
}

// Two nodes hold every shard and snapshot every 4 messages: each round is
// saved and uploaded once, by one of them (the claim), the manifest ends
// at the newest round with the one before it kept, the Object Store holds
// those two snapshots' objects alone, and the stream starts after the
// older.
func TestClusterOneSnapshotARound(t *testing.T) {
	defer func(p int64) { snapshotPart = p }(snapshotPart)
	snapshotPart = 4 << 10
	var mu sync.Mutex
	uploaded := map[[2]int]int{} // (shard, seq) → snapshots uploaded
	count := func(shard int, seq uint64) {
		mu.Lock()
		uploaded[[2]int{shard, int(seq)}]++
		mu.Unlock()
	}
	TestHooks.Snapshot.Store(&count)
	defer TestHooks.Snapshot.Store(nil)
	dir, _, c := serverAndClient(t, cluster.Timeout(20*time.Second))
	ctx := context.Background()
	const dim, shards, every, calls = 5, 2, 4, 20
	col, err := c.Create(ctx, "c", cluster.CollectionConfig{Dim: dim, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*Node
	for _, id := range []string{"x", "y"} {
		n, err := Start(ctx, connOf(t, c), Config{Dir: filepath.Join(dir, id), Device: engine.CPU, SnapshotEvery: every,
			Logf: func(f string, a ...any) { t.Logf(id+": "+f, a...) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
	}
	r := testkit.Rand(t)
	for range calls {
		// Rows with IDs 2i and 2i+1 … land on both shards: one message
		// each per call.
		vs := testkit.Vectors(r, 16, dim)
		if _, err := col.Add(ctx, umbra.Vectors(vs)); err != nil {
			t.Fatal(err)
		}
	}
	kv, obs, err := nodes[0].snapshotStores(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := make([]uint64, shards)
	for s := range shards {
		st, err := connOf(t, c).JS.Stream(ctx, protocol.StreamName("c", s))
		if err != nil {
			t.Fatal(err)
		}
		last[s] = st.CachedInfo().State.LastSeq
		if last[s] < 2*every {
			t.Fatalf("shard %d got %d messages; the test wants at least %d", s, last[s], 2*every)
		}
	}
	// Settled: both nodes applied everything, each shard's manifest is at
	// its newest round, and the objects left are that snapshot's.
	var why string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not settled in 30 s: %s", why)
		}
		why = ""
		for s := range shards {
			for i, n := range nodes {
				if got, _ := n.Applied("c", s); got != last[s] {
					why = fmt.Sprintf("node %d applied shard %d through %d of %d", i, s, got, last[s])
				}
			}
		}
		if why != "" {
			continue
		}
		var want []string
		for s := range shards {
			e, err := kv.Get(ctx, snapshotKey("c", s))
			var man snapshotManifest
			if err != nil || json.Unmarshal(e.Value(), &man) != nil {
				why = fmt.Sprintf("shard %d: no manifest (%v)", s, err)
				break
			}
			if round := last[s] / every * every; man.Seq != round || man.Prev == nil || man.Prev.Seq != round-every {
				why = fmt.Sprintf("shard %d: manifest %+v, newest round %d", s, man, round)
				break
			}
			want = append(append(want, man.objects()...), man.Prev.objects()...)
			st, err := connOf(t, c).JS.Stream(ctx, protocol.StreamName("c", s))
			if err != nil {
				t.Fatal(err)
			}
			if info, err := st.Info(ctx); err != nil || info.State.FirstSeq != man.Prev.Seq+1 {
				why = fmt.Sprintf("shard %d: stream info %v, %v; want it to start after %d", s, info, err, man.Prev.Seq)
				break
			}
		}
		if why != "" {
			continue
		}
		var have []string
		if list, err := obs.List(ctx); err == nil {
			for _, o := range list {
				have = append(have, o.Name)
			}
		}
		slices.Sort(want)
		slices.Sort(have)
		if !slices.Equal(want, have) {
			why = fmt.Sprintf("objects %v, want the manifests' %v", have, want)
			continue
		}
		break
	}
	mu.Lock()
	defer mu.Unlock()
	for k, n := range uploaded {
		if n != 1 {
			t.Errorf("shard %d at %d: %d snapshots uploaded, want one", k[0], k[1], n)
		}
	}
	if len(uploaded) == 0 {
		t.Fatal("no snapshot taken")
	}
}
