package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// memoryFiles writes n rows' keys, metadata (user, ts, tags) and payloads
// as JSON Lines, and returns the files with what they say, by key.
type memoryRow struct {
	user string
	ts   int64
	tags []string
	text string
}

func memoryFiles(t *testing.T, dir string, n int) (keys, metaF, payF string, rows map[string]memoryRow) {
	t.Helper()
	r := testkit.Rand(t)
	ks := make([]string, n)
	var metaLines, payLines []string
	rows = map[string]memoryRow{}
	for i := range n {
		m := memoryRow{user: []string{"alice", "bob", "carol"}[r.IntN(3)], ts: 1_700_000_000 + int64(r.IntN(30))*86400}
		for _, tag := range []string{"work", "home", "todo"} {
			if r.IntN(2) == 0 {
				m.tags = append(m.tags, tag)
			}
		}
		ks[i] = fmt.Sprintf("%s/m%d", m.user, i)
		tags, _ := json.Marshal(m.tags)
		if m.tags == nil {
			tags = []byte("[]")
		}
		metaLines = append(metaLines, fmt.Sprintf(`{"user": %q, "ts": %d, "tags": %s}`, m.user, m.ts, tags))
		if i%5 == 4 {
			payLines = append(payLines, "null")
		} else {
			m.text = fmt.Sprintf(`{"text":"memory %d of %s","n":%d}`, i, m.user, i)
			payLines = append(payLines, m.text)
		}
		rows[ks[i]] = m
	}
	keys = writeKeys(t, dir, "keys.txt", ks...)
	metaF = writeFile(t, dir, "meta.jsonl", []byte(strings.Join(metaLines, "\n")+"\n"))
	payF = writeFile(t, dir, "payload.jsonl", []byte(strings.Join(payLines, "\n")+"\n"))
	return keys, metaF, payF, rows
}

// TestMemoryFromTheCommandLine is the memory issue's user story: build a
// store from vectors, keys, metadata and payloads; search it with --where
// (one user's memories from a time window with a tag) and get the exact
// top k of that subset with keys and payloads; export it with
// --meta-out and --payload-out and rebuild a store that answers every
// search identically.
func TestMemoryFromTheCommandLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rng := testkit.Rand(t)
	const n, dim, nq = 300, 8, 3
	keys, metaF, payF, rows := memoryFiles(t, dir, n)
	data := writeMatrix(t, dir, "v.npy", randomMatrix(rng, n, dim), "")
	store := filepath.Join(dir, "mem.umbra")
	ok(t, runUmbra(t, "build", "--data", data, "--keys", keys, "--meta", metaF, "--payload", payF, "--out", store))
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(rng, nq, dim), "")

	const from, to = 1_700_000_000 + 5*86400, 1_700_000_000 + 20*86400
	where := fmt.Sprintf(`{"$and": [{"user": "alice"}, {"ts": {"$gte": %d}}, {"ts": {"$lt": %d}}, {"tags": {"$contains": "work"}}]}`, from, to)
	var subset []string
	for k, m := range rows {
		if m.user == "alice" && m.ts >= from && m.ts < to && slices.Contains(m.tags, "work") {
			subset = append(subset, k)
		}
	}
	require.NotEmpty(t, subset)
	allow := writeKeys(t, dir, "subset.txt", subset...)
	search := func(s string, args ...string) searchJSON {
		return decodeSearch(t, runUmbra(t, append([]string{"search", "--store", s, "--queries", queries, "--k", "5", "--device", "cpu", "--json"}, args...)...))
	}
	got := search(store, "--where", where, "--with-payload")
	want := search(store, "--allow-keys", allow, "--with-payload")
	require.Equal(t, want.Results, got.Results, "--where answers as --allow-keys of the rows it matches")
	for q, res := range got.Results {
		require.Len(t, res.Hits, min(5, len(subset)), "query %d", q)
		for _, h := range res.Hits {
			m := rows[h.Key]
			require.Equal(t, "alice", m.user, "hit %s", h.Key)
			if m.text == "" {
				require.Nil(t, h.Payload, "hit %s has no payload", h.Key)
			} else {
				require.JSONEq(t, m.text, string(h.Payload), "payload of hit %s", h.Key)
			}
		}
	}
	// The text output shows payloads last.
	text := ok(t, runUmbra(t, "search", "--store", store, "--queries", queries, "--k", "2", "--device", "cpu", "--where", where, "--with-payload")).stdout
	assert.Contains(t, text, "payload")
	assert.Contains(t, text, "only where "+where)

	// Export and rebuild: every search answers identically, filters too.
	out, idsOut, keysOut := filepath.Join(dir, "x.npy"), filepath.Join(dir, "x-ids.npy"), filepath.Join(dir, "x-keys.txt")
	metaOut, payOut := filepath.Join(dir, "x-meta.jsonl"), filepath.Join(dir, "x-payload.jsonl")
	ok(t, runUmbra(t, "export", store, "--out", out, "--ids-out", idsOut, "--keys-out", keysOut, "--meta-out", metaOut, "--payload-out", payOut))
	again := filepath.Join(dir, "again.umbra")
	ok(t, runUmbra(t, "build", "--data", out, "--ids", idsOut, "--keys", keysOut, "--meta", metaOut, "--payload", payOut, "--out", again))
	for _, args := range [][]string{nil, {"--where", where, "--with-payload"}, {"--where", `{"tags": {"$not_contains": "todo"}}`, "--with-payload"}} {
		assert.Equal(t, search(store, args...).Results, search(again, args...).Results, "rebuilt store, search %v", args)
	}
	assert.Equal(t, string(mustRead(t, metaOut)), string(mustRead(t, exportAgain(t, again, dir))), "metadata exported again is the same")

	// get shows metadata and the payload.
	var g getJSON
	r := ok(t, runUmbra(t, "get", store, "--keys", subset[0], "--json"))
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &g))
	require.Len(t, g.Vectors, 1)
	assert.Contains(t, string(g.Vectors[0].Meta), `"user":"alice"`)
}

