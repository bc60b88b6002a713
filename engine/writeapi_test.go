package engine_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// streamRows is a RowSource read a piece at a time, as a file is: it gives
// at most piece rows per ReadRows and, with unknown set, does not tell its
// row count (Rows -1), as a pipe does not.
type streamRows struct {
	vs      [][]float32
	dim     int
	piece   int
	unknown bool
	next    int
}

func (s *streamRows) Dim() int { return s.dim }

func (s *streamRows) Rows() int {
	if s.unknown {
		return -1
	}
	return len(s.vs)
}

func (s *streamRows) ReadRows(dst []float32) (int, error) {
	if s.next >= len(s.vs) {
		return 0, io.EOF
	}
	n := 0
	for n < s.piece && n < len(dst)/s.dim && s.next < len(s.vs) {
		copy(dst[n*s.dim:], s.vs[s.next])
		n++
		s.next++
	}
	return n, nil
}

// sources are the kinds of RowSource a write takes, each over the same
// rows.
func sources(vs [][]float32, dim int) map[string]func() umbra.RowSource {
	flat := make([]float32, 0, len(vs)*dim)
	for _, v := range vs {
		flat = append(flat, v...)
	}
	return map[string]func() umbra.RowSource{
		"vectors":        func() umbra.RowSource { return umbra.Vectors(vs) },
		"flat":           func() umbra.RowSource { return umbra.Flat(flat, dim) },
		"stream":         func() umbra.RowSource { return &streamRows{vs: vs, dim: dim, piece: 3} },
		"stream-unknown": func() umbra.RowSource { return &streamRows{vs: vs, dim: dim, piece: 2, unknown: true} },
	}
}

// TestWriteVerbsOnEverySource: Add and Upsert, unnamed, under IDs and
// under keys, on every kind of source, store exactly what the same write
// of plain vectors stores, and an Upsert by a source replaces stored rows
// in place and adds the rest.
func TestWriteVerbsOnEverySource(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 6
	first := testkit.Vectors(r, 9, dim)
	second := testkit.Vectors(r, 9, dim)
	ids := []uint64{50, 7, 12, 3, 99, 1000, 8, 9, 10}
	keys := make([]string, len(first))
	for i := range keys {
		keys[i] = fmt.Sprintf("doc/%d", i)
	}
	// Upserts over the first rows: four replace stored rows, five add.
	upIDs := []uint64{7, 3, 1000, 10, 1, 2, 4, 5, 6}
	upKeys := []string{"doc/1", "doc/3", "doc/5", "doc/8", "new/a", "new/b", "new/c", "new/d", "new/e"}
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for name, src := range sources(first, dim) {
				up := sources(second, dim)[name]
				for _, naming := range []string{"assigned", "ids", "keys"} {
					what := name + "/" + naming
					ix := open(t, b, engine.Config{Dim: dim, Metric: umbra.L2})
					want := map[uint64][]float32{}
					switch naming {
					case "assigned":
						got, err := ix.Add(ctx, src())
						require.NoError(t, err, what)
						require.Len(t, got, len(first), what)
						for i, id := range got {
							require.Equal(t, uint64(i), id, what)
							want[id] = first[i]
						}
						_, err = ix.Upsert(ctx, up())
						require.ErrorIs(t, err, umbra.ErrInvalidOption, "%s: an Upsert names what it replaces", what)
					case "ids":
						got, err := ix.Add(ctx, src(), umbra.WithIDs(ids...))
						require.NoError(t, err, what)
						require.Equal(t, ids, got, what)
						for i, id := range ids {
							want[id] = first[i]
						}
						got, err = ix.Upsert(ctx, up(), umbra.WithIDs(upIDs...))
						require.NoError(t, err, what)
						require.Equal(t, upIDs, got, what)
						for i, id := range upIDs {
							want[id] = second[i]
						}
					case "keys":
						got, err := ix.Add(ctx, src(), umbra.WithKeys(keys...))
						require.NoError(t, err, what)
						added := map[string]uint64{}
						for i, id := range got {
							k, ok := ix.KeyOf(id)
							require.True(t, ok, what)
							require.Equal(t, keys[i], k, what)
							want[id] = first[i]
							added[keys[i]] = id
						}
						got, err = ix.Upsert(ctx, up(), umbra.WithKeys(upKeys...))
						require.NoError(t, err, what)
						for i, id := range got {
							stored, ok := ix.Lookup(upKeys[i])
							require.True(t, ok, what)
							require.Equal(t, stored, id, what)
							want[id] = second[i]
						}
						for i, key := range upKeys {
							if before, ok := added[key]; ok {
								require.Equal(t, before, got[i], "%s: the upserted key %q keeps the ID Add gave it", what, key)
							}
						}
					}
					require.Equal(t, len(want), ix.Len(), what)
					for id, v := range want {
						stored, err := ix.Vector(id)
						require.NoError(t, err, what)
						require.Equal(t, v, stored, "%s: ID %d", what, id)
					}
					// The searches agree with the stored rows.
					data, order := make([][]float32, 0, len(want)), make([]uint64, 0, len(want))
					for _, id := range ix.IDs() {
						data, order = append(data, want[id]), append(order, id)
					}
					q := testkit.Vectors(r, 1, dim)[0]
					hits, err := ix.Search(ctx, q, len(want))
					require.NoError(t, err, what)
					byRow := make([]umbra.Hit, len(hits))
					pos := map[uint64]int{}
					for i, id := range order {
						pos[id] = i
					}
					for i, h := range hits {
						key, _ := ix.KeyOf(h.ID)
						require.Equal(t, key, h.Key, "%s: a hit carries its row's key", what)
						if naming == "keys" {
							require.NotEmpty(t, h.Key, what)
						}
						byRow[i] = umbra.Hit{ID: uint64(pos[h.ID]), Score: h.Score}
					}
					if naming == "keys" {
						ranged, err := ix.SearchRange(ctx, q, 1e9)
						require.NoError(t, err, what)
						for _, h := range ranged {
							require.NotEmpty(t, h.Key, "%s: a range hit carries its key", what)
						}
						batch, err := ix.SearchBatch(ctx, [][]float32{q}, 2)
						require.NoError(t, err, what)
						require.Equal(t, hits[:2], batch[0], "%s: a batch hit carries its key", what)
					}
					checkHits(t, umbra.L2, data, q, len(want), byRow)
				}
			}
		})
	}
}

