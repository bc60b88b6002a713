// Package collectiontest checks that an umbra.Collection answers as
// another one does (in the manner of testing/fstest): the same writes go
// to both — rows named by keys and by IDs, with metadata and payloads,
// upserts and deletes — and then every read of the interface (Get with
// each kind of selection, Count, Search with Where and Allow, SearchRange,
// Summary's rows) must give the same answer. The reference is an
// engine.Index, itself checked against float64 brute force by the
// engine's own tests; a store and a cluster collection are checked
// against it.
package collectiontest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// Same writes the same random rows of dimension dim to got and want, both
// empty, and checks that every read answers the same on both.
func Same(t *testing.T, got, want umbra.Collection, dim int) {
	t.Helper()
	r := testkit.Rand(t)
	ctx := context.Background()
	both := func(what string, f func(c umbra.Collection) error) {
		t.Helper()
		require.NoError(t, f(want), "reference: %s", what)
		require.NoError(t, f(got), what)
	}
	row := func(i int, via string) meta.Fields {
		f := meta.Fields{"via": meta.KeywordOf(via), "n": meta.IntOf(int64(i % 7)), "user": meta.KeywordOf([]string{"alice", "bob", "carol"}[i%3])}
		if i%4 == 0 {
			f["tags"] = meta.TagsOf("work", fmt.Sprint("t", i%5))
		}
		return f
	}
	payload := func(i int) []byte {
		if i%3 == 0 {
			return nil
		}
		return fmt.Appendf(nil, `{"text": "row %d"}`, i)
	}
	// Rows under the caller's IDs (an implementation chooses the IDs of
	// new keys as it likes: the rows whose order and windows are compared
	// are named by ID), with metadata and payloads.
	const n = 100
	ids := make([]uint64, n)
	fields := make([]meta.Fields, n)
	pays := make([][]byte, n)
	for i := range ids {
		ids[i], fields[i], pays[i] = uint64(3*i+r.IntN(3)), row(i, "id"), payload(i)
	}
	idRows := testkit.Vectors(r, n, dim)
	both("add by IDs", func(c umbra.Collection) error {
		_, err := c.Add(ctx, umbra.Vectors(idRows), umbra.WithIDs(ids...), umbra.WithMeta(fields...), umbra.WithPayloads(pays...))
		return err
	})
	// Rows named by keys.
	const nk = 30
	keys := make([]string, nk)
	kfields := make([]meta.Fields, nk)
	kpays := make([][]byte, nk)
	for i := range keys {
		keys[i], kfields[i], kpays[i] = fmt.Sprintf("k/%03d", i), row(i, "key"), payload(i)
	}
	keyRows := testkit.Vectors(r, nk, dim)
	both("add by keys", func(c umbra.Collection) error {
		_, err := c.Add(ctx, umbra.Vectors(keyRows), umbra.WithKeys(keys...), umbra.WithMeta(kfields...), umbra.WithPayloads(kpays...))
		return err
	})
	// Upserts replace vectors (and keep metadata), deletes remove rows.
	upIDs, upKeys := testkit.Vectors(r, 10, dim), testkit.Vectors(r, 5, dim)
	both("upsert by IDs", func(c umbra.Collection) error {
		_, err := c.Upsert(ctx, umbra.Vectors(upIDs), umbra.WithIDs(ids[20:30]...))
		return err
	})
	both("upsert by keys", func(c umbra.Collection) error {
		_, err := c.Upsert(ctx, umbra.Vectors(upKeys), umbra.WithKeys(keys[:5]...))
		return err
	})
	both("delete IDs", func(c umbra.Collection) error { return c.Delete(ctx, umbra.WithIDs(ids[50:58]...)) })
	both("delete keys", func(c umbra.Collection) error { return c.Delete(ctx, umbra.WithKeys(keys[10:14]...)) })

	wants := []meta.Filter{
		{},
		meta.Eq("user", meta.KeywordOf("alice")),
		meta.And(meta.Gte("n", meta.IntOf(3)), meta.Contains("tags", "work")),
		meta.Or(meta.Eq("user", meta.KeywordOf("bob")), meta.Not(meta.Lt("n", meta.IntOf(2)))),
	}
	for i, f := range wants {
		wn, err := want.Count(ctx, f)
		require.NoError(t, err)
		gn, err := got.Count(ctx, f)
		require.NoError(t, err, "count %d", i)
		assert.Equal(t, wn, gn, "Count(%v)", f)
	}

	byID := meta.Eq("via", meta.KeywordOf("id"))
	named, err := want.Get(ctx, umbra.Selection{Where: byID})
	require.NoError(t, err)
	stored := make([]uint64, len(named))
	for i, rec := range named {
		stored[i] = rec.ID
	}
	mid := stored[len(stored)/2]
	sels := []umbra.Selection{
		{Where: byID, Vectors: true, Meta: true, Payloads: true},
		{Where: byID, Offset: 7, Limit: 20, Meta: true},
		{Where: byID, Offset: len(stored) - 3, Limit: 10},
		{Where: byID, Offset: len(stored) + 5},
		{Where: byID, From: mid, Limit: 5, Vectors: true},
		{Where: meta.And(byID, wants[1]), Payloads: true},
		{Where: meta.And(byID, wants[2]), Offset: 1, Limit: 3, Vectors: true, Meta: true},
		{IDs: []uint64{ids[2], ids[1], ids[0], ids[55], 999_999, stored[0], ids[2]}, Vectors: true, Meta: true, Payloads: true},
		{IDs: ids[10:40], Where: wants[3], Offset: 2, Limit: 4},
		{IDs: []uint64{}},
		{Keys: []string{keys[20], keys[3], "k/none", keys[12], keys[20]}, Vectors: true, Meta: true, Payloads: true},
		{Keys: keys, Where: wants[3], Meta: true},
		{Where: meta.Eq("via", meta.KeywordOf("key")), Payloads: true},
	}
	for i, sel := range sels {
		w, err := want.Get(ctx, sel)
		require.NoError(t, err, "reference: selection %d", i)
		g, err := got.Get(ctx, sel)
		require.NoError(t, err, "selection %d", i)
		assert.Equal(t, records(w), records(g), "selection %d: %+v", i, sel)
	}

	// Searches: the exact answer on both, filtered or not.
	q := testkit.Vector(r, dim)
	for i, opts := range [][]umbra.SearchOption{
		nil,
		{umbra.Where(wants[1]), umbra.WithPayload()},
		{umbra.Allow(stored[3], stored[9], ids[0], 12345)},
		{umbra.Where(meta.Eq("via", meta.KeywordOf("key")))},
		{umbra.Where(wants[2]), umbra.Allow(slices.Clone(stored[:40])...)},
	} {
		w, err := want.Search(ctx, q, 10, opts...)
		require.NoError(t, err)
		g, err := got.Search(ctx, q, 10, opts...)
		require.NoError(t, err, "search %d", i)
		assert.Equal(t, hits(w), hits(g), "search %d", i)
	}
	w, err := want.SearchRange(ctx, q, rangeThreshold, umbra.MaxHits(15))
	require.NoError(t, err)
	g, err := got.SearchRange(ctx, q, rangeThreshold, umbra.MaxHits(15))
	require.NoError(t, err)
	assert.Equal(t, hits(w), hits(g), "range search")

	ws, err := want.Summary(ctx)
	require.NoError(t, err)
	gs, err := got.Summary(ctx)
	require.NoError(t, err)
	assert.Equal(t, ws.Rows, gs.Rows, "Summary.Rows")
	assert.Equal(t, n-8+nk-4, gs.Rows, "Summary.Rows counts the stored rows")
	assert.Equal(t, ws.Dim, gs.Dim)
	assert.Equal(t, ws.Metric, gs.Metric)
	assert.Equal(t, ws.Fields, gs.Fields)
	assert.NotEmpty(t, gs.Backend)

	// Refusals mean the same on both.
	_, err = got.Get(ctx, umbra.Selection{IDs: []uint64{1}, Keys: []string{"a"}})
	assert.ErrorIs(t, err, umbra.ErrInvalidOption)
	_, err = got.Get(ctx, umbra.Selection{Limit: -1})
	assert.ErrorIs(t, err, umbra.ErrInvalidOption)
	_, err = got.Get(ctx, umbra.Selection{Keys: []string{""}})
	assert.ErrorIs(t, err, umbra.ErrInvalidKey)
	_, err = got.Count(ctx, meta.Eq("nope", meta.IntOf(1)))
	assert.ErrorIs(t, err, umbra.ErrInvalidFilter)
	_, err = got.Count(ctx, meta.Eq("user", meta.IntOf(1)))
	assert.ErrorIs(t, err, umbra.ErrInvalidFilter)

	require.NoError(t, got.Close())
	_, err = got.Get(ctx, umbra.Selection{})
	assert.ErrorIs(t, err, umbra.ErrClosed)
	_, err = got.Count(ctx, meta.Filter{})
	assert.ErrorIs(t, err, umbra.ErrClosed)
	_, err = got.Search(ctx, q, 3)
	assert.ErrorIs(t, err, umbra.ErrClosed)
	_, err = got.Summary(ctx)
	assert.ErrorIs(t, err, umbra.ErrClosed)
}

