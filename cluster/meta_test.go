package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/collectiontest"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

func pick[T any](xs []T, idx []int) []T {
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = xs[i]
	}
	return out
}

// The cluster given writes with metadata and payloads (added, upserted
// with and without them, by IDs and by keys, deleted) answers every
// filtered search, with and without payloads, exactly as one local engine
// index given the same writes: the same hits, scores, keys and payloads.
func TestClusterMetaMatchesReference(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("S%d", shards), func(t *testing.T) {
			h := newHarness(t, nil)
			r := testkit.Rand(t)
			ctx := context.Background()
			const dim = 5
			col, err := h.c.Create(ctx, "m", CollectionConfig{Dim: dim, Shards: shards})
			if err != nil {
				t.Fatal(err)
			}
			ref := newMirror(t, dim, umbra.Cosine)
			grid := func(n int) [][]float32 {
				vs := make([][]float32, n)
				for i := range vs {
					if i > 0 && r.IntN(5) == 0 {
						vs[i] = slices.Clone(vs[r.IntN(i)]) // an exact tie
					} else {
						vs[i] = testkit.Grid(r, dim)
						vs[i][0] += 1.0 / 64
					}
				}
				return vs
			}
			must := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			// Assigned IDs, metadata and payloads.
			vs := grid(240)
			mf, pl := collectiontest.RandomFields(r, len(vs)), collectiontest.RandomPayloads(r, len(vs))
			ids, err := col.Add(ctx, umbra.Vectors(vs), umbra.WithMeta(mf...), umbra.WithPayloads(pl...))
			must("add", err)
			_, err = ref.ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...), umbra.WithMeta(mf...), umbra.WithPayloads(pl...))
			must("ref add", err)
			// Keys with metadata only.
			vs = grid(60)
			keys := make([]string, len(vs))
			for i := range keys {
				keys[i] = fmt.Sprintf("doc/%d", i)
			}
			mf = collectiontest.RandomFields(r, len(vs))
			kids, err := col.Add(ctx, umbra.Vectors(vs), umbra.WithKeys(keys...), umbra.WithMeta(mf...))
			must("add keys", err)
			_, err = ref.ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(kids...), umbra.WithKeys(keys...), umbra.WithMeta(mf...))
			must("ref add keys", err)
			// Upsert by keys, half stored and half new, without metadata:
			// the stored keep theirs. Then by keys with payloads only.
			for round := range 2 {
				vs = grid(40)
				ukeys := make([]string, len(vs))
				for i := range ukeys {
					ukeys[i] = fmt.Sprintf("doc/%d", 40+20*round+i)
				}
				var opts []umbra.WriteOption
				pl = collectiontest.RandomPayloads(r, len(vs))
				if round == 1 {
					opts = append(opts, umbra.WithPayloads(pl...))
				}
				uids, err := col.Upsert(ctx, umbra.Vectors(vs), append(opts, umbra.WithKeys(ukeys...))...)
				must("upsert keys", err)
				var oldIdx, newIdx []int
				for i, k := range ukeys {
					if id, ok := ref.ix.Lookup(k); ok {
						if uids[i] != id {
							t.Fatalf("upsert of stored key %s gave ID %d, want %d", k, uids[i], id)
						}
						oldIdx = append(oldIdx, i)
					} else {
						newIdx = append(newIdx, i)
					}
				}
				var ro, rn []umbra.WriteOption
				if round == 1 {
					ro = append(ro, umbra.WithPayloads(pick(pl, oldIdx)...))
					rn = append(rn, umbra.WithPayloads(pick(pl, newIdx)...))
				}
				_, err = ref.ix.Upsert(ctx, umbra.Vectors(pick(vs, oldIdx)), append(ro, umbra.WithIDs(pick(uids, oldIdx)...))...)
				must("ref upsert", err)
				_, err = ref.ix.Add(ctx, umbra.Vectors(pick(vs, newIdx)), append(rn, umbra.WithIDs(pick(uids, newIdx)...), umbra.WithKeys(pick(ukeys, newIdx)...))...)
				must("ref add new keys", err)
			}
			// Upserts by ID, stored and new: with metadata (replaced),
			// then without (kept), then with payloads only.
			for round := range 3 {
				vs = grid(30)
				up := slices.Clone(ids[30*round : 30*round+20])
				for i := range 10 {
					up = append(up, 5000+uint64(10*round+i))
				}
				mf, pl = collectiontest.RandomFields(r, len(vs)), collectiontest.RandomPayloads(r, len(vs))
				var co []umbra.WriteOption
				var eo []umbra.WriteOption
				switch round {
				case 0:
					co, eo = []umbra.WriteOption{umbra.WithMeta(mf...)}, []umbra.WriteOption{umbra.WithMeta(mf...)}
				case 2:
					co, eo = []umbra.WriteOption{umbra.WithPayloads(pl...)}, []umbra.WriteOption{umbra.WithPayloads(pl...)}
				}
				_, err = col.Upsert(ctx, umbra.Vectors(vs), append(co, umbra.WithIDs(up...))...)
				must("upsert ids", err)
				_, err = ref.ix.Upsert(ctx, umbra.Vectors(vs), append(eo, umbra.WithIDs(up...))...)
				must("ref upsert ids", err)
			}
			// A field that only a few rows have, added late.
			vs = grid(4)
			late := []meta.Fields{{"late": meta.IntOf(1)}, nil, {"late": meta.IntOf(2), "user": meta.KeywordOf("ann")}, {"late": meta.IntOf(3)}}
			lids, err := col.Add(ctx, umbra.Vectors(vs), umbra.WithMeta(late...))
			must("add late", err)
			_, err = ref.ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(lids...), umbra.WithMeta(late...))
			must("ref add late", err)
			// Deletes.
			must("delete", col.Delete(ctx, umbra.WithIDs(ids[100:130]...)))
			must("ref delete", ref.ix.Delete(ctx, umbra.WithIDs(ids[100:130]...)))
			must("delete keys", col.Delete(ctx, umbra.WithKeys("doc/3", "doc/50")))
			must("ref delete keys", ref.ix.Delete(ctx, umbra.WithKeys("doc/3", "doc/50")))

			// A value of another kind than the field's is refused before
			// anything is published.
			before := streamMsgs(t, h, "m", shards)
			_, err = col.Add(ctx, umbra.Vectors(grid(2)), umbra.WithMeta(meta.Fields{"n": meta.IntOf(1)}, meta.Fields{"n": meta.KeywordOf("x")}))
			if !errors.Is(err, umbra.ErrInvalidMeta) {
				t.Fatalf("a call giving two kinds for a field: %v, want ErrInvalidMeta", err)
			}
			_, err = col.Add(ctx, umbra.Vectors(grid(1)), umbra.WithMeta(meta.Fields{"user": meta.IntOf(1)}))
			if !errors.Is(err, umbra.ErrInvalidMeta) || !strings.Contains(err.Error(), "user") {
				t.Fatalf("an int for the keyword field user: %v, want ErrInvalidMeta naming it", err)
			}
			// … also through a handle that has not seen the field yet.
			other, err := h.c.Open(ctx, "m")
			must("open", err)
			other.mu.Lock()
			other.fields = nil
			other.mu.Unlock()
			if _, err = other.Add(ctx, umbra.Vectors(grid(1)), umbra.WithMeta(meta.Fields{"late": meta.FloatOf(1.5)})); !errors.Is(err, umbra.ErrInvalidMeta) {
				t.Fatalf("a float for the int field late, from a fresh handle: %v, want ErrInvalidMeta", err)
			}
			if _, err = col.Add(ctx, umbra.Vectors(grid(1)), umbra.WithPayloads(make([]byte, umbra.DefaultMaxPayloadBytes+1))); !errors.Is(err, umbra.ErrTooLarge) {
				t.Fatalf("a payload over the limit: %v, want ErrTooLarge", err)
			}
			if after := streamMsgs(t, h, "m", shards); after != before {
				t.Fatalf("refused writes were published: %d stream messages, %d before", after, before)
			}
			if rec, _, err := col.readRecord(ctx); err != nil || rec.Fields["user"] != "keyword" || rec.Fields["late"] != "int" || len(rec.Fields) != 6 {
				t.Fatalf("collection record's schema %v (%v)", rec.Fields, err)
			}

			day := func(d int) meta.Value {
				return meta.TimeOf(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(d) * 24 * time.Hour))
			}
			filters := []meta.Filter{
				{}, // every row
				meta.Eq("user", meta.KeywordOf("ann")),
				meta.Ne("user", meta.KeywordOf("bob")),
				meta.In("user", meta.KeywordOf("cy"), meta.KeywordOf("dee")),
				meta.Nin("user", meta.KeywordOf("cy")),
				meta.And(meta.Gte("n", meta.IntOf(20)), meta.Lt("n", meta.IntOf(70))),
				meta.Gt("score", meta.IntOf(50)),
				meta.And(meta.Gte("at", day(30)), meta.Lt("at", day(200))),
				meta.Contains("tags", "work"),
				meta.NotContains("tags", "red"),
				meta.Or(meta.Eq("user", meta.KeywordOf("eve")), meta.Contains("tags", "home")),
				meta.Not(meta.Eq("user", meta.KeywordOf("ann"))),
				meta.Gte("late", meta.IntOf(2)), // a field most shards have never stored
				meta.Ne("late", meta.IntOf(2)),
				meta.Not(meta.Gte("late", meta.IntOf(1))),
				meta.In("user"), // no row
			}
			queries := grid(6)
			queries = append(queries, slices.Clone(vs[0]))
			for fi, f := range filters {
				for _, k := range []int{1, 10, 500} {
					for _, withPay := range []bool{false, true} {
						co, eo := []umbra.SearchOption{umbra.Where(f)}, []umbra.SearchOption{umbra.Where(f)}
						if withPay {
							co, eo = append(co, umbra.WithPayload()), append(eo, umbra.WithPayload())
						}
						got, err := col.SearchBatch(ctx, queries, k, co...)
						must(fmt.Sprintf("search filter %d (%v)", fi, f), err)
						for qi, q := range queries {
							want, err := ref.ix.Search(ctx, q, k, eo...)
							must("ref search", err)
							sameHits(t, fmt.Sprintf("filter %v k=%d payloads=%v query %d", f, k, withPay, qi), want, got[qi])
						}
					}
				}
				// Range, with MaxHits, and beside Allow.
				q := queries[fi%len(queries)]
				got, err := col.SearchRange(ctx, q, 0.3, umbra.Where(f), umbra.WithPayload(), umbra.MaxHits(40))
				must("range", err)
				want, _ := ref.ix.SearchRange(ctx, q, 0.3, umbra.Where(f), umbra.WithPayload(), umbra.MaxHits(40))
				sameHits(t, fmt.Sprintf("range filter %v", f), want, got)
				allow := append(slices.Clone(ids[:150]), kids...)
				got, err = col.Search(ctx, q, 20, umbra.Where(f), umbra.Allow(allow...), umbra.WithPayload())
				must("allow", err)
				want, _ = ref.ix.Search(ctx, q, 20, umbra.Where(f), umbra.Allow(allow...), umbra.WithPayload())
				sameHits(t, fmt.Sprintf("allow+filter %v", f), want, got)
			}
			// Payloads were compared above; make sure some were there.
			got, err := col.Search(ctx, queries[0], 500, umbra.WithPayload())
			must("search payloads", err)
			withPay := 0
			for _, hh := range got {
				if hh.Payload != "" {
					withPay++
				}
			}
			if withPay < 50 {
				t.Fatalf("only %d of %d hits carry a payload", withPay, len(got))
			}
			// Filters the collection cannot take, as the engine cannot.
			for _, f := range []meta.Filter{meta.Eq("nope", meta.IntOf(1)), meta.Eq("n", meta.KeywordOf("x")), meta.Contains("user", "ann")} {
				_, err := col.Search(ctx, queries[0], 5, umbra.Where(f))
				_, rerr := ref.ix.Search(ctx, queries[0], 5, umbra.Where(f))
				if !errors.Is(err, umbra.ErrInvalidFilter) || !errors.Is(rerr, umbra.ErrInvalidFilter) {
					t.Fatalf("filter %v: cluster %v, engine %v; want ErrInvalidFilter from both", f, err, rerr)
				}
			}
		})
	}
}

