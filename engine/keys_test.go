package engine_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/storefile"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestKeyRule: every write that stores keys, on every kind of source,
// refuses a key that breaks the rule (empty, not UTF-8, a line break,
// over 4096 bytes) with ErrInvalidKey naming the key and its vector, and
// stores nothing; a key at the limit is stored.
func TestKeyRule(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 4
	ctx := context.Background()
	rows := testkit.Vectors(r, 3, dim)
	long := strings.Repeat("k", 4097)
	bad := []struct{ key, says string }{
		{"", "empty"},
		{"a\nb", `"a\nb" holds a line break`},
		{"a\r", `"a\r" holds a line break`},
		{"bad\xffbyte", "not valid UTF-8"},
		{long, "4097 bytes, over 4096"},
	}
	for name, src := range sources(rows, dim) {
		ix := open(t, backends[0], engine.Config{Dim: dim})
		writes := map[string]func(keys []string) error{
			"add":    func(keys []string) error { _, err := ix.Add(ctx, src(), umbra.WithKeys(keys...)); return err },
			"upsert": func(keys []string) error { _, err := ix.Upsert(ctx, src(), umbra.WithKeys(keys...)); return err },
			"add with ids": func(keys []string) error {
				_, err := ix.Add(ctx, src(), umbra.WithIDs(7, 8, 9), umbra.WithKeys(keys...))
				return err
			},
		}
		for verb, write := range writes {
			for _, b := range bad {
				if b.key == "" && verb == "add with ids" {
					continue // there an empty key is a row without one
				}
				what := fmt.Sprintf("%s, %s of %q", name, verb, b.key[:min(len(b.key), 8)])
				err := write([]string{"ok", "fine", b.key})
				require.ErrorIs(t, err, umbra.ErrInvalidKey, what)
				assert.Contains(t, err.Error(), "vector 2", what)
				assert.Contains(t, err.Error(), b.says, what)
				assert.Less(t, len(err.Error()), 400, "%s: a long key is cut in the message", what)
				require.Zero(t, ix.Len(), "%s: nothing stored", what)
				_, found := ix.Lookup("ok")
				require.False(t, found, what)
			}
		}
		atLimit := strings.Repeat("é", 2048) // 4096 bytes
		ids, err := ix.Add(ctx, src(), umbra.WithKeys("ok", atLimit, "ключ 🔑, with spaces"))
		require.NoError(t, err, name)
		id, found := ix.Lookup(atLimit)
		require.True(t, found, name)
		require.Equal(t, ids[1], id)
	}
}

// TestKeyErrorsNameKeys: a stored key, a key given twice and an unknown
// key are errors worded in keys (not IDs), each wrapping its sentinel.
func TestKeyErrorsNameKeys(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	ix := open(t, backends[0], engine.Config{Dim: 3})
	_, err := ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 2, 3)), umbra.WithKeys("alice/m1", "alice/m2"))
	require.NoError(t, err)
	_, err = ix.Add(ctx, umbra.Vectors(testkit.Vectors(r, 2, 3)), umbra.WithKeys("bob/m1", "alice/m2"))
	require.ErrorIs(t, err, umbra.ErrKeyExists)
	assert.False(t, errors.Is(err, umbra.ErrIDExists), "a stored key is not a stored ID")
	assert.Equal(t, `key already stored: "alice/m2" (vector 1); use Upsert to replace its vector`, err.Error())
	_, err = ix.Upsert(ctx, umbra.Vectors(testkit.Vectors(r, 2, 3)), umbra.WithKeys("x", "x"))
	require.ErrorIs(t, err, umbra.ErrDuplicateID)
	assert.Equal(t, `duplicate key: "x" is given for vectors 0 and 1`, err.Error())
	err = ix.Delete(ctx, umbra.WithKeys("alice/m1", "carol/m9"))
	require.ErrorIs(t, err, umbra.ErrNotFound)
	assert.Equal(t, `key not found: "carol/m9" (argument 1)`, err.Error())
	err = ix.Delete(ctx, umbra.WithKeys("alice/m1", "alice/m1"))
	require.ErrorIs(t, err, umbra.ErrDuplicateID)
	assert.Contains(t, err.Error(), `duplicate key: "alice/m1"`)
	require.Equal(t, 2, ix.Len(), "the refused calls changed nothing")
}