// exportAgain exports store's metadata and returns the file.
func exportAgain(t *testing.T, store, dir string) string {
	t.Helper()
	metaOut := filepath.Join(dir, "again-meta.jsonl")
	ok(t, runUmbra(t, "export", store, "--out", filepath.Join(dir, "again.npy"), "--meta-out", metaOut))
	return metaOut
}

// TestMemoryFlagErrors: a metadata or payload file that does not fit is
// refused by flag, file and line, and nothing is written; a --where that
// does not parse or names an unknown field is refused by name.
func TestMemoryFlagErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rng := testkit.Rand(t)
	data := writeMatrix(t, dir, "v.npy", randomMatrix(rng, 3, 4), "")
	store := filepath.Join(dir, "s.umbra")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--meta", writeFile(t, dir, "m1.jsonl", []byte("{\"a\": 1}\n{\"a\": \"x\"}\n{}\n"))}, "a"},
		{[]string{"--meta", writeFile(t, dir, "m2.jsonl", []byte("{}\n{}\n"))}, "2 lines"},
		{[]string{"--meta", writeFile(t, dir, "m3.jsonl", []byte("{}\n[1]\n{}\n"))}, "line 2"},
		{[]string{"--meta", writeFile(t, dir, "m4.jsonl", []byte("{}\n\n{}\n"))}, "line 2"},
		{[]string{"--payload", writeFile(t, dir, "p1.jsonl", []byte("1\n{bad\n2\n"))}, "line 2: not a JSON value"},
		{[]string{"--meta", writeFile(t, dir, "m5.jsonl", []byte("{\"a\": {\"b\": 1}}\n{}\n{}\n"))}, "line 1"},
	} {
		r := runUmbra(t, append([]string{"build", "--data", data, "--out", store}, c.args...)...)
		require.Equal(t, exitFailure, r.code, "%v\n%s", c.args, r)
		assert.Contains(t, requireErrorLine(t, r), c.says, "%v", c.args)
		assert.NoFileExists(t, store)
	}
	ok(t, runUmbra(t, "build", "--data", data, "--out", store, "--meta", writeFile(t, dir, "m.jsonl", []byte("{\"n\": 1}\n{\"n\": 2}\n{}\n"))))
	q := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 1, 4), "")
	for where, says := range map[string]string{
		`{"who": "x"}`:        "who",
		`{"n": "x"}`:          "n",
		`{"n": {"$near": 1}}`: "$near",
		`{`:                   "--where",
	} {
		r := runUmbra(t, "search", "--store", store, "--queries", q, "--k", "1", "--where", where)
		require.NotEqual(t, 0, r.code, "%s", where)
		assert.Contains(t, requireErrorLine(t, r), says, "%s", where)
	}
	r := runUmbra(t, "search", "--data", data, "--queries", q, "--k", "1", "--where", `{"n": 1}`)
	assert.Contains(t, requireErrorLine(t, r), "--where and --with-payload need --store")
}