// TestWriteOptionsRefused: names that cannot pair with the rows, two ways
// of naming outside an Add, an unnamed Upsert or Delete, a nil source and a ragged Flat
// are errors naming the problem, and nothing is stored or deleted.
func TestWriteOptionsRefused(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 4
	ctx := context.Background()
	ix := open(t, backends[0], engine.Config{Dim: dim})
	stored := testkit.Vectors(r, 3, dim)
	_, err := ix.Add(ctx, umbra.Vectors(stored), umbra.WithKeys("a", "b", "c"))
	require.NoError(t, err)
	rows := testkit.Vectors(r, 2, dim)
	for name, src := range sources(rows, dim) {
		cases := []struct {
			what string
			call func() error
			want error
		}{
			{"an upsert by ids and keys", func() error {
				_, err := ix.Upsert(ctx, src(), umbra.WithIDs(10, 11), umbra.WithKeys("x", "y"))
				return err
			}, umbra.ErrInvalidOption},
			{"keys twice", func() error {
				_, err := ix.Add(ctx, src(), umbra.WithKeys("x", "y"), umbra.WithKeys("z", "w"))
				return err
			}, umbra.ErrInvalidOption},
			{"ids and keys, a stored ID", func() error {
				_, err := ix.Add(ctx, src(), umbra.WithIDs(10, 0), umbra.WithKeys("x", "y"))
				return err
			}, umbra.ErrIDExists},
			{"ids and keys, a stored key", func() error {
				_, err := ix.Add(ctx, src(), umbra.WithIDs(10, 11), umbra.WithKeys("x", "b"))
				return err
			}, umbra.ErrKeyExists},
			{"ids and keys, too few keys", func() error {
				_, err := ix.Add(ctx, src(), umbra.WithIDs(10, 11), umbra.WithKeys("x"))
				return err
			}, umbra.ErrIDCount},
			{"ids twice", func() error {
				_, err := ix.Add(ctx, src(), umbra.WithIDs(10, 11), umbra.WithIDs(12, 13))
				return err
			}, umbra.ErrInvalidOption},
			{"too few ids", func() error { _, err := ix.Add(ctx, src(), umbra.WithIDs(10)); return err }, umbra.ErrIDCount},
			{"too many keys", func() error {
				_, err := ix.Upsert(ctx, src(), umbra.WithKeys("x", "y", "z"))
				return err
			}, umbra.ErrIDCount},
			{"an ID twice", func() error { _, err := ix.Add(ctx, src(), umbra.WithIDs(10, 10)); return err }, umbra.ErrDuplicateID},
			{"a key twice", func() error { _, err := ix.Upsert(ctx, src(), umbra.WithKeys("x", "x")); return err }, umbra.ErrDuplicateID},
			{"a stored key", func() error { _, err := ix.Add(ctx, src(), umbra.WithKeys("x", "a")); return err }, umbra.ErrKeyExists},
			{"an empty key", func() error { _, err := ix.Add(ctx, src(), umbra.WithKeys("x", "")); return err }, umbra.ErrInvalidKey},
			{"a key with a line break", func() error { _, err := ix.Upsert(ctx, src(), umbra.WithKeys("x", "y\n")); return err }, umbra.ErrInvalidKey},
			{"an unnamed upsert", func() error { _, err := ix.Upsert(ctx, src()); return err }, umbra.ErrInvalidOption},
		}
		for _, c := range cases {
			err := c.call()
			require.ErrorIs(t, err, c.want, "%s, %s", name, c.what)
			require.Equal(t, 3, ix.Len(), "%s, %s: nothing stored", name, c.what)
			_, ok := ix.Lookup("x")
			require.False(t, ok, "%s, %s", name, c.what)
		}
	}
	_, err = ix.Add(ctx, nil)
	require.ErrorIs(t, err, umbra.ErrSource)
	_, err = ix.Add(ctx, umbra.Flat(make([]float32, 2*dim+1), dim))
	require.ErrorIs(t, err, umbra.ErrDimMismatch, "a Flat of 9 values is not whole rows of 4")
	_, err = ix.Add(ctx, umbra.Flat(make([]float32, 2*(dim+1)), dim+1))
	require.ErrorIs(t, err, umbra.ErrDimMismatch)
	_, err = ix.Add(ctx, umbra.Vectors([][]float32{rows[0], rows[1][:dim-1]}))
	require.ErrorIs(t, err, umbra.ErrDimMismatch)
	require.ErrorContains(t, err, "vector 1")
	require.ErrorIs(t, ix.Delete(ctx), umbra.ErrInvalidOption, "a Delete names what it deletes")
	require.ErrorIs(t, ix.Delete(ctx, umbra.WithIDs(0), umbra.WithKeys("a")), umbra.ErrInvalidOption)
	require.ErrorIs(t, ix.Delete(ctx, umbra.WithKeys("a", "nope")), umbra.ErrNotFound)
	require.ErrorIs(t, ix.Delete(ctx, umbra.WithIDs(0, 0)), umbra.ErrDuplicateID)
	require.Equal(t, 3, ix.Len(), "nothing deleted")
	require.NoError(t, ix.Delete(ctx, umbra.WithKeys("a"), nil))
	require.Equal(t, 2, ix.Len())
}

