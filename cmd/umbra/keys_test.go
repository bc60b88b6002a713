package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/storefile"
	"github.com/umbravec/umbra/internal/testkit"
)

// storeFiles is what a store's files hold, to check that a refused command
// changed nothing.
type storeFiles struct {
	base, log string
	logged    bool // the log exists
}

// readStoreFiles reads the store's files: its base and its log ("" and
// logged false while there is none: a built store gets one with its first
// change, never from a refused command).
func readStoreFiles(t *testing.T, store string) storeFiles {
	t.Helper()
	log, err := os.ReadFile(store + ".log")
	if errors.Is(err, fs.ErrNotExist) {
		return storeFiles{base: string(mustRead(t, store))}
	}
	require.NoError(t, err)
	return storeFiles{string(mustRead(t, store)), string(log), true}
}

// requireUnchanged fails when the store's files differ from before,
// without printing them.
func requireUnchanged(t *testing.T, before storeFiles, store string) {
	t.Helper()
	after := readStoreFiles(t, store)
	require.True(t, before.base == after.base, "the base file changed")
	require.Equal(t, before.logged, after.logged, "a log was made or removed")
	require.True(t, before.log == after.log, "the log changed (%d bytes, %d before)", len(after.log), len(before.log))
}

// writeKeys writes keys one per line.
func writeKeys(t *testing.T, dir, name string, keys ...string) string {
	t.Helper()
	return writeFile(t, dir, name, []byte(strings.Join(keys, "\n")+"\n"))
}

// keyedStore builds an l2 store of n random rows of dim under IDs 100, 101,
// … with keys "user-i/m" on the rows where keyed says so (an empty line in
// the key file otherwise), and returns it with its rows and keys.
func keyedStore(t *testing.T, dir string, n, dim int, keyed func(i int) bool) (store string, m *host.Matrix, keys []string) {
	t.Helper()
	rng := testkit.Rand(t)
	m = randomMatrix(rng, n, dim)
	ids := make([]uint64, n)
	keys = make([]string, n)
	for i := range n {
		ids[i] = uint64(100 + i)
		if keyed(i) {
			keys[i] = fmt.Sprintf("user-%d/m %d", i%3, i)
		}
	}
	store = filepath.Join(dir, "keyed.umbra")
	ok(t, runUmbra(t, "build", "--data", writeMatrix(t, dir, "keyed.npy", m, ""), "--ids", writeIDsText(t, dir, "keyed-ids.txt", ids),
		"--keys", writeKeys(t, dir, "keyed-keys.txt", keys...), "--metric", "l2", "--out", store))
	return store, m, keys
}

// TestSearchShowsKeys: hits on keyed rows carry their key in JSON ("key",
// left out for a row without one) and in the text table, which agree; a
// query with no hits has a line of its own in the text.
func TestSearchShowsKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n, dim, nq = 40, 6, 4
	store, _, keys := keyedStore(t, dir, n, dim, func(i int) bool { return i%4 != 0 })
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(testkit.Rand(t), nq, dim), "")
	args := []string{"search", "--store", store, "--queries", queries, "--k", strconv.Itoa(n), "--device", "cpu"}
	r := ok(t, runUmbra(t, append(args, "--json")...))
	s := decodeSearch(t, r)
	for _, res := range s.Results {
		require.Len(t, res.Hits, n)
		for _, h := range res.Hits {
			assert.Equal(t, keys[h.ID-100], h.Key, "ID %d", h.ID)
		}
	}
	// The raw JSON: "key" only where the row has one.
	var doc struct {
		Results []struct{ Hits []map[string]any }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	for _, h := range doc.Results[0].Hits {
		id := uint64(h["id"].(float64))
		if keys[id-100] == "" {
			assert.NotContains(t, h, "key", "ID %d has no key", id)
		} else {
			assert.Equal(t, keys[id-100], h["key"])
		}
	}
	text := ok(t, runUmbra(t, args...))
	assert.Equal(t, s.Results[0].Hits, parseSearchText(t, text.stdout, nq)[0], "text and JSON agree, keys included")
	for i, hits := range parseSearchText(t, text.stdout, nq) {
		assert.Equal(t, s.Results[i].Hits, hits, "query %d", i)
	}

	// No hits: every row filtered out, or none within the threshold.
	empty := writeFile(t, dir, "none.txt", nil)
	for _, extra := range [][]string{{"--allow-keys", empty}, {"--allow", empty}, {"--max-distance", "0"}} {
		text := ok(t, runUmbra(t, append(slices.Clone(args), extra...)...))
		got := parseSearchText(t, text.stdout, nq)
		for q := range nq {
			assert.Empty(t, got[q], "%v", extra)
			assert.Regexp(t, fmt.Sprintf(`\n%d +\(no hits\)\n`, q), text.stdout, "%v", extra)
		}
		s := decodeSearch(t, ok(t, runUmbra(t, append(append(slices.Clone(args), extra...), "--json")...)))
		for _, res := range s.Results {
			assert.NotNil(t, res.Hits, "JSON says [] for no hits")
			assert.Empty(t, res.Hits)
		}
	}
}

