package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// Every command that reads runs once against a store or a collection: get
// and export work on a collection too, and give what they give for a
// store of the same rows (IDs given, so the two agree on them); info and
// search on a collection report its real rows and its backend; --near
// and --vector give a search its query without a file, alike on both.
func TestCommandsOnACollectionAsOnAStore(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS server (skipped under -short)")
	}
	dir, srv, _, _ := testCluster(t, 1)
	rng := testkit.Rand(t)
	const n, dim = 120, 6
	data := writeMatrix(t, dir, "v.npy", randomMatrix(rng, n, dim), "")
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(7*i + 3)
	}
	idsFile := writeIDsText(t, dir, "ids.txt", ids)
	_, metaF, payF, _ := memoryFiles(t, dir, n)
	store := filepath.Join(dir, "s.umbra")
	at := []string{"--cluster", srv.URL(), "--creds", srv.ClientCreds(), "--collection", "same"}
	ok(t, runUmbra(t, "build", "--data", data, "--ids", idsFile, "--meta", metaF, "--payload", payF, "--out", store))
	ok(t, runUmbra(t, append([]string{"build", "--shards", "3", "--data", data, "--ids", idsFile, "--meta", metaF, "--payload", payF}, at...)...))

	// get: the same vectors, metadata and payloads, in the order given.
	g1 := ok(t, runUmbra(t, "get", store, "--ids", "24,3,738", "--json")).stdout
	g2 := ok(t, runUmbra(t, append([]string{"get", "--ids", "24,3,738", "--json"}, at...)...)).stdout
	var a, b getJSON
	require.NoError(t, json.Unmarshal([]byte(g1), &a))
	require.NoError(t, json.Unmarshal([]byte(g2), &b))
	assert.Equal(t, a.Vectors, b.Vectors)
	assert.Equal(t, "same", b.Collection)
	line := requireErrorLine(t, runUmbra(t, append([]string{"get", "--ids", "3,4"}, at...)...))
	assert.Contains(t, line, "ID 4 is not stored in collection same")

	// export: the same files.
	for _, src := range []struct {
		name string
		args []string
	}{{"store", []string{store}}, {"collection", at}} {
		out := filepath.Join(dir, src.name)
		ok(t, runUmbra(t, append([]string{"export", "--out", out + ".npy", "--ids-out", out + "-ids.npy", "--meta-out", out + "-meta.jsonl", "--payload-out", out + "-pay.jsonl"}, src.args...)...))
	}
	for _, suffix := range []string{".npy", "-ids.npy", "-meta.jsonl", "-pay.jsonl"} {
		assert.True(t, bytes.Equal(mustRead(t, filepath.Join(dir, "store"+suffix)), mustRead(t, filepath.Join(dir, "collection"+suffix))), "export %s", suffix)
	}

	// info: the collection's real rows and backend.
	info := ok(t, runUmbra(t, append([]string{"info", "--json"}, at...)...)).stdout
	var ci struct {
		Count   int    `json:"count"`
		Backend string `json:"backend"`
	}
	require.NoError(t, json.Unmarshal([]byte(info), &ci))
	assert.Equal(t, n, ci.Count)
	assert.Contains(t, ci.Backend, "3 shards")

	// search: the same hits, the real rows and backend in the header.
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 3, dim), "")
	s1 := decodeSearch(t, ok(t, runUmbra(t, "search", "--store", store, "--queries", queries, "--k", "5", "--json")))
	s2 := decodeSearch(t, ok(t, runUmbra(t, append([]string{"search", "--queries", queries, "--k", "5", "--json"}, at...)...)))
	assert.Equal(t, s1.Results, s2.Results)
	assert.Equal(t, n, s2.Rows)
	assert.Equal(t, "cluster", s2.Backend)
	text := ok(t, runUmbra(t, append([]string{"search", "--queries", queries, "--k", "5"}, at...)...)).stdout
	assert.Contains(t, text, "# backend cluster at ")
	assert.Contains(t, text, fmt.Sprintf("collection same: %d vectors", n))
	assert.NotContains(t, text, "backend cpu ()")

	// --vector: an inline query, the same answer as from a file.
	q := randomMatrix(rng, 1, dim)
	var parts []string
	for _, x := range q.Row(0) {
		parts = append(parts, fmt.Sprint(x))
	}
	qFile := writeMatrix(t, dir, "q1.npy", q, "")
	fromFile := decodeSearch(t, ok(t, runUmbra(t, "search", "--store", store, "--queries", qFile, "--k", "4", "--json")))
	for _, args := range [][]string{{"--store", store}, at, {"--data", data}} {
		inline := decodeSearch(t, ok(t, runUmbra(t, append([]string{"search", "--vector=" + strings.Join(parts, ","), "--k", "4", "--json"}, args...)...)))
		if args[0] == "--data" {
			require.Len(t, inline.Results[0].Hits, 4) // row numbers, not the store's IDs
			continue
		}
		assert.Equal(t, fromFile.Results, inline.Results, "--vector with %v", args[0])
	}
	r := runUmbra(t, "search", "--store", store, "--vector", "1,x", "--k", "3")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, requireErrorLine(t, r), `component 2 is "x"`)
}

// --near KEY searches with the vector stored under KEY: it finds itself
// first, on a store and on a collection; a key not stored is named.
func TestSearchNearAKey(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS server (skipped under -short)")
	}
	dir, srv, _, _ := testCluster(t, 1)
	rng := testkit.Rand(t)
	const n, dim = 60, 5
	data := writeMatrix(t, dir, "v.npy", randomMatrix(rng, n, dim), "")
	var keys bytes.Buffer
	for i := range n {
		fmt.Fprintf(&keys, "doc/%d\n", i)
	}
	keysFile := writeFile(t, dir, "keys.txt", keys.Bytes())
	store := filepath.Join(dir, "k.umbra")
	at := []string{"--cluster", srv.URL(), "--creds", srv.ClientCreds(), "--collection", "near"}
	ok(t, runUmbra(t, "build", "--data", data, "--keys", keysFile, "--out", store))
	ok(t, runUmbra(t, append([]string{"build", "--shards", "2", "--data", data, "--keys", keysFile}, at...)...))
	var firsts []string
	for _, args := range [][]string{{"--store", store}, at} {
		s := decodeSearch(t, ok(t, runUmbra(t, append([]string{"search", "--near", "doc/17", "--k", "3", "--json"}, args...)...)))
		require.Len(t, s.Results, 1)
		require.Len(t, s.Results[0].Hits, 3)
		assert.Equal(t, "doc/17", s.Results[0].Hits[0].Key, "the key's own vector ranks first")
		assert.Equal(t, "doc/17", s.Near)
		var ks []string
		for _, h := range s.Results[0].Hits {
			ks = append(ks, h.Key)
		}
		firsts = append(firsts, strings.Join(ks, " "))
		line := requireErrorLine(t, runUmbra(t, append([]string{"search", "--near", "doc/none", "--k", "3"}, args...)...))
		assert.Contains(t, line, `key "doc/none" is not stored in`)
	}
	assert.Equal(t, firsts[0], firsts[1], "the same neighbours by key on a store and a collection")
	r := runUmbra(t, "search", "--data", data, "--near", "doc/1", "--k", "3")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, requireErrorLine(t, r), "--near needs --store or --cluster")
}
