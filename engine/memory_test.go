package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/metaindex"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// sameFields reports whether two rows' metadata are equal, by their
// canonical encodings.
func sameFields(a, b meta.Fields) bool {
	return string(metaindex.AppendBinary(nil, a)) == string(metaindex.AppendBinary(nil, b))
}

// memRow makes row i's metadata: a user among 12, a time, a score, a few
// of 6 tags; some rows lack fields, some have none at all.
func memRow(r *rand.Rand) meta.Fields {
	if r.IntN(10) == 0 {
		return nil
	}
	f := meta.Fields{"user": meta.KeywordOf(fmt.Sprint("u", r.IntN(12)))}
	if r.IntN(8) != 0 {
		f["ts"] = meta.IntOf(int64(r.IntN(1000)))
	}
	if r.IntN(5) != 0 {
		f["score"] = meta.FloatOf(r.Float64()*2 - 1)
	}
	var tags []string
	for _, t := range []string{"work", "home", "todo", "done", "red", "blue"} {
		if r.IntN(3) == 0 {
			tags = append(tags, t)
		}
	}
	if tags != nil {
		f["tags"] = meta.TagsOf(tags...)
	}
	return f
}

// memFilter is a random filter with the predicate it means, for a model
// to evaluate on its own rows.
type memFilter struct {
	f    meta.Filter
	keep func(meta.Fields) bool
}

func memFilterOf(r *rand.Rand, depth int) memFilter {
	user := fmt.Sprint("u", r.IntN(12))
	ts := int64(r.IntN(1000))
	tag := []string{"work", "home", "todo", "done", "red", "blue", "none"}[r.IntN(7)]
	has := func(f meta.Fields, name string) (meta.Value, bool) { v, ok := f[name]; return v, ok }
	k := r.IntN(9)
	if depth > 1 {
		k = r.IntN(6)
	}
	switch k {
	case 0:
		return memFilter{meta.Eq("user", meta.KeywordOf(user)), func(f meta.Fields) bool {
			v, ok := has(f, "user")
			return ok && v.Str() == user
		}}
	case 1:
		return memFilter{meta.Gte("ts", meta.IntOf(ts)), func(f meta.Fields) bool {
			v, ok := has(f, "ts")
			return ok && v.Int() >= ts
		}}
	case 2:
		return memFilter{meta.Lt("score", meta.FloatOf(0.25)), func(f meta.Fields) bool {
			v, ok := has(f, "score")
			return ok && v.Float() < 0.25
		}}
	case 3:
		return memFilter{meta.Contains("tags", tag), func(f meta.Fields) bool {
			v, ok := has(f, "tags")
			return ok && slices.Contains(v.Tags(), tag)
		}}
	case 4:
		other := fmt.Sprint("u", r.IntN(12))
		return memFilter{meta.In("user", meta.KeywordOf(user), meta.KeywordOf(other)), func(f meta.Fields) bool {
			v, ok := has(f, "user")
			return ok && (v.Str() == user || v.Str() == other)
		}}
	case 5:
		return memFilter{meta.And(meta.Gte("ts", meta.IntOf(ts)), meta.Lte("ts", meta.IntOf(ts+300))), func(f meta.Fields) bool {
			v, ok := has(f, "ts")
			return ok && v.Int() >= ts && v.Int() <= ts+300
		}}
	case 6:
		a, b := memFilterOf(r, depth+1), memFilterOf(r, depth+1)
		return memFilter{meta.And(a.f, b.f), func(f meta.Fields) bool { return a.keep(f) && b.keep(f) }}
	case 7:
		a, b := memFilterOf(r, depth+1), memFilterOf(r, depth+1)
		return memFilter{meta.Or(a.f, b.f), func(f meta.Fields) bool { return a.keep(f) || b.keep(f) }}
	}
	a := memFilterOf(r, depth+1)
	return memFilter{meta.Not(a.f), func(f meta.Fields) bool { return !a.keep(f) }}
}