func streamMsgs(t *testing.T, h *harness, coll string, shards int) uint64 {
	t.Helper()
	var n uint64
	for s := range shards {
		st, err := h.c.x.JS.Stream(context.Background(), protocol.StreamName(coll, s))
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n += info.State.Msgs
	}
	return n
}

// Rows with payloads of the engine's largest (1 MiB) go, one or more to a
// message as their bytes allow, and come back whole.
func TestClusterLargePayloads(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	r := testkit.Rand(t)
	ctx := context.Background()
	col, err := h.c.Create(ctx, "big", CollectionConfig{Dim: 4, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	vs := testkit.Vectors(r, n, 4)
	pl := make([][]byte, n)
	total := 0
	for i := range pl {
		size := 1 + r.IntN(300<<10)
		if i%4 == 0 {
			size = umbra.DefaultMaxPayloadBytes
		}
		pl[i] = make([]byte, size)
		for j := range pl[i] {
			pl[i][j] = byte(r.Uint32())
		}
		total += size
	}
	ids, err := col.Add(ctx, umbra.Vectors(vs), umbra.WithPayloads(pl...), umbra.WithMeta(make([]meta.Fields, n)...))
	if err != nil {
		t.Fatal(err)
	}
	msgs := streamMsgs(t, h, "big", 1)
	maxPayload := int(h.c.x.NC.MaxPayload())
	if min := uint64(total/maxPayload + 1); msgs < min || msgs >= n {
		t.Fatalf("%d payload bytes went in %d messages (max payload %d): want at least %d and fewer than one a row", total, msgs, maxPayload, min)
	}
	got, err := col.Search(ctx, vs[0], n, umbra.WithPayload())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d hits, want %d", len(got), n)
	}
	for _, hh := range got {
		i := slices.Index(ids, hh.ID)
		if i < 0 || !bytes.Equal([]byte(hh.Payload), pl[i]) {
			t.Fatalf("hit %d: payload of %d bytes differs from the %d stored", hh.ID, len(hh.Payload), len(pl[max(i, 0)]))
		}
	}
}