// TestAllowKeys: --allow-keys restricts a search to the keys in a file
// exactly as --allow does to their IDs (empty lines skipped, a key twice
// harmless); a key the store does not hold, a line breaking the key rule,
// --data, and --allow beside it are errors.
func TestAllowKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n, dim = 60, 5
	store, _, keys := keyedStore(t, dir, n, dim, func(i int) bool { return i%5 != 0 })
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(testkit.Rand(t), 3, dim), "")
	var pick []string
	var pickIDs []uint64
	for i, k := range keys {
		if k != "" && i%3 == 1 {
			pick, pickIDs = append(pick, k), append(pickIDs, uint64(100+i))
		}
	}
	body := "\n" + strings.Join(pick, "\n\n") + "\n" + pick[0] + "\n\n"
	allowKeys := writeFile(t, dir, "allow-keys.txt", []byte(body))
	search := func(extra ...string) searchJSON {
		t.Helper()
		args := append([]string{"search", "--store", store, "--queries", queries, "--k", "7", "--device", "cpu", "--json"}, extra...)
		return decodeSearch(t, ok(t, runUmbra(t, args...)))
	}
	byKeys := search("--allow-keys", allowKeys)
	byIDs := search("--allow", writeIDsText(t, dir, "allow-ids.txt", pickIDs))
	assert.Equal(t, byIDs.Results, byKeys.Results, "the keys' subset is their IDs' subset")
	assert.Equal(t, allowKeys, byKeys.AllowKeys)
	for _, res := range byKeys.Results {
		require.Len(t, res.Hits, 7)
		for _, h := range res.Hits {
			assert.Contains(t, pick, h.Key)
		}
	}
	text := ok(t, runUmbra(t, "search", "--store", store, "--queries", queries, "--k", "7", "--device", "cpu", "--allow-keys", allowKeys))
	assert.Contains(t, text.stdout, "only keys in "+allowKeys)

	queriesArg := []string{"search", "--store", store, "--queries", queries, "--k", "3"}
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"an unknown key", append(slices.Clone(queriesArg), "--allow-keys", writeKeys(t, dir, "unknown.txt", pick[0], "nobody/m1", "", "nobody/m2")), exitFailure,
			[]string{"--allow-keys", "unknown.txt", `2 keys ("nobody/m1", "nobody/m2") are not stored`, store}},
		{"a line breaking the rule", append(slices.Clone(queriesArg), "--allow-keys", writeKeys(t, dir, "binary.txt", pick[0], "bad\xffkey")), exitFailure,
			[]string{"--allow-keys", "binary.txt", "line 2", "not valid UTF-8", "non-empty UTF-8"}},
		{"with --data", []string{"search", "--data", writeMatrix(t, dir, "d.npy", randomMatrix(testkit.Rand(t), 4, dim), ""), "--queries", queries, "--k", "3", "--allow-keys", allowKeys}, exitUsage,
			[]string{"--allow-keys needs --store"}},
		{"with --allow", append(slices.Clone(queriesArg), "--allow-keys", allowKeys, "--allow", allowKeys), exitUsage,
			[]string{"--allow and --allow-keys exclude each other"}},
		{"a directory", append(slices.Clone(queriesArg), "--allow-keys", dir), exitFailure, []string{"--allow-keys", "is a directory"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runUmbra(t, tc.args...)
			require.Equal(t, tc.code, r.code, "%s", r)
			line := requireErrorLine(t, r)
			for _, w := range tc.want {
				assert.Contains(t, line, w)
			}
		})
	}
}

