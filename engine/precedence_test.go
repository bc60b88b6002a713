package engine_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// TestRowErrorsComeFirst: a bad row — a NaN, an infinity, a zero vector
// under cosine, a row of another dimension — fails a write before any ID
// or key is checked, looked up or assigned, whatever else is wrong with
// the call's names, for every form of write: Add with assigned IDs, with
// WithIDs, with WithKeys and with both; Upsert by IDs and by keys; each
// from rows in memory and from a streamed source (read to its end, or to
// the bad row, before a name is judged). The error is the one the rows
// alone give, naming the first bad row, and the index is left as it was.
// The index holds ID 2^64-1, so it has no ID left to assign.
func TestRowErrorsComeFirst(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 5
	good := func() []float32 { return testkit.Vectors(r, 1, dim)[0] }
	type rowsCase struct {
		name     string
		rows     func() [][]float32 // three rows, the second (or third) bad
		sentinel error
		says     string
	}
	rowCases := []rowsCase{
		{"nan", func() [][]float32 {
			v := good()
			v[3] = float32(math.NaN())
			return [][]float32{good(), v, good()}
		}, umbra.ErrNonFinite, "vector 1, component 3 is NaN"},
		{"inf", func() [][]float32 {
			v := good()
			v[0] = float32(math.Inf(-1))
			return [][]float32{good(), good(), v}
		}, umbra.ErrNonFinite, "vector 2, component 0 is -Inf"},
		{"zero", func() [][]float32 { return [][]float32{good(), make([]float32, dim), good()} }, umbra.ErrZeroVector, "vector 1 has norm 0"},
		{"dimension", func() [][]float32 { return [][]float32{good(), good()[:dim-1], good()} }, umbra.ErrDimMismatch, "vector 1 has 4 components"},
	}
	const last = math.MaxUint64
	// Names, each wrong in its own way, for three rows.
	type names struct {
		name string
		ids  []uint64
		keys []string
	}
	allNames := []names{
		{"assigned, none left", nil, nil},
		{"IDs, one stored", []uint64{7, last, 8}, nil},
		{"IDs, one repeated", []uint64{7, 8, 7}, nil},
		{"keys, new (no ID left)", nil, []string{"x", "y", "z"}},
		{"keys, one stored", nil, []string{"x", "last", "z"}},
		{"keys, one repeated", nil, []string{"x", "y", "x"}},
		{"keys, one breaking the rule", nil, []string{"x", "bad\nkey", "z"}},
		{"IDs and keys, an ID stored", []uint64{7, last, 8}, []string{"x", "y", "z"}},
		{"IDs and keys, a key stored", []uint64{7, 8, 9}, []string{"x", "last", "z"}},
		{"IDs and keys, a key repeated", []uint64{7, 8, 9}, []string{"x", "y", "x"}},
		{"IDs and keys, a key breaking the rule", []uint64{7, 8, 9}, []string{"", "y", "bad\rkey"}},
	}
	fresh := func(t *testing.T) *engine.Index {
		ix, err := engine.New(ctx, engine.Config{Dim: dim, Device: engine.CPU})
		require.NoError(t, err)
		t.Cleanup(func() { ix.Close() })
		_, err = ix.Add(ctx, umbra.Vectors([][]float32{good()}), umbra.WithIDs(last), umbra.WithKeys("last"))
		require.NoError(t, err)
		return ix
	}
	// What was found: with ID 2^64-1 stored, an Add by key of a NaN row
	// said ErrTooLarge (no ID left), not ErrNonFinite.
	nan := good()
	nan[2] = float32(math.NaN())
	_, err := fresh(t).Add(ctx, umbra.Vectors([][]float32{nan}), umbra.WithKeys("new"))
	require.ErrorIs(t, err, umbra.ErrNonFinite)
	require.NotErrorIs(t, err, umbra.ErrTooLarge)

	for _, rc := range rowCases {
		for _, nc := range allNames {
			for _, verb := range []string{"Add", "Upsert"} {
				if verb == "Upsert" && (nc.ids == nil) == (nc.keys == nil) {
					continue // an Upsert names its rows one way
				}
				for _, streamed := range []bool{false, true} {
					if streamed && rc.name == "dimension" {
						continue // a source's rows share one dimension: below
					}
					name := fmt.Sprintf("%s %s, %s, %s rows", verb, map[bool]string{false: "from memory", true: "streamed"}[streamed], nc.name, rc.name)
					ix := fresh(t)
					rows := rc.rows()
					var src umbra.RowSource = umbra.Vectors(rows)
					if streamed {
						flat := make([]float32, 0, len(rows)*dim)
						for _, v := range rows {
							flat = append(flat, v...)
						}
						src = shyRows{RowSource: umbra.Flat(flat, dim), small: true}
					}
					var opts []umbra.WriteOption
					if nc.ids != nil {
						opts = append(opts, umbra.WithIDs(nc.ids...))
					}
					if nc.keys != nil {
						opts = append(opts, umbra.WithKeys(nc.keys...))
					}
					var err error
					if verb == "Add" {
						_, err = ix.Add(ctx, src, opts...)
					} else {
						_, err = ix.Upsert(ctx, src, opts...)
					}
					require.ErrorIs(t, err, rc.sentinel, name)
					require.ErrorContains(t, err, rc.says, name)
					require.Equal(t, 1, ix.Len(), name)
					require.Equal(t, []uint64{last}, ix.IDs(), name)
				}
			}
		}
	}
	// Metadata that cannot be stored comes first still: a call's shape.
	for _, nc := range allNames {
		for _, verb := range []string{"Add", "Upsert"} {
			if verb == "Upsert" && (nc.ids == nil) == (nc.keys == nil) {
				continue
			}
			for _, streamed := range []bool{false, true} {
				name := fmt.Sprintf("%s, streamed %v, %s, bad metadata and a NaN row", verb, streamed, nc.name)
				ix := fresh(t)
				rows := rowCases[0].rows()
				var src umbra.RowSource = umbra.Vectors(rows)
				if streamed {
					src = shyRows{RowSource: umbra.Flat(append(append(append([]float32{}, rows[0]...), rows[1]...), rows[2]...), dim)}
				}
				opts := []umbra.WriteOption{umbra.WithMeta(nil, meta.Fields{"$bad": meta.IntOf(1)}, nil)}
				if nc.ids != nil {
					opts = append(opts, umbra.WithIDs(nc.ids...))
				}
				if nc.keys != nil {
					opts = append(opts, umbra.WithKeys(nc.keys...))
				}
				var err error
				if verb == "Add" {
					_, err = ix.Add(ctx, src, opts...)
				} else {
					_, err = ix.Upsert(ctx, src, opts...)
				}
				require.ErrorIs(t, err, umbra.ErrInvalidMeta, name)
				require.ErrorContains(t, err, "$bad", name)
				require.Equal(t, 1, ix.Len(), name)
			}
		}
	}

	// A source's rows all have its dimension: one of another is refused
	// before its names are read.
	ix := fresh(t)
	_, err = ix.Add(ctx, umbra.Flat(make([]float32, 3*(dim+1)), dim+1), umbra.WithKeys("x", "last", "x"))
	require.ErrorIs(t, err, umbra.ErrDimMismatch)
	_, err = ix.Add(ctx, shyRows{RowSource: umbra.Flat(make([]float32, 3*(dim+1)), dim+1)}, umbra.WithIDs(7, last, 7))
	require.ErrorIs(t, err, umbra.ErrDimMismatch)

	// With good rows each name is what is wrong.
	for _, nc := range allNames {
		rows := [][]float32{good(), good(), good()}
		for _, streamed := range []bool{false, true} {
			ix := fresh(t)
			var src umbra.RowSource = umbra.Vectors(rows)
			if streamed {
				src = shyRows{RowSource: umbra.Flat(append(append(append([]float32{}, rows[0]...), rows[1]...), rows[2]...), dim)}
			}
			var opts []umbra.WriteOption
			if nc.ids != nil {
				opts = append(opts, umbra.WithIDs(nc.ids...))
			}
			if nc.keys != nil {
				opts = append(opts, umbra.WithKeys(nc.keys...))
			}
			_, err := ix.Add(ctx, src, opts...)
			require.Error(t, err, nc.name)
			for _, rowErr := range []error{umbra.ErrNonFinite, umbra.ErrZeroVector, umbra.ErrDimMismatch} {
				require.NotErrorIs(t, err, rowErr, nc.name)
			}
			require.Equal(t, 1, ix.Len(), nc.name)
		}
	}
}