// TestSearchOptionsRefused: an option a search cannot honour is an error,
// not ignored.
func TestSearchOptionsRefused(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	ix := open(t, backends[0], engine.Config{Dim: 5, Precision: umbra.Int8})
	data := testkit.Vectors(r, 20, 5)
	_, err := ix.Add(ctx, umbra.Vectors(data))
	require.NoError(t, err)
	_, err = ix.Search(ctx, data[0], 3, umbra.MaxHits(2))
	require.ErrorIs(t, err, umbra.ErrInvalidOption)
	_, err = ix.SearchBatch(ctx, data[:2], 3, umbra.MaxHits(2))
	require.ErrorIs(t, err, umbra.ErrInvalidOption)
	_, err = ix.SearchRange(ctx, data[0], 0.5, umbra.Approximate())
	require.ErrorIs(t, err, umbra.ErrInvalidOption)
	hits, err := ix.SearchRange(ctx, data[0], -2, umbra.MaxHits(4))
	require.NoError(t, err)
	require.Len(t, hits, 4, "every stored row is within -2 of a cosine query; MaxHits keeps 4")
	hits, err = ix.Search(ctx, data[0], 3, umbra.Approximate())
	require.NoError(t, err)
	require.Len(t, hits, 3)
}

// TestOpenConfig: Config.ReadOnly opens beside a writer and refuses
// writes; Config.LogSync is taken by a writer and refused where it cannot
// apply, as both are by New.
func TestOpenConfig(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.umbra")
	_, err := engine.Open(ctx, path, engine.Config{Dim: 3, LogSync: -time.Second})
	require.ErrorIs(t, err, umbra.ErrInvalidConfig)
	_, err = engine.Open(ctx, path, engine.Config{Dim: 3, ReadOnly: true})
	require.Error(t, err, "a read-only open creates nothing")
	w, err := engine.Open(ctx, path, engine.Config{Dim: 3, Device: engine.CPU, LogSync: time.Hour})
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Add(ctx, umbra.Vectors(testkit.Vectors(r, 4, 3)))
	require.NoError(t, err)
	_, err = engine.Open(ctx, path, engine.Config{ReadOnly: true, LogSync: time.Second})
	require.ErrorIs(t, err, umbra.ErrInvalidConfig)
	// New makes no store: the store's fields are refused there by name.
	_, err = engine.New(ctx, engine.Config{Dim: 3, ReadOnly: true})
	require.ErrorIs(t, err, umbra.ErrInvalidConfig)
	require.ErrorContains(t, err, "ReadOnly")
	_, err = engine.New(ctx, engine.Config{Dim: 3, LogSync: time.Second})
	require.ErrorIs(t, err, umbra.ErrInvalidConfig)
	require.ErrorContains(t, err, "LogSync")
	ro, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU, ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	require.Equal(t, 4, ro.Len(), "the writer's acknowledged rows, read beside it")
	_, err = ro.Add(ctx, umbra.Vectors(testkit.Vectors(r, 1, 3)))
	require.ErrorIs(t, err, engine.ErrReadOnly)
	require.ErrorIs(t, ro.Delete(ctx, umbra.WithIDs(0)), engine.ErrReadOnly)
}