// TestWhereIsTheExactTopKOfTheSubset stores rows with metadata, replaces
// and deletes some, and requires every Where search — top k, range, and
// with Allow beside it — to answer exactly as Allow of the rows the
// filter's own predicate keeps (Allow is held to the brute-force
// reference elsewhere), on the CPU and the GPU backends, across device
// chunks. Missing fields follow the meta package's rule: $ne and $not
// keep a row without the field, the comparisons do not.
func TestWhereIsTheExactTopKOfTheSubset(t *testing.T) {
	bs := backends[:2]
	if testkit.Full() {
		bs = backends
	}
	for _, b := range bs {
		t.Run(b.name, func(t *testing.T) {
			r := testkit.Rand(t)
			ctx := context.Background()
			const dim = 24
			n := 1500
			ix := open(t, b, engine.Config{Dim: dim, Metric: umbra.Dot}, 512)
			vs := testkit.Vectors(r, n, dim)
			rows := make([]meta.Fields, n)
			for i := range rows {
				rows[i] = memRow(r)
			}
			ids, err := ix.Add(ctx, umbra.Vectors(vs), umbra.WithMeta(rows...))
			require.NoError(t, err)
			model := map[uint64]meta.Fields{}
			for i, id := range ids {
				model[id] = rows[i]
			}
			// Replace some rows' metadata (in place), delete others.
			for round := 0; round < 3; round++ {
				var up []uint64
				var upRows []meta.Fields
				for range 40 {
					id := ids[r.IntN(len(ids))]
					if _, ok := model[id]; ok && !slices.Contains(up, id) {
						up, upRows = append(up, id), append(upRows, memRow(r))
					}
				}
				_, err := ix.Upsert(ctx, umbra.Vectors(testkit.Vectors(r, len(up), dim)), umbra.WithIDs(up...), umbra.WithMeta(upRows...))
				require.NoError(t, err)
				for i, id := range up {
					model[id] = upRows[i]
				}
				var del []uint64
				for range 30 {
					id := ids[r.IntN(len(ids))]
					if _, ok := model[id]; ok && !slices.Contains(del, id) {
						del = append(del, id)
					}
				}
				require.NoError(t, ix.Delete(ctx, umbra.WithIDs(del...)))
				for _, id := range del {
					delete(model, id)
				}
			}
			for i := 0; i < 12; i++ {
				mf := memFilterOf(r, 0)
				var allow []uint64
				for id, f := range model {
					if mf.keep(f) {
						allow = append(allow, id)
					}
				}
				slices.Sort(allow)
				q := testkit.Vector(r, dim)
				for _, k := range []int{1, 10, n} {
					want, err := ix.Search(ctx, q, k, umbra.Allow(allow...))
					require.NoError(t, err)
					got, err := ix.Search(ctx, q, k, umbra.Where(mf.f))
					require.NoError(t, err, "filter %v", mf.f)
					require.Equal(t, want, got, "filter %v, k=%d (%d rows match)", mf.f, k, len(allow))
				}
				// Where and Allow together: both must pass.
				some := slices.Clone(ids[:len(ids)/2])
				want, err := ix.Search(ctx, q, 10, umbra.Allow(intersect(allow, some)...))
				require.NoError(t, err)
				got, err := ix.Search(ctx, q, 10, umbra.Where(mf.f), umbra.Allow(some...))
				require.NoError(t, err)
				require.Equal(t, want, got, "filter %v with Allow", mf.f)
				wantR, err := ix.SearchRange(ctx, q, 0, umbra.Allow(allow...))
				require.NoError(t, err)
				gotR, err := ix.SearchRange(ctx, q, 0, umbra.Where(mf.f))
				require.NoError(t, err)
				require.Equal(t, wantR, gotR, "range, filter %v", mf.f)
			}
		})
	}
}

func intersect(a, b []uint64) []uint64 {
	in := map[uint64]bool{}
	for _, x := range b {
		in[x] = true
	}
	out := []uint64{}
	for _, x := range a {
		if in[x] {
			out = append(out, x)
		}
	}
	return out
}