// TestDeleteByKeys: delete --keys and --keys-file remove exactly the keys'
// vectors; an unknown key, a key twice, a key breaking the rule, an empty
// entry, and --keys beside --ids are refused naming the problem, and leave
// the store's files as they were.
func TestDeleteByKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n, dim = 30, 4
	store, _, keys := keyedStore(t, dir, n, dim, func(i int) bool { return i != 7 })
	before := readStoreFiles(t, store)
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unknown keys", []string{"--keys", keys[1] + ",nobody/m1"}, exitFailure, []string{"--keys", `key "nobody/m1" is not stored in`, "nothing was deleted"}},
		{"a key twice in a list", []string{"--keys", keys[1] + "," + keys[2] + "," + keys[1]}, exitFailure,
			[]string{"--keys", fmt.Sprintf("key %q is given twice (entries 1 and 3)", keys[1]), "nothing was deleted"}},
		{"a key twice in a file", []string{"--keys-file", writeKeys(t, dir, "twice.txt", keys[1], "", keys[2], keys[1])}, exitFailure,
			[]string{"--keys-file", "twice.txt", fmt.Sprintf("key %q is given twice (lines 1 and 4)", keys[1])}},
		{"a file line breaking the rule", []string{"--keys-file", writeFile(t, dir, "long.txt", []byte(keys[1]+"\n"+strings.Repeat("x", 5000)+"\n"))}, exitFailure,
			[]string{"--keys-file", "long.txt", "line 2", "5000 bytes, over 4096"}},
		{"a list entry breaking the rule", []string{"--keys", keys[1] + ",a\rb"}, exitUsage, []string{"--keys", "entry 2", `"a\rb" holds a line break`}},
		{"an empty entry", []string{"--keys", keys[1] + ",," + keys[2]}, exitUsage, []string{"--keys", "entry 2 is empty"}},
		{"an empty file", []string{"--keys-file", writeFile(t, dir, "blank.txt", []byte("\n\n"))}, exitFailure, []string{"holds no keys", "nothing to delete"}},
		{"keys and ids", []string{"--keys", keys[1], "--ids", "100"}, exitUsage, []string{"exclude each other", "by ID or by key"}},
		{"keys and keys-file", []string{"--keys", keys[1], "--keys-file", writeKeys(t, dir, "one.txt", keys[2])}, exitUsage, []string{"exclude each other"}},
		{"neither", nil, exitUsage, []string{"--ids 1,2,3 or --ids-file", "--keys a,b or --keys-file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runUmbra(t, append([]string{"delete", store}, tc.args...)...)
			require.Equal(t, tc.code, r.code, "%s", r)
			line := requireErrorLine(t, r)
			for _, w := range tc.want {
				assert.Contains(t, line, w)
			}
			requireUnchanged(t, before, store)
		})
	}

	r := ok(t, runUmbra(t, "delete", store, "--keys", keys[1]+","+keys[2]))
	assert.Contains(t, r.stdout, fmt.Sprintf("deleted 2 keyed vectors from %s; it holds %d", store, n-2))
	r = ok(t, runUmbra(t, "delete", store, "--keys-file", writeKeys(t, dir, "gone.txt", "", keys[3], "", keys[4])))
	assert.Contains(t, r.stdout, fmt.Sprintf("it holds %d", n-4))
	ix, err := engine.Open(context.Background(), store, engine.Config{Device: engine.CPU, ReadOnly: true})
	require.NoError(t, err)
	defer ix.Close()
	assert.Equal(t, n-4, ix.Len())
	for i, k := range keys {
		if k == "" {
			continue
		}
		_, found := ix.Lookup(k)
		assert.Equal(t, i < 1 || i > 4, found, "key %q", k)
	}
}

