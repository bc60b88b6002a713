package metaindex

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// TestAbsent: a filter with its conditions on fields an index does not
// know replaced by f.Absent selects, on that index, the rows the filter
// itself selects on an index that knows those fields but where no row has
// them.
func TestAbsent(t *testing.T) {
	r := testkit.Rand(t)
	g := &gen{r: r}
	x, y := NewIndex(meta.Limits{}), NewIndex(meta.Limits{})
	require.NoError(t, y.Declare("rare", meta.Int))
	require.NoError(t, y.Declare("tags", meta.Tags))
	rows := make([]meta.Fields, 400)
	for i := range rows {
		rows[i] = g.row()
		delete(rows[i], "rare")
		delete(rows[i], "tags")
	}
	require.NoError(t, x.Append(rows))
	require.NoError(t, y.Append(rows))
	known := func(field string) bool { _, ok := x.Schema()[field]; return ok }
	names := []string{"kw", "user", "n", "x", "t", "tags", "rare"}
	a, b := make([]uint64, words(x.Len())), make([]uint64, words(x.Len()))
	changed := 0
	for range 1000 {
		f := g.filter(4, names)
		before := f.String()
		h := Absent(f, known)
		require.Equal(t, before, f.String(), "f is unchanged")
		require.NoError(t, x.Validate(h), "%s became %s", f, h)
		require.NoError(t, y.Eval(f, a))
		require.NoError(t, x.Eval(h, b))
		require.Equal(t, a, b, "%s became %s", f, h)
		if h.String() != f.String() {
			changed++
		} else {
			require.True(t, h == f, "a filter with nothing to replace is itself")
		}
	}
	require.Greater(t, changed, 100)
	require.Equal(t, `(a == 1 AND none AND all AND NOT none)`,
		Absent(meta.And(meta.Eq("a", meta.IntOf(1)), meta.In("z", meta.IntOf(1)), meta.Nin("z"), meta.Not(meta.Contains("z", "q"))), func(f string) bool { return f == "a" }).String())
}

// TestWhereRoundTrip: random filters written with AppendJSON read back as
// the same filter and select the same rows.
func TestWhereRoundTrip(t *testing.T) {
	r := testkit.Rand(t)
	g := &gen{r: r}
	x := NewIndex(meta.Limits{})
	rows := make([]meta.Fields, 500)
	for i := range rows {
		rows[i] = g.row()
	}
	require.NoError(t, x.Append(rows))
	names := []string{"kw", "user", "n", "x", "t", "tags", "rare"}
	a, b := make([]uint64, words(x.Len())), make([]uint64, words(x.Len()))
	for range 500 {
		f := g.filter(4, names)
		js := f.AppendJSON(nil)
		h, err := meta.ParseWhere(js)
		require.NoError(t, err, "%s", js)
		require.Equal(t, f.String(), h.String(), "%s", js)
		require.NoError(t, x.Eval(f, a))
		require.NoError(t, x.Eval(h, b))
		require.Equal(t, a, b, "%s", js)
	}
}

// FuzzEvalWhere: whatever meta.ParseWhere accepts, an index evaluates or
// refuses without a panic.
func FuzzEvalWhere(f *testing.F) {
	for _, s := range []string{`{}`, `{"a": {"$gte": 1, "$lt": 2.5}}`, `{"$or": [{"t": {"$contains": "x"}}, {"$not": {"k": {"$in": ["a"]}}}]}`,
		`{"d": {"$gt": {"$time": "2024-01-01T00:00:00Z"}}}`, `{"k": "\ud83d\ude00"}`, `{"a": {"$in": [1, 2.5, "x"]}}`, `{"zz": {"$nin": []}}`} {
		f.Add([]byte(s))
	}
	x := NewIndex(meta.Limits{})
	if err := x.Append([]meta.Fields{
		{"a": meta.IntOf(1), "k": meta.KeywordOf("a"), "t": meta.TagsOf("x"), "f": meta.FloatOf(1.5), "d": timeNanos(1)},
		nil,
		{"a": meta.IntOf(2), "t": meta.TagsOf()},
	}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := meta.ParseWhere(b)
		if err != nil {
			return
		}
		out := make([]uint64, 1)
		if err := x.Eval(w, out); err == nil && out[0]>>x.Len() != 0 {
			t.Fatalf("%s selected rows past the end: %b", w, out[0])
		}
	})
}
