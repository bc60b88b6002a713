package node

import (
	"testing"

	"github.com/umbravec/umbra/meta"
)

// A filter is localized to a shard's fields: one the shard does not know
// matches none (or all, negated).
func TestLocalFilter(t *testing.T) {
	known := map[string]meta.Kind{"a": meta.Int}
	for _, c := range []struct {
		f    meta.Filter
		want string
	}{
		{meta.Eq("a", meta.IntOf(1)), `a == 1`},
		{meta.Eq("b", meta.IntOf(1)), `none`},
		{meta.And(meta.Eq("a", meta.IntOf(1)), meta.Ne("b", meta.IntOf(1)), meta.Nin("b"), meta.NotContains("b", "t")), `(a == 1 AND all AND all AND all)`},
		{meta.Or(meta.In("b", meta.IntOf(1)), meta.Not(meta.Contains("b", "t"))), `(none OR NOT none)`},
	} {
		f, err := localFilter(c.f.AppendJSON(nil), known)
		if err != nil {
			t.Fatal(err)
		}
		if f.String() != c.want {
			t.Fatalf("%v on a shard knowing only a: %v, want %s", c.f, f, c.want)
		}
	}
}