// TestExportKeysRoundTrip: a store with keyed and keyless rows, changed by
// adds, an upsert and deletes, exports its vectors, IDs and keys; build
// reads them back into a store that has the same IDs and keys and answers
// every search identically, for each metric.
func TestExportKeysRoundTrip(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	const dim, nq = 7, 5
	for _, metric := range []string{"cosine", "dot", "l2"} {
		t.Run(metric, func(t *testing.T) {
			dir := t.TempDir()
			store := filepath.Join(dir, "s.umbra")
			keysOf := func(prefix string, n int) []string {
				ks := make([]string, n)
				for i := range ks {
					ks[i] = fmt.Sprintf("%s/%d, with spaces", prefix, i)
				}
				return ks
			}
			first := keysOf("a", 20)
			ok(t, runUmbra(t, "build", "--data", writeMatrix(t, dir, "a.npy", randomMatrix(rng, 20, dim), ""), "--keys", writeKeys(t, dir, "a.txt", first...), "--metric", metric, "--out", store))
			ok(t, runUmbra(t, "add", store, "--data", writeMatrix(t, dir, "b.npy", randomMatrix(rng, 15, dim), "")))
			second := keysOf("c", 10)
			ok(t, runUmbra(t, "add", store, "--data", writeMatrix(t, dir, "c.npy", randomMatrix(rng, 10, dim), ""), "--keys", writeKeys(t, dir, "c.txt", second...)))
			ok(t, runUmbra(t, "add", store, "--data", writeMatrix(t, dir, "d.npy", randomMatrix(rng, 3, dim), ""), "--keys", writeKeys(t, dir, "d.txt", first[2], first[5], "e/new"), "--upsert"))
			// Keys holding commas: a list cannot give them, a file can.
			r := runUmbra(t, "delete", store, "--keys", first[0]+","+second[9])
			require.Equal(t, exitFailure, r.code, "%s", r)
			ok(t, runUmbra(t, "delete", store, "--keys-file", writeKeys(t, dir, "gone.txt", first[0], second[9])))
			ok(t, runUmbra(t, "delete", store, "--ids", "21,22"))

			out, idsOut, keysOut := filepath.Join(dir, "x.npy"), filepath.Join(dir, "x-ids.npy"), filepath.Join(dir, "x-keys.txt")
			r = ok(t, runUmbra(t, "export", store, "--out", out, "--ids-out", idsOut, "--keys-out", keysOut))
			assert.Contains(t, r.stdout, "wrote "+keysOut+": 29 keys, one per line (13 vectors without a key: an empty line each)")
			lines := strings.Split(strings.TrimSuffix(string(mustRead(t, keysOut)), "\n"), "\n")
			ids, err := host.ReadIDsFile(context.Background(), idsOut)
			require.NoError(t, err)
			require.Len(t, lines, len(ids), "one line per vector")

			again := filepath.Join(dir, "again.umbra")
			ok(t, runUmbra(t, "build", "--data", out, "--ids", idsOut, "--keys", keysOut, "--metric", metric, "--out", again))
			a, b := openReadOnly(t, store), openReadOnly(t, again)
			ra, rb := stored(t, a, umbra.Selection{}), stored(t, b, umbra.Selection{})
			require.Equal(t, ra, rb, "the same IDs, each under the same key")
			for i, rec := range ra {
				require.Equal(t, rec.Key, lines[i], "line %d of the key file", i+1)
			}
			assert.Equal(t, decodeInfo(t, runUmbra(t, "info", store, "--json")).Keys, decodeInfo(t, runUmbra(t, "info", again, "--json")).Keys)

			qPath := writeMatrix(t, dir, "q.npy", randomMatrix(rng, nq, dim), "")
			search := func(s string) searchJSON {
				return decodeSearch(t, runUmbra(t, "search", "--store", s, "--queries", qPath, "--k", "100", "--device", "cpu", "--json"))
			}
			want, got := search(store), search(again)
			require.Equal(t, want.Rows, got.Rows)
			assert.Equal(t, want.Results, got.Results, "the rebuilt store answers every search identically")

			// --keys alone (no --ids): the keyless rows are numbered with
			// the rest, and every hit keeps its key.
			renumbered := filepath.Join(dir, "renumbered.umbra")
			ok(t, runUmbra(t, "build", "--data", out, "--keys", keysOut, "--metric", metric, "--out", renumbered))
			c := search(renumbered)
			for q := range nq {
				for j, h := range c.Results[q].Hits {
					w := want.Results[q].Hits[j]
					assert.Equal(t, w.Key, h.Key, "query %d rank %d", q, j)
					assert.Equal(t, w.Score, h.Score, "query %d rank %d", q, j)
					assert.Equal(t, ids[h.ID], w.ID, "row numbers for IDs")
				}
			}
		})
	}
}

func openReadOnly(t *testing.T, store string) *engine.Index {
	t.Helper()
	ix, err := engine.Open(context.Background(), store, engine.Config{Device: engine.CPU, ReadOnly: true})
	require.NoError(t, err)
	t.Cleanup(func() { ix.Close() })
	return ix
}

