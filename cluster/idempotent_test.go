package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
)

// errAckLost stands for an acknowledgement lost after the message was
// stored (a timeout, a deadline).
var errAckLost = errors.New("acknowledgement lost (test)")

// loseAcks makes every write fail after its messages for which lose says
// so were stored, until the test ends or it is called with nil.
func loseAcks(t *testing.T, lose func(shard, piece int) bool) {
	if lose == nil {
		writeHooks.published.Store(nil)
		return
	}
	h := func(shard, piece int) error {
		if lose(shard, piece) {
			return errAckLost
		}
		return nil
	}
	writeHooks.published.Store(&h)
	t.Cleanup(func() { writeHooks.published.Store(nil) })
}

// allIDs is every ID the collection holds, ascending.
func allIDs(t *testing.T, col *Collection, q []float32) []uint64 {
	t.Helper()
	hits, err := col.Search(context.Background(), q, 100000)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	slices.Sort(ids)
	return ids
}

// A write whose acknowledgement is lost, called again with the same
// idempotency key, is stored once and reports the first call's outcome:
// the IDs it assigned, or its keys got, as stored. Without a key the same
// retry stores assigned-ID rows twice (what docs/cluster.md says it may).
func TestClusterIdempotentRetry(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	const dim = 4
	r := testkit.Rand(t)
	rows := func(n int) [][]float32 {
		vs := make([][]float32, n)
		for i := range vs {
			vs[i] = testkit.Grid(r, dim)
			vs[i][0] += 1.0 / 64
		}
		return vs
	}
	q := []float32{1, 0, 0, 0}
	lost := func(int, int) bool { return true }

	t.Run("assigned IDs", func(t *testing.T) {
		col, err := h.c.Create(ctx, "ia", CollectionConfig{Dim: dim, Shards: 3})
		if err != nil {
			t.Fatal(err)
		}
		vs := rows(30)
		loseAcks(t, lost)
		if _, err := col.Add(ctx, umbra.Vectors(vs), umbra.IdempotencyKey("add-1")); !errors.Is(err, errAckLost) {
			t.Fatalf("first call: %v, want the acknowledgement lost", err)
		}
		loseAcks(t, nil)
		stored := streamMsgs(t, h, col.meta.Name, col.meta.Shards)
		ids, err := col.Add(ctx, umbra.Vectors(vs), umbra.IdempotencyKey("add-1"))
		if err != nil {
			t.Fatal(err)
		}
		if n := streamMsgs(t, h, col.meta.Name, col.meta.Shards); n != stored {
			t.Fatalf("the retry stored %d messages more", n-stored)
		}
		if held := allIDs(t, col, q); !slices.Equal(held, ids) || len(held) != 30 {
			t.Fatalf("the collection holds IDs %v; the retry says %v", held, ids)
		}
		again, err := col.Add(ctx, umbra.Vectors(vs), umbra.IdempotencyKey("add-1"), umbra.NoWait())
		if err != nil || !slices.Equal(again, ids) {
			t.Fatalf("a third call (NoWait): %v, %v; want %v", again, err, ids)
		}
		// Without a key, the same retry stores the rows again, under
		// new IDs.
		loseAcks(t, lost)
		if _, err := col.Add(ctx, umbra.Vectors(vs[:5])); !errors.Is(err, errAckLost) {
			t.Fatal(err)
		}
		loseAcks(t, nil)
		if _, err := col.Add(ctx, umbra.Vectors(vs[:5])); err != nil {
			t.Fatal(err)
		}
		if held := allIDs(t, col, q); len(held) != 40 {
			t.Fatalf("without a key: %d rows, want the 5 stored twice (40)", len(held))
		}
		// The key with other rows, or for a delete, is refused before
		// anything is published.
		stored = streamMsgs(t, h, col.meta.Name, col.meta.Shards)
		if _, err := col.Add(ctx, umbra.Vectors(vs[1:]), umbra.IdempotencyKey("add-1")); !errors.Is(err, ErrIdempotencyConflict) {
			t.Fatalf("the key with other rows: %v", err)
		}
		if err := col.Delete(ctx, umbra.WithIDs(ids[0]), umbra.IdempotencyKey("add-1")); !errors.Is(err, ErrIdempotencyConflict) {
			t.Fatalf("the key for a delete: %v", err)
		} else {
			t.Log(err)
		}
		if n := streamMsgs(t, h, col.meta.Name, col.meta.Shards); n != stored {
			t.Fatalf("a refused call stored %d messages", n-stored)
		}
		for _, bad := range []string{"", "a b", "ü", "a.b", strings.Repeat("k", 129)} {
			if _, err := col.Add(ctx, umbra.Vectors(vs[:1]), umbra.IdempotencyKey(bad)); !errors.Is(err, umbra.ErrInvalidOption) {
				t.Fatalf("key %q: %v", bad, err)
			}
		}
	})

	t.Run("partly published", func(t *testing.T) {
		// Rows with 1 MiB payloads: several messages to the shard, and
		// the first call loses its acknowledgement after the first.
		col, err := h.c.Create(ctx, "ip", CollectionConfig{Dim: dim, Shards: 1})
		if err != nil {
			t.Fatal(err)
		}
		vs := rows(12)
		pays := make([][]byte, len(vs))
		for i := range pays {
			pays[i] = []byte(strings.Repeat(fmt.Sprint(i%10), 1<<20-64))
		}
		loseAcks(t, func(_, piece int) bool { return piece == 0 })
		if _, err := col.Add(ctx, umbra.Vectors(vs), umbra.WithPayloads(pays...), umbra.IdempotencyKey("big")); !errors.Is(err, errAckLost) {
			t.Fatalf("first call: %v", err)
		}
		loseAcks(t, nil)
		if n := streamMsgs(t, h, col.meta.Name, col.meta.Shards); n != 1 {
			t.Fatalf("%d messages stored by the first call, want 1 of several", n)
		}
		ids, err := col.Add(ctx, umbra.Vectors(vs), umbra.WithPayloads(pays...), umbra.IdempotencyKey("big"))
		if err != nil {
			t.Fatal(err)
		}
		if n := streamMsgs(t, h, col.meta.Name, col.meta.Shards); n < 2 {
			t.Fatalf("%d messages after the retry", n)
		}
		if held := allIDs(t, col, q); !slices.Equal(held, ids) || len(held) != 12 || ids[11] != ids[0]+11 {
			t.Fatalf("the collection holds IDs %v; the retry says %v", held, ids)
		}
	})

	t.Run("keys, upserts and deletes", func(t *testing.T) {
		col, err := h.c.Create(ctx, "ik", CollectionConfig{Dim: dim, Shards: 3})
		if err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 20)
		for i := range keys {
			keys[i] = fmt.Sprintf("doc/%d", i)
		}
		vs := rows(20)
		loseAcks(t, lost)
		if _, err := col.Add(ctx, umbra.Vectors(vs), umbra.WithKeys(keys...), umbra.IdempotencyKey("keys-1")); !errors.Is(err, errAckLost) {
			t.Fatal(err)
		}
		loseAcks(t, nil)
		for _, opt := range [][]umbra.WriteOption{nil, {umbra.NoWait()}} {
			ids, err := col.Add(ctx, umbra.Vectors(vs), append(opt, umbra.WithKeys(keys...), umbra.IdempotencyKey("keys-1"))...)
			if err != nil {
				t.Fatal(err)
			}
			held, err := col.Lookup(ctx, keys...)
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				if held[k] != ids[i] {
					t.Fatalf("key %s holds ID %d; the retry (%v) says %d", k, held[k], opt, ids[i])
				}
			}
		}
		if held := allIDs(t, col, q); len(held) != 20 {
			t.Fatalf("%d rows, want 20", len(held))
		}
		// An upsert of 10 stored keys and 5 new ones, and a delete by
		// IDs: a retry reports the first call's outcome (without the key
		// the delete's retry would be refused: not found).
		ukeys := append(slices.Clone(keys[5:15]), "new/1", "new/2", "new/3", "new/4", "new/5")
		uvs := rows(len(ukeys))
		loseAcks(t, lost)
		if _, err := col.Upsert(ctx, umbra.Vectors(uvs), umbra.WithKeys(ukeys...), umbra.IdempotencyKey("up-1")); !errors.Is(err, errAckLost) {
			t.Fatal(err)
		}
		loseAcks(t, nil)
		uids, err := col.Upsert(ctx, umbra.Vectors(uvs), umbra.WithKeys(ukeys...), umbra.IdempotencyKey("up-1"))
		if err != nil {
			t.Fatal(err)
		}
		held, err := col.Lookup(ctx, ukeys...)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range ukeys {
			if held[k] != uids[i] {
				t.Fatalf("key %s holds ID %d; the upsert's retry says %d", k, held[k], uids[i])
			}
		}
		if n := len(allIDs(t, col, q)); n != 25 {
			t.Fatalf("%d rows after the upsert, want 25", n)
		}
		loseAcks(t, lost)
		if err := col.Delete(ctx, umbra.WithIDs(uids[:3]...), umbra.IdempotencyKey("del-1")); !errors.Is(err, errAckLost) {
			t.Fatal(err)
		}
		loseAcks(t, nil)
		if err := col.Delete(ctx, umbra.WithIDs(uids[:3]...), umbra.IdempotencyKey("del-1")); err != nil {
			t.Fatalf("the delete's retry: %v", err)
		}
		if err := col.Delete(ctx, umbra.WithIDs(uids[:3]...)); !errors.Is(err, umbra.ErrNotFound) {
			t.Fatalf("the delete again without its key: %v, want not found", err)
		}
		if n := len(allIDs(t, col, q)); n != 22 {
			t.Fatalf("%d rows after the delete, want 22", n)
		}
	})

	t.Run("dedup window", func(t *testing.T) {
		if _, err := h.c.Create(ctx, "iw", CollectionConfig{Dim: dim, DedupWindow: 2 * time.Hour}); !errors.Is(err, umbra.ErrInvalidConfig) {
			t.Fatalf("a window of 2 h: %v", err)
		}
		col, err := h.c.Create(ctx, "iw", CollectionConfig{Dim: dim})
		if err != nil {
			t.Fatal(err)
		}
		st, err := h.c.x.JS.Stream(ctx, protocol.StreamName(col.meta.Name, 0))
		if err != nil {
			t.Fatal(err)
		}
		if w := st.CachedInfo().Config.Duplicates; w != protocol.DefaultDedupWindow || col.meta.Window() != protocol.DefaultDedupWindow {
			t.Fatalf("duplicate window %v, recorded %v; want %v", w, col.meta.Window(), protocol.DefaultDedupWindow)
		}
	})
}