// TestNonUnicodeInputs: a string that is not Unicode text — a lone UTF-16
// surrogate escape ("\ud800", "\udc00", "\ud800\u0041") or a byte that is
// not UTF-8 — is refused in a --meta line and a --where filter, naming the
// flag, the line and the field (and the operator), rather than stored or
// matched as U+FFFD; a surrogate pair is its character. A --payload line
// is opaque and kept byte for byte, escapes included, but must be UTF-8.
func TestNonUnicodeInputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rng := testkit.Rand(t)
	data := writeMatrix(t, dir, "v.npy", randomMatrix(rng, 3, 4), "")
	store := filepath.Join(dir, "s.umbra")
	bad := []struct{ json, says string }{
		{`"\ud800"`, `lone UTF-16 surrogate \ud800`},
		{`"\udc00"`, `lone UTF-16 surrogate \udc00`},
		{`"\ud800\u0041"`, `lone UTF-16 surrogate \ud800`},
		{"\"x\xffy\"", "not valid UTF-8"},
	}
	for i, c := range bad {
		for _, line := range []struct{ json, says string }{
			{`{"a": ` + c.json + `}`, `field "a"`},
			{`{"t": ["ok", ` + c.json + `]}`, `field "t"`},
			{`{"n": 1, ` + c.json + `: 1}`, "the name of field 2"},
		} {
			metaF := writeFile(t, dir, fmt.Sprintf("m%d.jsonl", i), []byte("{}\n"+line.json+"\n{}\n"))
			r := runUmbra(t, "build", "--data", data, "--out", store, "--meta", metaF)
			require.Equal(t, exitFailure, r.code, "%s\n%s", line.json, r)
			msg := requireErrorLine(t, r)
			for _, want := range []string{"--meta", metaF, "line 2", line.says, c.says} {
				assert.Contains(t, msg, want, "%s", line.json)
			}
			assert.NoFileExists(t, store)
		}
	}
	// A payload is given back as written, a lone surrogate escape too; a
	// byte that is not UTF-8 is refused by line and byte.
	payF := writeFile(t, dir, "p.jsonl", []byte("{\"p\":\"\\ud800\"}\nnull\n\"\\udc00 \\ud83d\\ude00\"\n"))
	metaF := writeFile(t, dir, "m.jsonl", []byte("{\"a\":\"\\ud83d\\ude00\"}\n{\"a\":\"x\"}\n{\"a\":\"\\ufffd\"}\n"))
	badPay := writeFile(t, dir, "bad.jsonl", []byte("1\n\"ok\xfe\"\n3\n"))
	r := runUmbra(t, "build", "--data", data, "--out", store, "--payload", badPay)
	require.Equal(t, exitFailure, r.code, "%s", r)
	msg := requireErrorLine(t, r)
	for _, want := range []string{"--payload", badPay, "line 2", "the byte at offset 3 (0xfe) is not valid UTF-8"} {
		assert.Contains(t, msg, want)
	}
	assert.NoFileExists(t, store)
	ok(t, runUmbra(t, "build", "--data", data, "--out", store, "--payload", payF, "--meta", metaF))
	out := ok(t, runUmbra(t, "get", store, "--ids", "0,2", "--json")).stdout
	assert.Contains(t, out, `"payload":{"p":"\ud800"}`, "the payload as written")
	assert.Contains(t, out, `"payload":"\udc00 \ud83d\ude00"`, "the payload as written")
	assert.Contains(t, out, `"meta":{"a":"😀"}`, "a surrogate pair is its character")
	q := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 1, 4), "")
	var s searchJSON
	require.NoError(t, json.Unmarshal([]byte(ok(t, runUmbra(t, "search", "--store", store, "--queries", q, "--k", "3", "--where", `{"a": "\ud83d\ude00"}`, "--json")).stdout), &s))
	require.Len(t, s.Results, 1)
	require.Len(t, s.Results[0].Hits, 1, "only the row that holds the character, not the U+FFFD one")
	require.Equal(t, uint64(0), s.Results[0].Hits[0].ID)
	for _, c := range bad {
		for where, says := range map[string]string{
			`{"a": ` + c.json + `}`:                                 `field "a"`,
			`{"a": {"$in": ["x", ` + c.json + `]}}`:                 `field "a": $in`,
			`{"$or": [{"a": "x"}, {"a": {"$ne": ` + c.json + `}}]}`: `field "a": $ne`,
		} {
			r := runUmbra(t, "search", "--store", store, "--queries", q, "--k", "1", "--where", where)
			require.Equal(t, exitUsage, r.code, "%s\n%s", where, r)
			msg := requireErrorLine(t, r)
			for _, want := range []string{"--where", says, c.says} {
				assert.Contains(t, msg, want, "%s", where)
			}
		}
	}
	// Keys are text, not JSON: a byte that is not UTF-8 is refused by line.
	keys := writeFile(t, dir, "k.txt", []byte("a\nb\xff\nc\n"))
	r = runUmbra(t, "build", "--data", data, "--out", filepath.Join(dir, "k.umbra"), "--keys", keys)
	require.Equal(t, exitFailure, r.code, "%s", r)
	msg = requireErrorLine(t, r)
	assert.Contains(t, msg, "line 2")
	assert.Contains(t, msg, "not valid UTF-8")
}