// TestAddUnderIDsAndKeys: an Add with WithIDs and WithKeys together stores
// every row under its ID and names it by its key, an empty key leaving the
// row without one, on every backend and kind of source; a store keeps them
// through its log and a checkpoint. Hits carry the keys.
func TestAddUnderIDsAndKeys(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 5
	ctx := context.Background()
	vs := testkit.Vectors(r, 6, dim)
	ids := []uint64{90, 3, 1 << 40, 17, 4, 5}
	keys := []string{"alice/m1", "", "bob/m1", "", "alice/m2", "carol/m1"}
	check := func(t *testing.T, ix *engine.Index, what string) {
		t.Helper()
		require.Equal(t, len(ids), ix.Len(), what)
		for i, id := range ids {
			key, found := ix.KeyOf(id)
			require.Equal(t, keys[i] != "", found, "%s: ID %d", what, id)
			require.Equal(t, keys[i], key, what)
			if keys[i] != "" {
				back, ok := ix.Lookup(keys[i])
				require.True(t, ok, what)
				require.Equal(t, id, back, what)
			}
		}
		_, found := ix.Lookup("")
		require.False(t, found, "%s: no row is named by the empty key", what)
		for i, id := range ids {
			hits, err := ix.Search(ctx, vs[i], 1)
			require.NoError(t, err)
			require.Equal(t, umbra.Hit{ID: id, Score: hits[0].Score, Key: keys[i]}, hits[0], "%s: row %d", what, i)
		}
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for name, src := range sources(vs, dim) {
				ix := open(t, b, engine.Config{Dim: dim, Metric: umbra.L2})
				got, err := ix.Add(ctx, src(), umbra.WithIDs(ids...), umbra.WithKeys(keys...))
				require.NoError(t, err, name)
				require.Equal(t, ids, got, name)
				check(t, ix, name)
				// Refused: nothing changes.
				more := testkit.Vectors(r, 2, dim)
				for _, c := range []struct {
					ids  []uint64
					keys []string
					want error
				}{
					{[]uint64{1, 3}, []string{"new", ""}, umbra.ErrIDExists},
					{[]uint64{1, 2}, []string{"", "bob/m1"}, umbra.ErrKeyExists},
					{[]uint64{1, 2}, []string{"x", "x"}, umbra.ErrDuplicateID},
					{[]uint64{1, 1}, []string{"", ""}, umbra.ErrDuplicateID},
					{[]uint64{1, 2}, []string{"x\ny", ""}, umbra.ErrInvalidKey},
					{[]uint64{1, 2}, []string{"x"}, umbra.ErrIDCount},
				} {
					_, err := ix.Add(ctx, umbra.Vectors(more), umbra.WithIDs(c.ids...), umbra.WithKeys(c.keys...))
					require.ErrorIs(t, err, c.want, "%s: %v %q", name, c.ids, c.keys)
				}
				check(t, ix, name+", after refused adds")
				// Two rows without a key are fine.
				_, err = ix.Add(ctx, umbra.Vectors(more), umbra.WithIDs(1, 2), umbra.WithKeys("", ""))
				require.NoError(t, err, name)
				_, found := ix.KeyOf(1)
				require.False(t, found)
			}
		})
	}

	t.Run("store", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.umbra")
		st, err := engine.Open(ctx, path, engine.Config{Dim: dim, Metric: umbra.L2, Device: engine.CPU})
		require.NoError(t, err)
		_, err = st.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...), umbra.WithKeys(keys...))
		require.NoError(t, err)
		require.NoError(t, st.Close())
		for _, step := range []string{"log", "checkpoint"} {
			st, err = engine.Open(ctx, path, engine.Config{Device: engine.CPU})
			require.NoError(t, err)
			check(t, st, "reopened from the "+step)
			if step == "log" {
				require.NoError(t, st.Checkpoint(ctx))
			}
			require.NoError(t, st.Close())
		}
	})
}

// TestKeysBeforeTheRule: a store written before the key rule may hold keys
// that break it (here "" and one with a line break): they are read, looked
// up, carried by hits and deleted as before; only a write that stores one
// again is refused.
func TestKeysBeforeTheRule(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.umbra")
	_, err := storefile.WriteBase(storefile.OS, path, &storefile.Snapshot{
		Dim: 2, Stride: 4, Metric: uint8(umbra.L2), Precision: storefile.PrecisionFloat32, NextID: 3,
		IDs:  []uint64{0, 1, 2},
		Rows: []float32{1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0},
		Keys: map[uint64]string{0: "", 1: "a\nb", 2: "fine"},
	})
	require.NoError(t, err)
	st, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	defer st.Close()
	for key, id := range map[string]uint64{"": 0, "a\nb": 1, "fine": 2} {
		got, ok := st.Lookup(key)
		require.True(t, ok, "%q", key)
		require.Equal(t, id, got)
	}
	hits, err := st.Search(ctx, []float32{0, 1}, 1)
	require.NoError(t, err)
	require.Equal(t, "a\nb", hits[0].Key)
	_, err = st.Upsert(ctx, umbra.Vectors([][]float32{{2, 2}}), umbra.WithKeys("a\nb"))
	require.ErrorIs(t, err, umbra.ErrInvalidKey, "a breaking key is not written again")
	require.NoError(t, st.Delete(ctx, umbra.WithKeys("a\nb", "")))
	require.Equal(t, 1, st.Len())
	_, ok := st.Lookup("a\nb")
	require.False(t, ok)
}
