package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/collectiontest"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// TestCollectionAnswersAsTheReference: a collection of one and of several
// shards answers every read of umbra.Collection (Get by each kind of
// selection, merged by ID over the shards; Count; Search; SearchRange;
// Summary's rows and fields) as one engine index given the same writes.
func TestCollectionAnswersAsTheReference(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint("S", shards), func(t *testing.T) {
			h := newHarness(t, nil)
			const dim = 12
			col, err := h.c.Create(context.Background(), "same", CollectionConfig{Dim: dim, Shards: shards})
			require.NoError(t, err)
			collectiontest.Same(t, col, newMirror(t, dim, umbra.Cosine).ix, dim)
		})
	}
}

// TestCollectionGetPagesBoundedAnswers: a get whose rows do not fit the
// node's bytes in flight at once is answered in pieces the replica cuts
// short (and the client asks on from the last row), never refused and
// never short: every row comes back, in ID order, with its payload.
func TestCollectionGetPagesBoundedAnswers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster tests start a NATS server (skipped under -short)")
	}
	dir, _, c := serverAndClient(t, Timeout(30*time.Second))
	ctx := context.Background()
	// Bytes in flight for about eight of the rows below at a time.
	node, err := node.Start(ctx, c.x, node.Config{Dir: dir, Device: engine.CPU, Logf: t.Logf,
		Limits: protocol.Limits{MaxRequestBytes: 1 << 20, MaxInFlightBytes: 4 << 20}})
	require.NoError(t, err)
	t.Cleanup(func() { node.Close() })
	col, err := c.Create(ctx, "pages", CollectionConfig{Dim: 4, Shards: 2})
	require.NoError(t, err)
	r := testkit.Rand(t)
	const n = 40
	pays := make([][]byte, n)
	for i := range pays {
		pays[i] = make([]byte, 256<<10)
		pays[i][0] = byte(i)
	}
	for i := 0; i < n; i += 4 {
		_, err := col.Add(ctx, umbra.Vectors(testkit.Vectors(r, 4, 4)), umbra.WithPayloads(pays[i:i+4]...))
		require.NoError(t, err)
	}
	recs, err := col.Get(ctx, umbra.Selection{Payloads: true})
	require.NoError(t, err)
	require.Len(t, recs, n)
	for i, rec := range recs {
		assert.Equal(t, uint64(i), rec.ID, "ID order")
		require.Len(t, rec.Payload, 256<<10)
		assert.Equal(t, byte(i), rec.Payload[0])
	}
	got, err := col.Count(ctx, meta.Filter{})
	require.NoError(t, err)
	assert.Equal(t, n, got)
}