// TestMetaAndPayloadsKeptByTheStore writes rows with keys, metadata and
// payloads to a store — adds, upserts with and without them, deletes, a
// checkpoint in the middle, compaction — and requires the reopened store
// (and a Save of it) to hold exactly what the model holds, and to answer
// a Where search as before.
func TestMetaAndPayloadsKeptByTheStore(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 8
	path := filepath.Join(t.TempDir(), "mem.umbra")
	ix, err := engine.Open(ctx, path, engine.Config{Dim: dim, Device: engine.CPU})
	require.NoError(t, err)
	type row struct {
		f meta.Fields
		p []byte
	}
	model := map[string]row{}
	payload := func(i int) []byte {
		if i%4 == 3 {
			return nil
		}
		return fmt.Appendf(nil, `{"text":"memory %d","n":%d}`, i, r.IntN(100))
	}
	next := 0
	add := func(n int) {
		keys := make([]string, n)
		fs := make([]meta.Fields, n)
		ps := make([][]byte, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("alice/m%d", next)
			fs[i], ps[i] = memRow(r), payload(next)
			next++
		}
		_, err := ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, n, dim)), umbra.WithKeys(keys...), umbra.WithMeta(fs...), umbra.WithPayloads(ps...))
		require.NoError(t, err)
		for i, k := range keys {
			model[k] = row{fs[i], ps[i]}
		}
	}
	stored := func() []string {
		return slices.Sorted(func(yield func(string) bool) {
			for k := range model {
				if !yield(k) {
					return
				}
			}
		})
	}
	upsert := func(withAttrs bool) {
		keys := stored()
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		keys = append(keys[:5], fmt.Sprintf("alice/m%d", next))
		next++
		opts := []umbra.WriteOption{umbra.WithKeys(keys...)}
		fs := make([]meta.Fields, len(keys))
		ps := make([][]byte, len(keys))
		if withAttrs {
			for i := range keys {
				fs[i], ps[i] = memRow(r), payload(next+i)
			}
			opts = append(opts, umbra.WithMeta(fs...), umbra.WithPayloads(ps...))
		}
		_, err := ix.Upsert(ctx, umbra.Vectors(testkit.Vectors(r, len(keys), dim)), opts...)
		require.NoError(t, err)
		for i, k := range keys {
			if withAttrs {
				model[k] = row{fs[i], ps[i]}
			} else if _, ok := model[k]; !ok {
				model[k] = row{}
			}
		}
	}
	del := func(n int) {
		keys := stored()[:n]
		require.NoError(t, ix.Delete(ctx, umbra.WithKeys(keys...)))
		for _, k := range keys {
			delete(model, k)
		}
	}
	check := func(ix *engine.Index, what string) {
		require.Equal(t, len(model), ix.Len(), what)
		for k, want := range model {
			id, ok := ix.Lookup(k)
			require.True(t, ok, "%s: key %s", what, k)
			f, err := ix.Meta(id)
			require.NoError(t, err)
			require.True(t, sameFields(want.f, f), "%s: metadata of %s: want %v, got %v", what, k, want.f, f)
			p, err := ix.Payload(id)
			require.NoError(t, err)
			require.Equal(t, string(want.p), string(p), "%s: payload of %s", what, k)
		}
		q := testkit.Vector(r, dim)
		hits, err := ix.Search(ctx, q, 5, umbra.Where(meta.Contains("tags", "work")), umbra.WithPayload())
		require.NoError(t, err)
		for _, h := range hits {
			want := model[h.Key]
			require.True(t, slices.Contains(want.f["tags"].Tags(), "work"), "%s: hit %s has no tag work", what, h.Key)
			require.Equal(t, string(want.p), h.Payload, "%s: payload of hit %s", what, h.Key)
		}
	}
	add(50)
	upsert(true)
	upsert(false)
	del(7)
	require.NoError(t, ix.Checkpoint(ctx))
	add(30)
	upsert(true)
	del(3)
	upsert(false)
	check(ix, "before reopening")
	require.NoError(t, ix.Close())

	ix, err = engine.Open(ctx, path, engine.Config{})
	require.NoError(t, err)
	check(ix, "reopened (base and log)")
	require.NoError(t, ix.Compact(ctx))
	check(ix, "compacted")
	require.NoError(t, ix.Checkpoint(ctx))
	saved := filepath.Join(t.TempDir(), "saved.umbra")
	require.NoError(t, ix.Save(ctx, saved))
	require.NoError(t, ix.Close())
	for _, p := range []string{path, saved} {
		ix, err = engine.Open(ctx, p, engine.Config{ReadOnly: true})
		require.NoError(t, err)
		check(ix, "reopened "+filepath.Base(p))
		require.NoError(t, ix.Close())
	}
}