// TestKeyFilesFollowTheRule: build and add refuse a key file with a key
// the engine would refuse, naming the file and line, and write nothing;
// add refuses an empty line (every vector it adds by key needs one), build
// takes it as a vector without a key.
func TestKeyFilesFollowTheRule(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	data := writeMatrix(t, dir, "d.npy", randomMatrix(rng, 3, 4), "")
	store := filepath.Join(dir, "s.umbra")
	ok(t, runUmbra(t, "build", "--data", data, "--keys", writeKeys(t, dir, "k.txt", "a", "", "c"), "--out", store))
	ix := openReadOnly(t, store)
	recs := stored(t, ix, umbra.Selection{IDs: []uint64{1, 2}})
	require.Len(t, recs, 2)
	assert.Empty(t, recs[0].Key, "an empty line is a vector without a key")
	assert.Equal(t, "c", recs[1].Key)
	require.NoError(t, ix.Close())
	before := readStoreFiles(t, store)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"build, invalid UTF-8", []string{"build", "--data", data, "--keys", writeKeys(t, dir, "utf.txt", "x", "y\xfe", "z"), "--out", filepath.Join(dir, "n.umbra")},
			[]string{"--keys", "utf.txt", "line 2", `"y\xfe" is not valid UTF-8`}},
		{"build, a key twice", []string{"build", "--data", data, "--keys", writeKeys(t, dir, "dup.txt", "x", "", "x"), "--out", filepath.Join(dir, "n.umbra")},
			[]string{"--keys", "dup.txt", `key "x" is given twice (lines 1 and 3)`}},
		{"add, an empty line", []string{"add", store, "--data", data, "--keys", writeKeys(t, dir, "gap.txt", "x", "", "z")},
			[]string{"--keys", "gap.txt", "line 2 is empty"}},
		{"add, a bare carriage return", []string{"add", store, "--data", data, "--keys", writeFile(t, dir, "cr.txt", []byte("x\ny\rz\nw\n"))},
			[]string{"--keys", "cr.txt", "line 2", "holds a line break"}},
		{"add, a key twice", []string{"add", store, "--data", data, "--keys", writeKeys(t, dir, "dup2.txt", "x", "y", "x")},
			[]string{"--keys", "dup2.txt", "given twice (lines 1 and 3)", "nothing was added"}},
		{"add, a stored key", []string{"add", store, "--data", data, "--keys", writeKeys(t, dir, "stored.txt", "x", "c", "z")},
			[]string{"--keys", "stored.txt", `key "c" is already stored`, "--upsert"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runUmbra(t, tc.args...)
			require.Equal(t, exitFailure, r.code, "%s", r)
			line := requireErrorLine(t, r)
			for _, w := range tc.want {
				assert.Contains(t, line, w)
			}
			requireUnchanged(t, before, store)
			assert.NoFileExists(t, filepath.Join(dir, "n.umbra"))
		})
	}
}

// TestExportRefusesKeysBeforeTheRule: a store written before the key rule
// may hold a key a key file cannot (one with a line break): export
// --keys-out refuses it, naming the ID, and writes no file at all, while
// export without --keys-out and search still work.
func TestExportRefusesKeysBeforeTheRule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "old.umbra")
	_, err := storefile.WriteBase(storefile.OS, store, &storefile.Snapshot{
		Dim: 2, Stride: 4, Metric: uint8(umbra.L2), Precision: storefile.PrecisionFloat32, NextID: 8,
		IDs:  []uint64{5, 7},
		Rows: []float32{1, 0, 0, 0, 0, 1, 0, 0},
		Keys: map[uint64]string{5: "fine", 7: "two\nlines"},
	})
	require.NoError(t, err)
	out, keysOut := filepath.Join(dir, "x.npy"), filepath.Join(dir, "x-keys.txt")
	r := runUmbra(t, "export", store, "--out", out, "--keys-out", keysOut)
	require.Equal(t, exitFailure, r.code, "%s", r)
	line := requireErrorLine(t, r)
	assert.Contains(t, line, "--keys-out")
	assert.Contains(t, line, `ID 7`)
	assert.Contains(t, line, `"two\nlines" holds a line break`)
	assert.NoFileExists(t, out)
	assert.NoFileExists(t, keysOut)
	ok(t, runUmbra(t, "export", store, "--out", out))
	q := writeMatrix(t, dir, "q.npy", &host.Matrix{Rows: 1, Dim: 2, Data: []float32{0, 1}}, "")
	s := decodeSearch(t, runUmbra(t, "search", "--store", store, "--queries", q, "--k", "1", "--device", "cpu", "--json"))
	assert.Equal(t, "two\nlines", s.Results[0].Hits[0].Key, "JSON carries any key")
	text := ok(t, runUmbra(t, "search", "--store", store, "--queries", q, "--k", "1", "--device", "cpu"))
	assert.Regexp(t, `\n0 +1 +7 +0 +"two\\nlines"\n$`, text.stdout, "the text table quotes it")
}

// stored returns the rows of ix that sel selects (its Get), failing the
// test on an error.
func stored(t *testing.T, ix *engine.Index, sel umbra.Selection) []umbra.Record {
	t.Helper()
	recs, err := ix.Get(context.Background(), sel)
	require.NoError(t, err)
	return recs
}