// TestRefusedWritesLeaveTheStoreAsItWas: a write refused for its input —
// a bad row, a row of another dimension, a stored key or ID, bad metadata
// — leaves a store's files byte for byte as they were, in a store saved
// without a log (no log is made) and in one whose log holds records; the
// store then opens, answers and takes a good write.
func TestRefusedWritesLeaveTheStoreAsItWas(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 6
	base := testkit.Vectors(r, 20, dim)
	nan := testkit.Vectors(r, 3, dim)
	nan[1][4] = float32(math.NaN())
	refusals := []struct {
		name string
		do   func(ix *engine.Index) error
		is   error
	}{
		{"a NaN row", func(ix *engine.Index) error {
			_, err := ix.Add(ctx, umbra.Vectors(nan))
			return err
		}, umbra.ErrNonFinite},
		{"a streamed NaN row by key", func(ix *engine.Index) error {
			flat := append(append(append([]float32{}, nan[0]...), nan[1]...), nan[2]...)
			_, err := ix.Add(ctx, shyRows{RowSource: umbra.Flat(flat, dim), hide: true}, umbra.WithKeys("p", "q", "r"))
			return err
		}, umbra.ErrNonFinite},
		{"another dimension", func(ix *engine.Index) error {
			_, err := ix.Add(ctx, umbra.Flat(make([]float32, 2*(dim+1)), dim+1))
			return err
		}, umbra.ErrDimMismatch},
		{"a stored key", func(ix *engine.Index) error {
			_, err := ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 2, dim)), umbra.WithKeys("new", "k3"))
			return err
		}, umbra.ErrKeyExists},
		{"a stored ID", func(ix *engine.Index) error {
			_, err := ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 1, dim)), umbra.WithIDs(2))
			return err
		}, umbra.ErrIDExists},
		{"an upsert of a zero row", func(ix *engine.Index) error {
			_, err := ix.Upsert(ctx, umbra.Vectors([][]float32{make([]float32, dim)}), umbra.WithIDs(2))
			return err
		}, umbra.ErrZeroVector},
		{"metadata of another kind", func(ix *engine.Index) error {
			_, err := ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 1, dim)), umbra.WithMeta(meta.Fields{"n": meta.KeywordOf("x")}))
			return err
		}, umbra.ErrInvalidMeta},
		{"a delete of an ID not stored", func(ix *engine.Index) error {
			return ix.Delete(ctx, umbra.WithIDs(999))
		}, umbra.ErrNotFound},
	}
	keys := make([]string, len(base))
	metas := make([]meta.Fields, len(base))
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
		metas[i] = meta.Fields{"n": meta.IntOf(int64(i))}
	}
	for _, withLog := range []bool{false, true} {
		dir := t.TempDir()
		path := filepath.Join(dir, "s.umbra")
		src, err := engine.New(ctx, engine.Config{Dim: dim, Device: engine.CPU})
		require.NoError(t, err)
		_, err = src.Add(ctx, umbra.Vectors(base), umbra.WithIDs(ids(0, len(base))...), umbra.WithKeys(keys...), umbra.WithMeta(metas...))
		require.NoError(t, err)
		require.NoError(t, src.Save(ctx, path)) // a base, no log
		require.NoError(t, src.Close())
		if withLog {
			ix, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
			require.NoError(t, err)
			require.NoError(t, ix.Delete(ctx, umbra.WithIDs(19)))
			require.NoError(t, ix.Close())
		}
		before := testkit.DirFiles(t, dir)
		require.Equal(t, withLog, before["s.umbra.log"] != "", "the log is there, or not")
		for _, c := range refusals {
			ix, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
			require.NoError(t, err)
			require.ErrorIs(t, c.do(ix), c.is, c.name)
			require.NoError(t, ix.Close(), c.name)
			require.Equal(t, before, testkit.DirFiles(t, dir), "%s (log before: %v): the store's files changed", c.name, withLog)
		}
		ix, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
		require.NoError(t, err)
		hits, err := ix.Search(ctx, base[3], 1)
		require.NoError(t, err)
		require.Equal(t, uint64(3), hits[0].ID)
		_, err = ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 1, dim)), umbra.WithKeys("later"))
		require.NoError(t, err)
		require.NoError(t, ix.Close())
		ix, err = engine.Open(ctx, path, engine.Config{Device: engine.CPU})
		require.NoError(t, err)
		_, ok := ix.Lookup("later")
		require.True(t, ok, "the good write after the refusals was logged")
		require.NoError(t, ix.Close())
	}
}

// ids is from, from+1, ..., from+n-1.
func ids(from, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(from + i)
	}
	return out
}
