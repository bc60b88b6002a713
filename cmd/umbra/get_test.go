package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
)

// TestGet: get prints the stored vectors, IDs and keys of the IDs or keys
// asked for, in their order, as text and JSON; an unknown or repeated one
// is an error naming it; it reads beside a writer.
func TestGet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n, dim = 12, 3
	store, m, keys := keyedStore(t, dir, n, dim, func(i int) bool { return i%2 == 1 })
	decode := func(r result) getJSON {
		t.Helper()
		var g getJSON
		require.NoError(t, json.Unmarshal([]byte(ok(t, r).stdout), &g), r.stdout)
		return g
	}
	g := decode(runUmbra(t, "get", store, "--keys", keys[5]+","+keys[1], "--json"))
	assert.Equal(t, store, g.Store)
	assert.Equal(t, dim, g.Dim)
	assert.Equal(t, "l2", g.Metric)
	require.Len(t, g.Vectors, 2)
	for j, i := range []int{5, 1} {
		assert.Equal(t, storedJSON{ID: uint64(100 + i), Key: keys[i], Vector: m.Row(i)}, g.Vectors[j], "l2 keeps vectors as given")
	}
	g = decode(runUmbra(t, "get", store, "--ids", "102,103", "--json"))
	require.Len(t, g.Vectors, 2)
	assert.Empty(t, g.Vectors[0].Key, "ID 102 has no key")
	assert.Equal(t, keys[3], g.Vectors[1].Key)
	assert.Equal(t, m.Row(2), g.Vectors[0].Vector)

	text := ok(t, runUmbra(t, "get", store, "--ids", "103,102"))
	lines := strings.Split(strings.TrimSpace(text.stdout), "\n")
	require.Len(t, lines, 4, text.stdout)
	assert.True(t, strings.HasPrefix(lines[0], "# store "+store), lines[0])
	assert.Equal(t, []string{"id", "key", "vector"}, strings.Fields(lines[1]))
	assert.True(t, strings.HasPrefix(lines[2], "103  "+keys[3]+"  "), lines[2])
	for j, x := range m.Row(2) {
		f := strings.Fields(lines[3])
		assert.Equal(t, strconv.FormatFloat(float64(x), 'g', -1, 32), f[1+j])
	}

	// Beside a writer: read-only, and it sees the writer's acknowledged add.
	w, err := engine.Open(context.Background(), store, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	_, err = w.Add(context.Background(), umbra.Vectors([][]float32{{1, 2, 3}}), umbra.WithKeys("late"))
	require.NoError(t, err)
	g = decode(runUmbra(t, "get", store, "--keys", "late", "--json"))
	assert.Equal(t, []float32{1, 2, 3}, g.Vectors[0].Vector)
	require.NoError(t, w.Close())

	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unknown keys", []string{"--keys", keys[1] + ",nobody"}, exitFailure, []string{"--keys", `key "nobody" is not stored in`}},
		{"unknown ids", []string{"--ids", "100,5,6"}, exitFailure, []string{"--ids", "2 IDs (5, 6) are not stored"}},
		{"a key twice", []string{"--keys", keys[1] + "," + keys[1]}, exitFailure, []string{"given twice (entries 1 and 2)"}},
		{"an ID twice", []string{"--ids", "101,102,101"}, exitFailure, []string{"ID 101 is given twice (entries 1 and 3)"}},
		{"both", []string{"--ids", "101", "--keys", keys[1]}, exitUsage, []string{"--ids and --keys exclude each other"}},
		{"neither", nil, exitUsage, []string{"--ids 1,2,3 or --keys a,b"}},
		{"a bad ID", []string{"--ids", "1,x"}, exitUsage, []string{"--ids", "entry 2"}},
		{"an empty key", []string{"--keys", ","}, exitUsage, []string{"--keys", "entry 1 is empty"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runUmbra(t, append([]string{"get", store}, tc.args...)...)
			require.Equal(t, tc.code, r.code, "%s", r)
			line := requireErrorLine(t, r)
			for _, w := range tc.want {
				assert.Contains(t, line, w)
			}
			assert.Empty(t, r.stdout, "nothing printed")
		})
	}
	r := runUmbra(t, "get", filepath.Join(dir, "none.umbra"), "--ids", "1")
	require.Equal(t, exitFailure, r.code, "%s", r)
	assert.Contains(t, requireErrorLine(t, r), "no store at")
}