// TestMetaAndPayloadRefusals: metadata of another kind than its field's, a
// payload over the limit, counts that do not pair with the rows, metadata
// on a Delete and a filter on an unknown field are refused by name, and
// nothing is stored.
func TestMetaAndPayloadRefusals(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 4
	path := filepath.Join(t.TempDir(), "refuse.umbra")
	ix, err := engine.Open(ctx, path, engine.Config{Dim: dim, Device: engine.CPU, Limits: engine.Limits{MaxPayloadBytes: 100}})
	require.NoError(t, err)
	defer ix.Close()
	vs := testkit.Vectors(r, 3, dim)
	_, err = ix.Add(ctx, umbra.Vectors(vs), umbra.WithMeta(meta.Fields{"n": meta.IntOf(1)}, nil, meta.Fields{"n": meta.IntOf(2)}))
	require.NoError(t, err)

	cases := []struct {
		name string
		opts []umbra.WriteOption
		want error
		says string
	}{
		{"kind", []umbra.WriteOption{umbra.WithMeta(nil, meta.Fields{"n": meta.KeywordOf("x")}, nil)}, umbra.ErrInvalidMeta, "n"},
		{"kind inside the call", []umbra.WriteOption{umbra.WithMeta(meta.Fields{"m": meta.IntOf(1)}, meta.Fields{"m": meta.FloatOf(1.5)}, nil)}, umbra.ErrInvalidMeta, "m"},
		{"payload", []umbra.WriteOption{umbra.WithPayloads(nil, make([]byte, 101), nil)}, umbra.ErrTooLarge, "payload of vector 1"},
		{"meta count", []umbra.WriteOption{umbra.WithMeta(nil, nil)}, umbra.ErrIDCount, "2 metadata rows for 3 vectors"},
		{"payload count", []umbra.WriteOption{umbra.WithPayloads(nil)}, umbra.ErrIDCount, "1 payloads for 3 vectors"},
		{"twice", []umbra.WriteOption{umbra.WithMeta(nil, nil, nil), umbra.WithMeta(nil, nil, nil)}, umbra.ErrInvalidOption, ""},
	}
	for _, c := range cases {
		_, err := ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 3, dim)), c.opts...)
		require.ErrorIs(t, err, c.want, c.name)
		require.ErrorContains(t, err, c.says, c.name)
		require.Equal(t, 3, ix.Len(), c.name)
	}
	require.ErrorIs(t, ix.Delete(ctx, umbra.WithIDs(0), umbra.WithMeta(nil)), umbra.ErrInvalidOption)
	_, err = ix.Search(ctx, vs[0], 3, umbra.Where(meta.Eq("who", meta.KeywordOf("x"))))
	require.ErrorIs(t, err, umbra.ErrInvalidFilter)
	require.ErrorContains(t, err, "who")
	_, err = ix.Search(ctx, vs[0], 3, umbra.Where(meta.Eq("n", meta.KeywordOf("x"))))
	require.ErrorIs(t, err, umbra.ErrInvalidFilter)

	// What was refused left no trace in the store either.
	require.NoError(t, ix.Close())
	ix, err = engine.Open(ctx, path, engine.Config{})
	require.NoError(t, err)
	require.Equal(t, 3, ix.Len())
	require.Equal(t, map[string]meta.Kind{"n": meta.Int}, ix.Schema())

	// Payloads count against MaxHostBytes.
	small, err := engine.New(ctx, engine.Config{Dim: dim, Device: engine.CPU, Limits: engine.Limits{MaxHostBytes: 4096}})
	require.NoError(t, err)
	defer small.Close()
	_, err = small.Add(ctx, umbra.Vectors(testkit.Vectors(r, 2, dim)), umbra.WithPayloads(make([]byte, 3000), make([]byte, 3000)))
	require.ErrorIs(t, err, umbra.ErrTooLarge)
	require.Zero(t, small.Len())
}

// TestDeclaredFields: Config.Fields fixes a field's kind before any row
// has it, a store remembers its fields, and a declaration that disagrees
// with the store's is ErrInvalidConfig naming the field.
func TestDeclaredFields(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fields.umbra")
	ix, err := engine.Open(ctx, path, engine.Config{Dim: 4, Device: engine.CPU, Fields: map[string]meta.Kind{"ts": meta.Time}})
	require.NoError(t, err)
	_, err = ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 1, 4)), umbra.WithMeta(meta.Fields{"ts": meta.IntOf(5)}))
	require.ErrorIs(t, err, umbra.ErrInvalidMeta)
	require.ErrorContains(t, err, "ts")
	_, err = ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 1, 4)), umbra.WithMeta(meta.Fields{"user": meta.KeywordOf("a")}))
	require.NoError(t, err)
	require.NoError(t, ix.Checkpoint(ctx))
	require.NoError(t, ix.Close())

	ix, err = engine.Open(ctx, path, engine.Config{})
	require.NoError(t, err)
	require.Equal(t, map[string]meta.Kind{"ts": meta.Time, "user": meta.Keyword}, ix.Schema())
	require.NoError(t, ix.Close())
	_, err = engine.Open(ctx, path, engine.Config{Fields: map[string]meta.Kind{"user": meta.Int}})
	require.ErrorIs(t, err, umbra.ErrInvalidConfig)
	require.ErrorContains(t, err, "user")
}
