package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/umbravec/umbra/engine"
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
	col, err := h.c.Create(ctx, "s", CollectionConfig{Dim: dim, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	ref := newMirror(t, dim, engine.Cosine)
	r := testkit.Rand(t)
	write := func() {
		vs := make([][]float32, 30)
		for j := range vs {
			vs[j] = testkit.Grid(r, dim)
			vs[j][0] += 1.0 / 64
		}
		ids, err := col.Add(ctx, engine.Vectors(vs))
		if err != nil {
			t.Fatal(err)
		}
		ref.ix.Add(ctx, engine.Vectors(vs), engine.WithIDs(ids...))
	}
	for range 20 {
		write()
	}
	for s := range 2 {
		seq, err := h.node.Snapshot(ctx, "s", s)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := h.c.js.Stream(ctx, streamName("s", s))
		info, _ := st.Info(ctx)
		if info.State.FirstSeq != seq+1 {
			t.Fatalf("shard %d: snapshot at %d, stream starts at %d", s, seq, info.State.FirstSeq)
		}
	}
	for range 5 {
		write() // the tail past the snapshots
	}
	// The first node leaves; a new one with an empty directory must
	// recover from the snapshots, since the stream no longer starts at 1.
	h.node.Close()
	n2, err := StartNode(ctx, h.c, NodeConfig{Dir: t.TempDir(), Device: engine.CPU, Logf: t.Logf})
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