// TestAdaptersValidated: a bad entry of Config.Adapters is named by its
// position.
func TestAdaptersValidated(t *testing.T) {
	_, err := engine.New(context.Background(), engine.Config{Dim: 2, Adapters: []engine.AdapterSelect{{}, {Backend: "glide"}}})
	require.ErrorIs(t, err, umbra.ErrInvalidConfig)
	require.ErrorContains(t, err, "adapter 1")
	_, err = engine.New(context.Background(), engine.Config{Dim: 2, Limits: engine.Limits{MaxRows: -1}})
	require.ErrorIs(t, err, umbra.ErrInvalidConfig)
	_, err = engine.New(context.Background(), engine.Config{Dim: 2, Coalesce: engine.Coalesce{Wait: -1}})
	require.ErrorIs(t, err, umbra.ErrInvalidConfig)
}

// TestOpenRefusesAnotherMetricOrPrecision: a store keeps its metric and
// precision; a config that names others is refused, and the zero values
// take the store's.
func TestOpenRefusesAnotherMetricOrPrecision(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.umbra")
	st, err := engine.Open(ctx, path, engine.Config{Dim: 3, Metric: umbra.L2, Precision: umbra.Int8, Device: engine.CPU})
	require.NoError(t, err)
	_, err = st.Add(ctx, umbra.Vectors(testkit.Vectors(r, 5, 3)))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	for _, cfg := range []engine.Config{
		{Metric: umbra.Dot, Device: engine.CPU},
		{Precision: umbra.F16, Device: engine.CPU},
		{Dim: 4, Device: engine.CPU},
	} {
		_, err := engine.Open(ctx, path, cfg)
		require.ErrorIs(t, err, umbra.ErrInvalidConfig, "%+v", cfg)
		ro := cfg
		ro.ReadOnly = true
		_, err = engine.Open(ctx, path, ro)
		require.ErrorIs(t, err, umbra.ErrInvalidConfig, "read-only, %+v", cfg)
	}
	st, err = engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	defer st.Close()
	require.Equal(t, umbra.L2, st.Metric())
	require.Equal(t, umbra.Int8, st.Info().Precision)
	require.Equal(t, 5, st.Len())
}

// TestClusterOptionsRefusedLocally: the options only a cluster collection
// honours are refused by an index, naming them, never ignored; so is one
// given twice, with the same words as a collection's.
func TestClusterOptionsRefusedLocally(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	ix := open(t, backends[0], engine.Config{Dim: 4})
	data := testkit.Vectors(r, 10, 4)
	_, err := ix.Add(ctx, umbra.Vectors(data))
	require.NoError(t, err)
	for name, opt := range map[string]umbra.SearchOption{"Eventual": umbra.Eventual(), "AfterToken": umbra.AfterToken([]uint64{1})} {
		_, err = ix.Search(ctx, data[0], 3, opt)
		require.ErrorIs(t, err, umbra.ErrInvalidOption, name)
		assert.Contains(t, err.Error(), name)
	}
	for name, opt := range map[string]umbra.WriteOption{"NoWait": umbra.NoWait(), "IdempotencyKey": umbra.IdempotencyKey("k1")} {
		_, err = ix.Add(ctx, umbra.Vectors(data[:1]), opt)
		require.ErrorIs(t, err, umbra.ErrInvalidOption, name)
		assert.Contains(t, err.Error(), name)
	}
	_, err = ix.Search(ctx, data[0], 3, umbra.Allow(1), umbra.Allow(2))
	require.ErrorIs(t, err, umbra.ErrInvalidOption)
	assert.Contains(t, err.Error(), "Allow given twice")
	_, err = ix.SearchRange(ctx, data[0], 0.5, umbra.MaxHits(-1))
	require.ErrorIs(t, err, umbra.ErrInvalidOption)
	assert.Equal(t, 10, ix.Len(), "nothing refused was stored")
}