// rangeThreshold is a cosine threshold that some of the random rows pass.
const rangeThreshold = 0.1

// records puts recs in a form two implementations agree on: the rows
// named by keys without their IDs (each implementation chooses a new
// key's ID), ordered by key after the rows named by ID, in ID order.
func records(recs []umbra.Record) []umbra.Record {
	out := slices.Clone(recs)
	for i := range out {
		if out[i].Key != "" {
			out[i].ID = 0
		}
	}
	slices.SortStableFunc(out, func(a, b umbra.Record) int {
		switch {
		case a.Key == "" && b.Key == "":
			return 0 // ID order, as Get gave them
		case a.Key == "":
			return -1
		case b.Key == "":
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// hits puts a search's hits in a form two implementations agree on: the
// rows named by keys without their IDs.
func hits(hs []umbra.Hit) []umbra.Hit {
	out := slices.Clone(hs)
	for i := range out {
		if out[i].Key != "" {
			out[i].ID = 0
		}
	}
	return out
}

// RandomFields is n rows of random metadata over a fixed schema (user,
// n, score, at, tags): some rows without any, most with some of the
// fields. The cluster's tests write it beside a reference index.
func RandomFields(r *rand.Rand, n int) []meta.Fields {
	users := []string{"ann", "bob", "cy", "dee", "eve"}
	tags := []string{"red", "green", "blue", "work", "home"}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([]meta.Fields, n)
	for i := range out {
		if r.IntN(8) == 0 {
			continue // no metadata
		}
		f := meta.Fields{}
		if r.IntN(5) > 0 {
			f["user"] = meta.KeywordOf(users[r.IntN(len(users))])
		}
		if r.IntN(3) > 0 {
			f["n"] = meta.IntOf(int64(r.IntN(100)))
		}
		if r.IntN(2) == 0 {
			f["score"] = meta.FloatOf(float64(r.IntN(1000)) / 10)
		}
		if r.IntN(2) == 0 {
			f["at"] = meta.TimeOf(base.Add(time.Duration(r.IntN(365*24)) * time.Hour))
		}
		if r.IntN(3) > 0 {
			var ts []string
			for _, t := range tags {
				if r.IntN(3) == 0 {
					ts = append(ts, t)
				}
			}
			f["tags"] = meta.TagsOf(ts...)
		}
		out[i] = f
	}
	return out
}

// RandomPayloads is n random payloads of 1 to 200 bytes, some rows
// without one.
func RandomPayloads(r *rand.Rand, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		if r.IntN(6) == 0 {
			continue // none
		}
		p := make([]byte, 1+r.IntN(200))
		for j := range p {
			p[j] = byte(r.IntN(256))
		}
		out[i] = p
	}
	return out
}
