package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// TestRefusedAddLeavesTheStore: an add (or delete) refused for its input —
// a NaN row, vectors of another dimension, a key already stored or given
// twice, metadata of another kind, an ID not stored — leaves the store's
// directory as it was, file for file and byte for byte: in particular no
// empty STORE.log appears beside a store that had none. The store still
// opens and answers, and takes the next good add.
func TestRefusedAddLeavesTheStore(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	const n, dim = 12, 4
	in := t.TempDir() // the inputs, apart from the store's directory
	data := writeMatrix(t, in, "v.npy", randomMatrix(rng, n, dim), "")
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "doc/" + string(rune('a'+i))
	}
	store := filepath.Join(dir, "s.umbra")
	ok(t, runUmbra(t, "build", "--data", data, "--keys", writeKeys(t, in, "keys.txt", keys...), "--out", store,
		"--meta", writeFile(t, in, "m.jsonl", []byte(repeatLine(`{"n": 1}`, n)))))
	nanRows := randomMatrix(rng, 3, dim)
	nanRows.Data[1*dim+2] = float32(math.NaN())
	nanData := writeMatrix(t, in, "nan.npy", nanRows, "")
	three := writeMatrix(t, in, "three.npy", randomMatrix(rng, 3, dim), "")
	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"a NaN row", []string{"add", store, "--data", nanData}, "NaN"},
		{"a NaN row by key", []string{"add", store, "--data", nanData, "--keys", writeKeys(t, in, "k3.txt", "x", "y", "z")}, "NaN"},
		{"another dimension", []string{"add", store, "--data", writeMatrix(t, in, "d5.npy", randomMatrix(rng, 3, dim+1), "")}, "dimension"},
		{"a stored key", []string{"add", store, "--data", three, "--keys", writeKeys(t, in, "ks.txt", "x", keys[4], "z")}, keys[4]},
		{"a key given twice", []string{"add", store, "--data", three, "--keys", writeKeys(t, in, "kd.txt", "x", "y", "x")}, "given twice"},
		{"a stored key, upserted with a NaN row", []string{"add", store, "--upsert", "--data", nanData, "--keys", writeKeys(t, in, "ku.txt", keys[0], "y", "z")}, "NaN"},
		{"metadata of another kind", []string{"add", store, "--data", three, "--meta", writeFile(t, in, "mk.jsonl", []byte(repeatLine(`{"n": "x"}`, 3)))}, "--meta"},
		{"a lone surrogate in metadata", []string{"add", store, "--data", three, "--meta", writeFile(t, in, "ms.jsonl", []byte(repeatLine(`{"s": "\ud800"}`, 3)))}, "surrogate"},
		{"a delete of an ID not stored", []string{"delete", store, "--ids", "999"}, "999"},
	} {
		before := testkit.DirFiles(t, dir)
		r := runUmbra(t, c.args...)
		require.Equal(t, exitFailure, r.code, "%s\n%s", c.name, r)
		require.Contains(t, requireErrorLine(t, r), c.says, c.name)
		require.Equal(t, before, testkit.DirFiles(t, dir), "%s: the store's directory changed", c.name)
		require.NoFileExists(t, store+".log", c.name)
	}
	q := writeMatrix(t, in, "q.npy", randomMatrix(rng, 1, dim), "")
	ok(t, runUmbra(t, "search", "--store", store, "--queries", q, "--k", "3"))
	ok(t, runUmbra(t, "add", store, "--data", three))
	require.FileExists(t, store+".log", "a good add is logged")
	logged := testkit.DirFiles(t, dir)
	r := runUmbra(t, "add", store, "--data", nanData)
	require.Equal(t, exitFailure, r.code, "%s", r)
	require.Equal(t, logged, testkit.DirFiles(t, dir), "a refused add beside a log leaves it as it was")
	info := decodeInfo(t, ok(t, runUmbra(t, "info", store, "--json")))
	require.Equal(t, n+3, info.Count)
}

// repeatLine is line, n times, each ending in a newline.
func repeatLine(line string, n int) string {
	s := ""
	for range n {
		s += line + "\n"
	}
	return s
}
