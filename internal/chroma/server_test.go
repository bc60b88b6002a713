package chroma

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

const base = "/api/v2/tenants/default_tenant/databases/default_database"

// testServer is a Server over stores in dir, behind httptest.
type testServer struct {
	t   testing.TB
	srv *Server
	hs  *httptest.Server
	dir string
}

func newTestServer(t testing.TB, dir string, mod func(*Config)) *testServer {
	t.Helper()
	cfg := Config{Dir: dir, Backend: &Stores{Dir: dir, Config: engine.Config{Device: engine.CPU}}}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(context.Background(), cfg)
	require.NoError(t, err)
	ts := &testServer{t: t, srv: srv, hs: httptest.NewServer(srv), dir: dir}
	t.Cleanup(ts.close)
	return ts
}

func (ts *testServer) close() {
	if ts.hs != nil {
		ts.hs.Close()
		ts.srv.Close()
		ts.hs = nil
	}
}

// call sends body (a JSON string, or a value to marshal) and returns the
// status and the answer.
func (ts *testServer) call(method, path string, body any, hdr ...string) (int, string) {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		require.NoError(ts.t, err)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, ts.hs.URL+path, rd)
	require.NoError(ts.t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(ts.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(ts.t, err)
	return resp.StatusCode, string(out)
}

// ok calls and requires status want, returning the answer.
func (ts *testServer) ok(want int, method, path string, body any) string {
	ts.t.Helper()
	code, out := ts.call(method, path, body)
	require.Equal(ts.t, want, code, "%s %s: %s", method, path, out)
	return out
}

// create makes a collection and returns its id.
func (ts *testServer) create(body string) string {
	ts.t.Helper()
	var c struct{ ID string }
	require.NoError(ts.t, json.Unmarshal([]byte(ts.ok(200, "POST", base+"/collections", body)), &c))
	return c.ID
}

// requireJSON compares two JSON texts as values.
func requireJSON(t *testing.T, want, got string, msg ...any) {
	t.Helper()
	var w, g any
	require.NoError(t, json.Unmarshal([]byte(want), &w), "want: %s", want)
	require.NoError(t, json.Unmarshal([]byte(got), &g), "got: %s", got)
	require.Equal(t, w, g, msg...)
}

// TestChromaShapes replays requests whose answers were read from Chroma
// 3.5's own server (chromadb@3.5.0, `chroma run`) and requires the same
// answers: the same JSON values, status codes and error names.
func TestChromaShapes(t *testing.T) {
	ts := newTestServer(t, t.TempDir(), nil)
	requireJSON(t, `{"max_batch_size":5461,"supports_base64_encoding":true}`, ts.ok(200, "GET", "/api/v2/pre-flight-checks", nil))
	requireJSON(t, `"1.0.0"`, ts.ok(200, "GET", "/api/v2/version", nil))
	requireJSON(t, `{"user_id":"","tenant":"default_tenant","databases":["default_database"]}`, ts.ok(200, "GET", "/api/v2/auth/identity", nil))
	id := ts.create(`{"name":"abc"}`)
	col := base + "/collections/" + id
	for _, c := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", base + "/collections", `{"name":"abc"}`, 409, `{"error":"ChromaError","message":"Collection [abc] already exists"}`},
		{"GET", base + "/collections/nonexist", ``, 404, `{"error":"NotFoundError","message":"Collection [nonexist] does not exist"}`},
		{"POST", base + "/collections/notauuid/get", `{}`, 400, `{"error":"InvalidArgumentError","message":"Collection ID is not a valid UUIDv4"}`},
		{"POST", base + "/collections/00000000-0000-0000-0000-000000000000/query", `{"query_embeddings":[[1,0]],"n_results":1}`, 404,
			`{"error":"NotFoundError","message":"Collection [00000000-0000-0000-0000-000000000000] does not exist."}`},
		{"POST", col + "/add", `{"ids":["a","b","c"],"embeddings":[[1,0,0],[0,1,0],[0,0,1.5]],"documents":["hello world","foo bar",null],"metadatas":[{"x":1,"s":"q","f":1.5,"b":true,"arr":["u","v"]},null,{"x":2.5}]}`, 201, `{}`},
		{"POST", col + "/add", `{"ids":["a"],"embeddings":[[1,0,0]]}`, 201, `{}`},
		{"POST", col + "/add", `{"ids":["d"],"embeddings":[[1,0]]}`, 400, `{"error":"InvalidArgumentError","message":"Collection expecting embedding with dimension of 3, got 2"}`},
		{"GET", col + "/count", ``, 200, `3`},
		{"POST", col + "/get", `{}`, 200, `{"ids":["a","b","c"],"embeddings":null,"documents":["hello world","foo bar",null],"uris":null,"metadatas":[{"s":"q","b":true,"arr":["u","v"],"f":1.5,"x":1},null,{"x":2.5}],"include":["documents","metadatas"]}`},
		{"POST", col + "/get", `{"include":["embeddings","documents","metadatas","uris"],"ids":["a","zz"]}`, 200, `{"ids":["a"],"embeddings":[[1.0,0.0,0.0]],"documents":["hello world"],"uris":[null],"metadatas":[{"arr":["u","v"],"b":true,"f":1.5,"x":1,"s":"q"}],"include":["embeddings","documents","metadatas","uris"]}`},
		{"POST", col + "/query", `{"query_embeddings":[[1,0.1,0]],"n_results":2}`, 200, `{"ids":[["a","b"]],"embeddings":null,"documents":[["hello world","foo bar"]],"uris":null,"metadatas":[[{"arr":["u","v"],"x":1,"f":1.5,"b":true,"s":"q"},null]],"distances":[[0.010000001,1.81]],"include":["documents","metadatas","distances"]}`},
		{"POST", col + "/query", `{"query_embeddings":[[1,0.1,0]],"n_results":5,"include":["distances","embeddings"]}`, 200, `{"ids":[["a","b","c"]],"embeddings":[[[1.0,0.0,0.0],[0.0,1.0,0.0],[0.0,0.0,1.5]]],"documents":null,"uris":null,"metadatas":null,"distances":[[0.010000001,1.81,3.26]],"include":["distances","embeddings"]}`},
		{"POST", col + "/query", `{"query_embeddings":[[1,0.1,0]],"n_results":2,"where":{"x":{"$gt":1}}}`, 200, `{"ids":[["c"]],"embeddings":null,"documents":[[null]],"uris":null,"metadatas":[[{"x":2.5}]],"distances":[[3.26]],"include":["documents","metadatas","distances"]}`},
		{"POST", col + "/query", `{"query_embeddings":[[1,0.1,0]],"n_results":2,"where_document":{"$contains":"foo"}}`, 200, `{"ids":[["b"]],"embeddings":null,"documents":[["foo bar"]],"uris":null,"metadatas":[[null]],"distances":[[1.81]],"include":["documents","metadatas","distances"]}`},
		{"POST", col + "/delete", `{"ids":["c"]}`, 200, `{"deleted":1}`},
		{"POST", col + "/delete", `{}`, 200, `{"deleted":0}`},
		{"GET", col + "/count", ``, 200, `2`},
		{"POST", col + "/update", `{"ids":["a"],"documents":["new doc"],"metadatas":[{"y":3}]}`, 200, `{}`},
		{"POST", col + "/update", `{"ids":["nope"],"documents":["new doc"]}`, 200, `{}`},
		{"POST", col + "/get", `{"ids":["a"]}`, 200, `{"ids":["a"],"embeddings":null,"documents":["new doc"],"uris":null,"metadatas":[{"b":true,"s":"q","arr":["u","v"],"x":1,"y":3,"f":1.5}],"include":["documents","metadatas"]}`},
		{"POST", col + "/upsert", `{"ids":["a","e"],"embeddings":[[0,1,1],[1,1,1]],"metadatas":[{"z":"w"},{"k":1}]}`, 200, `{}`},
		{"POST", col + "/get", `{"include":["metadatas","documents"]}`, 200, `{"ids":["a","b","e"],"embeddings":null,"documents":["new doc","foo bar",null],"uris":null,"metadatas":[{"s":"q","y":3,"z":"w","x":1,"b":true,"arr":["u","v"],"f":1.5},null,{"k":1}],"include":["metadatas","documents"]}`},
		{"POST", col + "/delete", `{"where":{"k":1}}`, 200, `{"deleted":1}`},
		{"POST", col + "/get", `{"where":{"x":1.0}}`, 200, `{"ids":["a"],"embeddings":null,"documents":["new doc"],"uris":null,"metadatas":[{"x":1,"z":"w","y":3,"b":true,"arr":["u","v"],"s":"q","f":1.5}],"include":["documents","metadatas"]}`},
		{"POST", col + "/get", `{"where_document":{"$contains":""}}`, 200, `{"ids":["a","b"],"embeddings":null,"documents":["new doc","foo bar"],"uris":null,"metadatas":[{"b":true,"arr":["u","v"],"s":"q","y":3,"f":1.5,"x":1,"z":"w"},null],"include":["documents","metadatas"]}`},
		{"POST", col + "/get", `{"limit":1,"offset":1}`, 200, `{"ids":["b"],"embeddings":null,"documents":["foo bar"],"uris":null,"metadatas":[null],"include":["documents","metadatas"]}`},
		{"POST", col + "/get", `{"include":["distances"]}`, 200, `{"ids":["a","b"],"embeddings":null,"documents":null,"uris":null,"metadatas":null,"include":["distances"]}`},
		{"POST", col + "/query", `{"query_embeddings":[[1,0]],"n_results":1}`, 400, `{"error":"InvalidArgumentError","message":"Collection expecting embedding with dimension of 3, got 2"}`},
		{"POST", col + "/add", `{"ids":["g"],"embeddings":["AAAAPwAAgD4AAABA"],"uris":["http://x"]}`, 201, `{}`},
		{"POST", col + "/get", `{"ids":["g"],"include":["embeddings","uris"]}`, 200, `{"ids":["g"],"embeddings":[[0.5,0.25,2.0]],"documents":null,"uris":["http://x"],"metadatas":null,"include":["embeddings","uris"]}`},
		{"POST", base + "/collections", `{"name":"abce","metadata":{}}`, 400, `{"error":"InvalidArgumentError","message":"Validation error: metadata: Metadata cannot be empty"}`},
		{"POST", base + "/collections", `{"name":"abcd","metadata":{"hnsw:space":"bad"}}`, 400, `{"error":"InvalidArgumentError","message":"Failed to parse hnsw parameters from segment metadata"}`},
		{"POST", base + "/collections", `{"name":"a"}`, 400, `{"error":"InvalidArgumentError","message":"Validation error: name: Expected a name containing 3-512 characters from [a-zA-Z0-9._-], starting and ending with a character in [a-zA-Z0-9]. Got: a"}`},
		{"DELETE", base + "/collections/nope", ``, 404, `{"error":"NotFoundError","message":"Collection [nope] does not exist"}`},
		{"POST", "/api/v2/tenants", `{"name":"ten1"}`, 200, `{}`},
		{"POST", "/api/v2/tenants", `{"name":"ten1"}`, 409, `{"error":"ChromaError","message":"Tenant [ten1] already exists"}`},
		{"GET", "/api/v2/tenants/ten1", ``, 200, `{"name":"ten1","resource_name":null}`},
		{"GET", "/api/v2/tenants/tX", ``, 404, `{"error":"NotFoundError","message":"Tenant [tX] not found"}`},
		{"POST", "/api/v2/tenants/never/databases", `{"name":"db1"}`, 200, `{}`},
		{"POST", "/api/v2/tenants/never/databases", `{"name":"db1"}`, 409, `{"error":"ChromaError","message":"Database [db1] already exists"}`},
		{"GET", "/api/v2/tenants/never/databases/db2", ``, 404, `{"error":"NotFoundError","message":"Database [db2] not found. Are you sure it exists?"}`},
		{"GET", "/api/v2/tenants/never/databases/db2/collections", ``, 200, `[]`},
		{"POST", "/api/v2/tenants/never/databases/db2/collections", `{"name":"abc"}`, 400, `{"error":"InvalidArgumentError","message":"Database [db2] does not exist"}`},
		{"DELETE", "/api/v2/tenants/never/databases/db1", ``, 200, `{}`},
		{"GET", "/api/v2/tenants/never/databases/db1", ``, 404, `{"error":"NotFoundError","message":"Database [db1] not found. Are you sure it exists?"}`},
		{"POST", "/api/v2/reset", ``, 403, ``},
	} {
		code, got := ts.call(c.method, c.path, c.body)
		require.Equal(t, c.status, code, "%s %s %s: %s", c.method, c.path, c.body, got)
		if c.want != "" {
			requireJSON(t, c.want, got, "%s %s %s", c.method, c.path, c.body)
		}
	}
	// A query whose ids name a missing record fails as Chroma's does (500,
	// InternalError), naming the record.
	code, got := ts.call("POST", col+"/query", `{"query_embeddings":[[1,0.1,0]],"n_results":2,"ids":["a","zz"]}`)
	require.Equal(t, 500, code, got)
	require.Contains(t, got, `"error":"InternalError"`)
	require.Contains(t, got, "Error finding id")
	require.Contains(t, got, `zz`)

	// The collection as Chroma describes it.
	var desc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(ts.ok(200, "GET", base+"/collections/abc", nil)), &desc))
	requireJSON(t, `{"hnsw":{"space":"l2","ef_construction":100,"ef_search":100,"max_neighbors":16,"resize_factor":1.2,"sync_threshold":1000},"spann":null,"embedding_function":null}`, string(desc["configuration_json"]))
	requireJSON(t, `null`, string(desc["metadata"]))
	requireJSON(t, `3`, string(desc["dimension"]))
	requireJSON(t, `"default_tenant"`, string(desc["tenant"]))
	requireJSON(t, ts.ok(200, "GET", base+"/collections/abc", nil), ts.ok(200, "GET", base+"/collections/by-id/"+id, nil))
}

// TestCollectionConfiguration: the space comes from the configuration or
// from the legacy metadata key (which wins, as in Chroma); the
// configuration is echoed with Chroma's defaults; update renames, sets
// metadata and hnsw parameters, and list pages.
func TestCollectionConfiguration(t *testing.T) {
	ts := newTestServer(t, t.TempDir(), nil)
	ts.create(`{"name":"one","metadata":{"hnsw:space":"ip","a":1},"configuration":{"hnsw":{"space":"l2"}}}`)
	ts.create(`{"name":"two","configuration":{"hnsw":{"space":"cosine","ef_search":50},"embedding_function":{"type":"known","name":"default","config":{}}}}`)
	var one, two map[string]json.RawMessage
	json.Unmarshal([]byte(ts.ok(200, "GET", base+"/collections/one", nil)), &one)
	json.Unmarshal([]byte(ts.ok(200, "GET", base+"/collections/two", nil)), &two)
	requireJSON(t, `{"hnsw":{"space":"ip","ef_construction":100,"ef_search":100,"max_neighbors":16,"resize_factor":1.2,"sync_threshold":1000},"spann":null,"embedding_function":null}`, string(one["configuration_json"]))
	requireJSON(t, `{"a":1,"hnsw:space":"ip"}`, string(one["metadata"]))
	requireJSON(t, `{"hnsw":{"space":"cosine","ef_construction":100,"ef_search":50,"max_neighbors":16,"resize_factor":1.2,"sync_threshold":1000},"spann":null,"embedding_function":{"type":"known","name":"default","config":{}}}`, string(two["configuration_json"]))
	code, got := ts.call("POST", base+"/collections", `{"name":"three","configuration":{"hnsw":{"space":"bad"}}}`)
	require.Equal(t, 422, code, got)
	// get_or_create answers the existing collection.
	var again map[string]json.RawMessage
	json.Unmarshal([]byte(ts.ok(200, "POST", base+"/collections", `{"name":"one","get_or_create":true}`)), &again)
	require.Equal(t, string(one["id"]), string(again["id"]))
	// Update.
	var id string
	json.Unmarshal(one["id"], &id)
	ts.ok(200, "PUT", base+"/collections/"+id, `{"new_name":"uno","new_metadata":{"m":1}}`)
	ts.ok(200, "PUT", base+"/collections/"+id, `{"new_configuration":{"hnsw":{"ef_search":20}}}`)
	code, got = ts.call("PUT", base+"/collections/"+id, `{"new_name":"two"}`)
	require.Equal(t, 409, code, got)
	var uno map[string]json.RawMessage
	json.Unmarshal([]byte(ts.ok(200, "GET", base+"/collections/uno", nil)), &uno)
	requireJSON(t, `{"m":1}`, string(uno["metadata"]))
	requireJSON(t, `{"hnsw":{"space":"ip","ef_construction":100,"ef_search":20,"max_neighbors":16,"resize_factor":1.2,"sync_threshold":1000},"spann":null,"embedding_function":null}`, string(uno["configuration_json"]))
	// List and count.
	requireJSON(t, `2`, ts.ok(200, "GET", base+"/collections_count", nil))
	var list []map[string]any
	json.Unmarshal([]byte(ts.ok(200, "GET", base+"/collections?limit=1&offset=1", nil)), &list)
	require.Len(t, list, 1)
	require.Equal(t, "two", list[0]["name"])
	// Delete by name.
	ts.ok(200, "DELETE", base+"/collections/two", nil)
	requireJSON(t, `1`, ts.ok(200, "GET", base+"/collections_count", nil))
}

// f32 is a float32 as base64 little-endian, as the JS client sends it.
func b64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// distance64 is Chroma's distance in float64: cosine 1 - cos, ip 1 - dot,
// l2 the squared distance.
func distance64(space string, q, x []float32) float64 {
	var dot, qq, xx, l2 float64
	for i := range q {
		a, b := float64(q[i]), float64(x[i])
		dot += a * b
		qq += a * a
		xx += b * b
		l2 += (a - b) * (a - b)
	}
	switch space {
	case "cosine":
		return 1 - dot/math.Sqrt(qq*xx)
	case "ip":
		return 1 - dot
	}
	return l2
}

type queryAnswer struct {
	IDs       [][]string  `json:"ids"`
	Distances [][]float64 `json:"distances"`
	Documents [][]*string `json:"documents"`
}

// TestQueryExact: in each space, with and without where and
// where_document, a query answers the exact top k of a float64 brute
// force over the records that pass, with Chroma's distances, for
// embeddings sent as numbers or base64.
func TestQueryExact(t *testing.T) {
	rng := testkit.Rand(t)
	ts := newTestServer(t, t.TempDir(), nil)
	const n, dim, k = 300, 12, 7
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon"}
	for _, space := range []string{"cosine", "l2", "ip"} {
		id := ts.create(fmt.Sprintf(`{"name":"q-%s","configuration":{"hnsw":{"space":%q}}}`, space, space))
		col := base + "/collections/" + id
		vecs := testkit.Vectors(rng, n, dim)
		ids := make([]string, n)
		docs := make([]string, n)
		metas := make([]map[string]any, n)
		embs := make([]any, n)
		for i := range n {
			ids[i] = fmt.Sprintf("r%03d", i)
			docs[i] = words[rng.IntN(len(words))] + " " + words[rng.IntN(len(words))]
			metas[i] = map[string]any{"g": i % 5, "w": float64(i) / 10}
			if i%2 == 0 {
				embs[i] = b64(vecs[i])
			} else {
				embs[i] = vecs[i]
			}
		}
		ts.ok(201, "POST", col+"/add", map[string]any{"ids": ids, "embeddings": embs, "documents": docs, "metadatas": metas})
		for trial := range 4 {
			q := testkit.Vector(rng, dim)
			req := map[string]any{"query_embeddings": [][]float32{q}, "n_results": k, "include": []string{"distances", "documents"}}
			pass := func(i int) bool { return true }
			switch trial {
			case 1:
				req["where"] = map[string]any{"g": map[string]any{"$in": []int{1, 3}}}
				pass = func(i int) bool { return i%5 == 1 || i%5 == 3 }
			case 2:
				req["where_document"] = map[string]any{"$contains": "gamma"}
				pass = func(i int) bool { return strings.Contains(docs[i], "gamma") }
			case 3:
				req["where"] = map[string]any{"$and": []any{map[string]any{"w": map[string]any{"$gte": 5}}, map[string]any{"g": map[string]any{"$ne": 0}}}}
				req["where_document"] = map[string]any{"$not_contains": "beta"}
				pass = func(i int) bool { return float64(i)/10 >= 5 && i%5 != 0 && !strings.Contains(docs[i], "beta") }
			}
			type cand struct {
				i int
				d float64
			}
			var all []cand
			for i := range n {
				if pass(i) {
					all = append(all, cand{i, distance64(space, q, vecs[i])})
				}
			}
			sort.SliceStable(all, func(a, b int) bool { return all[a].d < all[b].d })
			var ans queryAnswer
			require.NoError(t, json.Unmarshal([]byte(ts.ok(200, "POST", col+"/query", req)), &ans))
			require.Len(t, ans.IDs, 1)
			want := min(k, len(all))
			require.Len(t, ans.IDs[0], want, "%s trial %d", space, trial)
			for j := range want {
				require.InDelta(t, all[j].d, ans.Distances[0][j], 1e-4, "%s trial %d hit %d", space, trial, j)
				// Near-ties may swap between float32 and float64: the
				// id must be one whose distance matches.
				got := slices.Index(ids, ans.IDs[0][j])
				require.True(t, pass(got), "%s trial %d: %s does not pass the filter", space, trial, ans.IDs[0][j])
				require.InDelta(t, distance64(space, q, vecs[got]), ans.Distances[0][j], 1e-4)
				require.Equal(t, docs[got], *ans.Documents[0][j])
			}
		}
		// Embeddings come back as written (to float32 rounding under
		// cosine, where umbra keeps the unit vector and the norm).
		var g struct{ Embeddings [][]float32 }
		require.NoError(t, json.Unmarshal([]byte(ts.ok(200, "POST", col+"/get", `{"ids":["r000","r001"],"include":["embeddings"]}`)), &g))
		for j, v := range g.Embeddings {
			for d := range v {
				require.InDelta(t, vecs[j][d], v[d], 1e-5*(1+math.Abs(float64(vecs[j][d]))))
			}
		}
	}
}

// TestWhereDocumentIndex: the trigram index answers $contains,
// $not_contains, $regex, $not_regex, $and and $or as a scan of every
// document does, across writes that replace and delete documents.
func TestWhereDocumentIndex(t *testing.T) {
	rng := testkit.Rand(t)
	x := newDocIndex()
	docs := map[uint64]string{}
	var all []uint64 // every row of the collection, with a document or not
	for id := range uint64(400) {
		all = append(all, id)
	}
	alphabet := "abcde "
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for round := range 2000 {
		id := uint64(rng.IntN(400))
		switch rng.IntN(4) {
		case 0:
			x.remove(id)
			delete(docs, id)
		default:
			d := word(rng.IntN(30))
			x.set(id, &d)
			docs[id] = d
		}
		if round%50 != 0 {
			continue
		}
		for range 10 {
			s := word(rng.IntN(6))
			re := regexp.QuoteMeta(s[:len(s)/2]) + "." + regexp.QuoteMeta(s[len(s)/2:])
			s2 := word(rng.IntN(4) + 1)
			pos := func(f func(string) bool) func(string, bool) bool {
				return func(d string, has bool) bool { return has && f(d) }
			}
			neg := func(f func(string) bool) func(string, bool) bool {
				return func(d string, has bool) bool { return !has || !f(d) }
			}
			has := func(s string) func(string) bool { return func(d string) bool { return strings.Contains(d, s) } }
			rx := regexp.MustCompile(re).MatchString
			// A regex every match of which begins with a literal of three
			// bytes or more: read through the trigram index.
			long := regexp.QuoteMeta(word(3+rng.IntN(3))) + "[a-c]*" + regexp.QuoteMeta(s2)
			rxLong := regexp.MustCompile(long).MatchString
			for _, c := range []struct {
				clause string
				keep   func(d string, has bool) bool
			}{
				{fmt.Sprintf(`{"$contains":%q}`, s), pos(has(s))},
				{fmt.Sprintf(`{"$not_contains":%q}`, s), neg(has(s))},
				{fmt.Sprintf(`{"$regex":%q}`, re), pos(rx)},
				{fmt.Sprintf(`{"$not_regex":%q}`, re), neg(rx)},
				{fmt.Sprintf(`{"$regex":%q}`, long), pos(rxLong)},
				{fmt.Sprintf(`{"$not_regex":%q}`, long), neg(rxLong)},
				{fmt.Sprintf(`{"$and":[{"$contains":%q},{"$not_contains":%q}]}`, s, s2), func(d string, h bool) bool { return pos(has(s))(d, h) && neg(has(s2))(d, h) }},
				{fmt.Sprintf(`{"$or":[{"$contains":%q},{"$contains":%q}]}`, s, s2), func(d string, h bool) bool { return pos(has(s))(d, h) || pos(has(s2))(d, h) }},
				{fmt.Sprintf(`{"$or":[{"$not_contains":%q},{"$regex":%q}]}`, s, re), func(d string, h bool) bool { return neg(has(s))(d, h) || pos(rx)(d, h) }},
				{fmt.Sprintf(`{"$and":[{"$not_contains":%q},{"$not_regex":%q}]}`, s2, re), func(d string, h bool) bool { return neg(has(s2))(d, h) && neg(rx)(d, h) }},
				{fmt.Sprintf(`{"$or":[{"$not_contains":%q},{"$not_regex":%q}]}`, s2, re), func(d string, h bool) bool { return neg(has(s2))(d, h) || neg(rx)(d, h) }},
			} {
				got, err := x.eval(json.RawMessage(c.clause), 0)
				require.NoError(t, err)
				var want []uint64
				for id := range uint64(400) {
					d, ok := docs[id]
					if c.keep(d, ok) {
						want = append(want, id)
					}
				}
				require.Equal(t, fmt.Sprint(want), fmt.Sprint(got.resolve(all)), "%s", c.clause)
			}
		}
	}
	for _, bad := range []string{`{}`, `{"$contains":1}`, `{"$regex":"("}`, `{"$and":[]}`, `{"$nope":"x"}`, `{"$contains":"a","$or":[]}`} {
		_, err := x.eval(json.RawMessage(bad), 0)
		require.Error(t, err, bad)
	}
}

// TestRecordsSurviveReopen: a server closed and opened again on the same
// directory holds the same collections, records, documents (indexed
// again) and metadata.
func TestRecordsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	ts := newTestServer(t, dir, nil)
	id := ts.create(`{"name":"keep","metadata":{"k":"v"},"configuration":{"hnsw":{"space":"cosine"}}}`)
	ts.create(`{"name":"empty"}`)
	col := base + "/collections/" + id
	ts.ok(201, "POST", col+"/add", `{"ids":["a","b"],"embeddings":[[3,4],[1,0]],"documents":["the cat sat","a dog ran"],"metadatas":[{"n":1},{"n":2}]}`)
	ts.ok(200, "POST", col+"/delete", `{"ids":["b"]}`)
	ts.ok(201, "POST", col+"/add", `{"ids":["c"],"embeddings":[[0,2]],"documents":["cats purr"]}`)
	before := ts.ok(200, "POST", col+"/get", `{"include":["embeddings","documents","metadatas"]}`)
	ts.close()

	ts2 := newTestServer(t, dir, nil)
	requireJSON(t, before, ts2.ok(200, "POST", col+"/get", `{"include":["embeddings","documents","metadatas"]}`))
	requireJSON(t, `{"ids":["a","c"],"embeddings":null,"documents":null,"uris":null,"metadatas":null,"include":[]}`,
		ts2.ok(200, "POST", col+"/get", `{"where_document":{"$contains":"cat"},"include":[]}`))
	requireJSON(t, `2`, ts2.ok(200, "GET", base+"/collections_count", nil))
	var desc map[string]json.RawMessage
	json.Unmarshal([]byte(ts2.ok(200, "GET", base+"/collections/keep", nil)), &desc)
	requireJSON(t, `{"k":"v"}`, string(desc["metadata"]))
	requireJSON(t, `2`, string(desc["dimension"]))
	// Deleting a collection removes its store.
	ts2.ok(200, "DELETE", base+"/collections/keep", nil)
	code, _ := ts2.call("POST", col+"/get", `{}`)
	require.Equal(t, 404, code)
	require.NoDirExists(t, dir+"/collections/"+id)
}

// TestAuthToken: with a token every request needs it, in either header;
// without it (or with another) the answer is 401 in Chroma's shape.
func TestAuthToken(t *testing.T) {
	ts := newTestServer(t, t.TempDir(), func(c *Config) { c.Token = "s3cret" })
	for _, h := range [][]string{nil, {"X-Chroma-Token", "nope"}, {"Authorization", "Bearer nope"}, {"Authorization", "s3cret"}} {
		code, got := ts.call("GET", "/api/v2/heartbeat", nil, h...)
		require.Equal(t, 401, code, "%v: %s", h, got)
		require.Contains(t, got, `"error"`)
	}
	for _, h := range [][]string{{"X-Chroma-Token", "s3cret"}, {"Authorization", "Bearer s3cret"}} {
		code, got := ts.call("GET", base+"/collections", nil, h...)
		require.Equal(t, 200, code, "%v: %s", h, got)
	}
}

// TestLimits: a body over the limit is 413, a batch over max_batch_size
// (which pre-flight-checks reports) 400, both in Chroma's shape and
// storing nothing; reset is refused unless allowed.
func TestLimits(t *testing.T) {
	ts := newTestServer(t, t.TempDir(), func(c *Config) { c.MaxBodyBytes = 4096; c.MaxBatchSize = 3; c.AllowReset = true })
	requireJSON(t, `{"max_batch_size":3,"supports_base64_encoding":true}`, ts.ok(200, "GET", "/api/v2/pre-flight-checks", nil))
	id := ts.create(`{"name":"lim"}`)
	col := base + "/collections/" + id
	big := fmt.Sprintf(`{"ids":["a"],"embeddings":[[1]],"documents":[%q]}`, strings.Repeat("x", 5000))
	code, got := ts.call("POST", col+"/add", big)
	require.Equal(t, 413, code, got)
	require.Contains(t, got, `"error"`)
	code, got = ts.call("POST", col+"/add", `{"ids":["a","b","c","d"],"embeddings":[[1],[2],[3],[4]]}`)
	require.Equal(t, 400, code, got)
	require.Contains(t, got, "max_batch_size")
	requireJSON(t, `0`, ts.ok(200, "GET", col+"/count", nil))
	code, got = ts.call("POST", col+"/add", `{"ids":["a","a"],"embeddings":[[1],[2]]}`)
	require.Equal(t, 400, code, got)
	require.Contains(t, got, "DuplicateIDError")
	// Reset, allowed here, leaves the defaults only.
	ts.ok(200, "POST", "/api/v2/tenants", `{"name":"other"}`)
	requireJSON(t, `true`, ts.ok(200, "POST", "/api/v2/reset", nil))
	requireJSON(t, `0`, ts.ok(200, "GET", base+"/collections_count", nil))
	code, _ = ts.call("GET", "/api/v2/tenants/other", nil)
	require.Equal(t, 404, code)
	ts.ok(200, "GET", "/api/v2/tenants/default_tenant/databases/default_database", nil)
}

// TestMetadataTypes: a key holding different types in different records
// is filtered per type as in Chroma (a number matches ints and floats of
// its value), arrays by $contains, bools by equality.
func TestMetadataTypes(t *testing.T) {
	ts := newTestServer(t, t.TempDir(), nil)
	col := base + "/collections/" + ts.create(`{"name":"types"}`)
	ts.ok(201, "POST", col+"/add", `{"ids":["i","f","s","b","a","n"],"embeddings":[[1],[2],[3],[4],[5],[6]],
		"metadatas":[{"x":2},{"x":2.0},{"x":"2"},{"x":true},{"x":[1,2,3]},{"y":1}]}`)
	for _, c := range []struct{ where, ids string }{
		{`{"x":2}`, `["i","f"]`},
		{`{"x":"2"}`, `["s"]`},
		{`{"x":true}`, `["b"]`},
		{`{"x":{"$gte":1.5}}`, `["i","f"]`},
		{`{"x":{"$ne":2}}`, `["s","b","a","n"]`},
		{`{"x":{"$contains":2}}`, `["a"]`},
		{`{"x":{"$not_contains":2}}`, `["i","f","s","b","n"]`},
		{`{"x":{"$in":["2",true]}}`, `["s","b"]`},
		{`{"x":{"$nin":[2]}}`, `["s","b","a","n"]`},
		{`{"nokey":1}`, `[]`},
		{`{"$or":[{"x":"2"},{"y":1}]}`, `["s","n"]`},
	} {
		var g struct{ IDs []string }
		require.NoError(t, json.Unmarshal([]byte(ts.ok(200, "POST", col+"/get", `{"include":[],"where":`+c.where+`}`)), &g))
		requireJSON(t, c.ids, string(must(json.Marshal(nonNil(g.IDs)))), "where %s", c.where)
	}
	for _, bad := range []string{`{}`, `{"x":{"$gt":"a"}}`, `{"x":{"$bad":1}}`, `{"$and":[]}`, `{"x":{"$eq":1,"$ne":2}}`} {
		code, got := ts.call("POST", col+"/get", `{"where":`+bad+`}`)
		require.Equal(t, 400, code, "%s: %s", bad, got)
		require.Contains(t, got, "InvalidArgumentError")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestNumberComparison holds umbra's side of the table in docs/chroma.md:
// an int field compared with a float operand as numbers (Chroma
// truncates the operand).
func TestNumberComparison(t *testing.T) {
	ts := newTestServer(t, t.TempDir(), nil)
	col := base + "/collections/" + ts.create(`{"name":"numbers"}`)
	ts.ok(201, "POST", col+"/add", `{"ids":["i1","i2","f15","f2"],"embeddings":[[1],[2],[3],[4]],"metadatas":[{"x":1},{"x":2},{"x":1.5},{"x":2.0}]}`)
	for _, c := range []struct{ where, ids string }{
		{`{"x":{"$gte":1.5}}`, `["i2","f15","f2"]`},
		{`{"x":{"$lt":1.5}}`, `["i1"]`},
		{`{"x":{"$eq":1.5}}`, `["f15"]`},
		{`{"x":{"$in":[1.5,2]}}`, `["i2","f15","f2"]`},
		{`{"x":{"$gt":1.5}}`, `["i2","f2"]`},
		{`{"x":{"$lte":1.5}}`, `["i1","f15"]`},
		{`{"x":{"$gt":1}}`, `["i2","f15","f2"]`},
		{`{"x":{"$ne":2}}`, `["i1","f15"]`},
	} {
		var g struct{ IDs []string }
		require.NoError(t, json.Unmarshal([]byte(ts.ok(200, "POST", col+"/get", `{"include":[],"where":`+c.where+`}`)), &g))
		requireJSON(t, c.ids, string(must(json.Marshal(nonNil(g.IDs)))), "where %s", c.where)
	}
}

// countingBackend wraps Stores, recording the options of every Search.
type countingBackend struct {
	Stores
	opts *[]int
}

type countingCollection struct {
	umbra.Collection
	opts *[]int
}

func (c countingCollection) Search(ctx context.Context, q []float32, k int, opts ...umbra.SearchOption) ([]umbra.Hit, error) {
	*c.opts = append(*c.opts, len(opts))
	return c.Collection.Search(ctx, q, k, opts...)
}

func (b *countingBackend) Create(ctx context.Context, id string, dim int, m umbra.Metric) (umbra.Collection, error) {
	c, err := b.Stores.Create(ctx, id, dim, m)
	if err != nil {
		return nil, err
	}
	return countingCollection{c, b.opts}, nil
}

// TestUnfilteredQueriesCoalesce: a query with no where, where_document or
// ids calls Search with no option at all, which is what lets the engine
// answer concurrent queries in one shared pass (a Where, even an empty
// one, runs a search on its own).
func TestUnfilteredQueriesCoalesce(t *testing.T) {
	var opts []int
	dir := t.TempDir()
	ts := newTestServer(t, dir, func(c *Config) {
		c.Backend = &countingBackend{Stores: Stores{Dir: dir, Config: engine.Config{Device: engine.CPU}}, opts: &opts}
	})
	col := base + "/collections/" + ts.create(`{"name":"coalesce"}`)
	ts.ok(201, "POST", col+"/add", `{"ids":["a","b"],"embeddings":[[1,0],[0,1]],"metadatas":[{"x":1},null]}`)
	ts.ok(200, "POST", col+"/query", `{"query_embeddings":[[1,0]],"n_results":1}`)
	ts.ok(200, "POST", col+"/query", `{"query_embeddings":[[1,0]],"n_results":1,"where":{"x":1}}`)
	require.Equal(t, []int{0, 1}, opts)
}

// TestUpdateOfEmptyCollectionFixesNothing: an update names stored records
// only, so on a collection without records it stores nothing and does not
// fix the collection's dimension.
func TestUpdateOfEmptyCollectionFixesNothing(t *testing.T) {
	ts := newTestServer(t, t.TempDir(), nil)
	col := base + "/collections/" + ts.create(`{"name":"fresh"}`)
	ts.ok(200, "POST", col+"/update", `{"ids":["a"],"embeddings":[[1,2,3]]}`)
	var desc map[string]json.RawMessage
	json.Unmarshal([]byte(ts.ok(200, "GET", base+"/collections/fresh", nil)), &desc)
	requireJSON(t, `null`, string(desc["dimension"]))
	ts.ok(201, "POST", col+"/add", `{"ids":["a"],"embeddings":[[1,2]]}`)
	requireJSON(t, `1`, ts.ok(200, "GET", col+"/count", nil))
}

// TestNegationsAdmitMissing holds answers read from Chroma's server: a
// where_document negation admits records without a document, a metadata
// $not_contains records whose key is no array (or absent), and an empty
// array is a value.
func TestNegationsAdmitMissing(t *testing.T) {
	ts := newTestServer(t, t.TempDir(), nil)
	col := base + "/collections/" + ts.create(`{"name":"negations"}`)
	ts.ok(201, "POST", col+"/add", `{"ids":["d","n","e"],"embeddings":[[1],[2],[3]],"documents":["has cat",null,""],"metadatas":[{"x":[1,2]},{"x":"s"},{"x":[]}]}`)
	for _, c := range []struct{ body, ids string }{
		{`"where_document":{"$not_contains":"cat"}`, `["n","e"]`},
		{`"where_document":{"$not_regex":"cat"}`, `["n","e"]`},
		{`"where_document":{"$contains":""}`, `["d","e"]`},
		{`"where_document":{"$regex":".*"}`, `["d","e"]`},
		{`"where_document":{"$not_contains":"zz"}`, `["d","n","e"]`},
		{`"where":{"x":{"$not_contains":1}}`, `["n","e"]`},
		{`"where":{"x":{"$contains":1}}`, `["d"]`},
		{`"where":{"x":{"$contains":"s"}}`, `[]`},
	} {
		requireJSON(t, `{"ids":`+c.ids+`,"embeddings":null,"documents":null,"uris":null,"metadatas":null,"include":[]}`,
			ts.ok(200, "POST", col+"/get", `{"include":[],`+c.body+`}`), c.body)
	}
	var q struct{ IDs [][]string }
	require.NoError(t, json.Unmarshal([]byte(ts.ok(200, "POST", col+"/query", `{"query_embeddings":[[0]],"n_results":3,"where_document":{"$not_contains":"cat"}}`)), &q))
	require.ElementsMatch(t, []string{"n", "e"}, q.IDs[0])
	requireJSON(t, `[{"x":[1,2]},{"x":"s"},null]`, string(must(json.Marshal(must(getMetas(ts, col))))))
}

func getMetas(ts *testServer, col string) ([]any, error) {
	var g struct{ Metadatas []any }
	err := json.Unmarshal([]byte(ts.ok(200, "POST", col+"/get", `{"include":["metadatas"]}`)), &g)
	return g.Metadatas, err
}

// TestUndecodableBodies: what Chroma's server cannot deserialize is 422
// ChromaError there and here, storing nothing; an empty metadata key 400.
func TestUndecodableBodies(t *testing.T) {
	ts := newTestServer(t, t.TempDir(), nil)
	id := ts.create(`{"name":"bodies"}`)
	col := base + "/collections/" + id
	ts.ok(201, "POST", col+"/add", `{"ids":["a"],"embeddings":[[1,2]]}`)
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/add", `{"ids":["b"],"embeddings":[[null,1]]}`, 422},
		{"/add", `{"ids":["b"],"embeddings":[[1,2]],"metadatas":[{"a":{"b":1}}]}`, 422},
		{"/add", `{"ids":["b"],"embeddings":[[1,2]],"metadatas":[{"a":[1,"x"]}]}`, 422},
		{"/add", `{"ids":["b"],"embeddings":[[1,2]],"metadatas":[{"":1}]}`, 400},
		{"/query", `{"query_embeddings":[[1,2]],"n_results":-1}`, 422},
		{"/get", `{"limit":-1}`, 422},
		{"/get", `{"offset":-2}`, 422},
	} {
		code, got := ts.call("POST", col+c.path, c.body)
		require.Equal(t, c.status, code, "%s %s: %s", c.path, c.body, got)
		if c.status == 422 {
			require.Contains(t, got, `"error":"ChromaError","message":"Failed to deserialize the JSON body into the target type: `)
		}
	}
	code, got := ts.call("PUT", base+"/collections/"+id, `{"new_configuration":{"hnsw":{"space":"ip"}}}`)
	require.Equal(t, 422, code, got)
	requireJSON(t, `1`, ts.ok(200, "GET", col+"/count", nil))
}

// TestRequestTimeout: a request that outlives the server's time per
// request is answered 504 in Chroma's error shape.
func TestRequestTimeout(t *testing.T) {
	dir := t.TempDir()
	ts := newTestServer(t, dir, nil)
	col := base + "/collections/" + ts.create(`{"name":"slow"}`)
	ts.ok(201, "POST", col+"/add", `{"ids":["a","b"],"embeddings":[[1,0],[0,1]]}`)
	ts.close()
	ts = newTestServer(t, dir, func(c *Config) { c.RequestTimeout = time.Nanosecond })
	code, got := ts.call("POST", col+"/query", `{"query_embeddings":[[1,0]],"n_results":1}`)
	require.Equal(t, 504, code, got)
	require.Contains(t, got, `"error":"TimeoutError"`)
}

// TestQueryAnswerBounded: n_results beyond the rows is fine (Chroma
// answers every row), but an answer of more than maxQueryHits results is
// refused before it is built.
func TestQueryAnswerBounded(t *testing.T) {
	ts := newTestServer(t, t.TempDir(), func(c *Config) { c.MaxBatchSize = 100000 })
	col := base + "/collections/" + ts.create(`{"name":"bounded"}`)
	var ids []string
	var embs [][]float32
	for i := range 20 {
		ids = append(ids, fmt.Sprint(i))
		embs = append(embs, []float32{float32(i), 1})
	}
	ts.ok(201, "POST", col+"/add", map[string]any{"ids": ids, "embeddings": embs})
	var q queryAnswer
	require.NoError(t, json.Unmarshal([]byte(ts.ok(200, "POST", col+"/query", `{"query_embeddings":[[1,0]],"n_results":2000000000}`)), &q))
	require.Len(t, q.IDs[0], 20)
	qs := make([][]float32, maxQueryHits/20+1)
	for i := range qs {
		qs[i] = []float32{1, 0}
	}
	code, got := ts.call("POST", col+"/query", map[string]any{"query_embeddings": qs, "n_results": 20})
	require.Equal(t, 400, code, firstN(got, 300))
	require.Contains(t, got, "at most 1048576")
}

// TestBase64List: the fast reader of base64 embeddings reads what the
// general one reads, and leaves everything else to it.
func TestBase64List(t *testing.T) {
	rng := testkit.Rand(t)
	check := func(vs [][]float32, text string) {
		t.Helper()
		got, ok := base64List([]byte(text))
		require.True(t, ok, "%.200s", text)
		require.Len(t, got, len(vs))
		for i := range vs {
			require.Len(t, got[i], len(vs[i]))
			for j := range vs[i] {
				require.Equal(t, math.Float32bits(vs[i][j]), math.Float32bits(got[i][j]), "embedding %d, value %d", i, j)
			}
		}
		if len(got) > 1 && len(got[0]) > 0 {
			// Each embedding is its own slice of the block.
			next := slices.Clone(got[1])
			_ = append(got[0], 1)
			require.Equal(t, next, got[1], "an embedding's slice reaches into the next")
		}
		var e embeddings
		require.NoError(t, json.Unmarshal([]byte(text), &e))
		require.Equal(t, fmt.Sprint(vs), fmt.Sprint([][]float32(e)))
	}
	list := func(vs [][]float32, sp string) string {
		var parts []string
		for _, v := range vs {
			parts = append(parts, `"`+b64(v)+`"`)
		}
		return "[" + sp + strings.Join(parts, sp+","+sp) + sp + "]"
	}
	// Small lists of mixed widths: every padding ("==", "=", none: widths
	// 1, 2 and 3 mod 3), empty embeddings, white space.
	for range 50 {
		vs := make([][]float32, rng.IntN(6))
		for i := range vs {
			vs[i] = testkit.Vector(rng, rng.IntN(10))
		}
		check(vs, list(vs, strings.Repeat(" \n", rng.IntN(2))))
	}
	// A write's worth, decoded on every core.
	vs := testkit.Vectors(rng, 300, 768)
	big := list(vs, "")
	check(vs, big)
	parts := strings.Split(big, `","`)
	k := 1 + rng.IntN(len(parts)-1)
	parts[k] = "!!!!" + parts[k] // one string, somewhere, not base64
	bad := strings.Join(parts, `","`)
	for _, other := range []string{`[[1,2]]`, `["AAAAPw=="x]`, `["AAAAPw==",null]`, `["AAA\u0041Pw=="]`, `["AAAA"]`, `["!!!!"]`, `[`,
		`["AAAAPw==",]`, `"AAAAPw=="`, `["AAAAAAA="]`, `["AA=AAA=="]`, `["AAAAPw==" "AAAAPw=="]`, bad} {
		_, ok := base64List([]byte(other))
		require.False(t, ok, "%.200s", other)
	}
}

// TestConcurrentClients: queries, gets and writes from many clients at
// once on one collection (run under -race) all succeed, and every query
// answers exactly over the records present.
func TestConcurrentClients(t *testing.T) {
	rng := testkit.Rand(t)
	ts := newTestServer(t, t.TempDir(), nil)
	col := base + "/collections/" + ts.create(`{"name":"busy"}`)
	const dim = 8
	vecs := testkit.Vectors(rng, 200, dim)
	ids := make([]string, len(vecs))
	for i := range ids {
		ids[i] = fmt.Sprint("r", i)
	}
	ts.ok(201, "POST", col+"/add", map[string]any{"ids": ids[:100], "embeddings": vecs[:100]})
	queries := testkit.Vectors(rng, 16, dim)
	done := make(chan error, 32)
	for w := range 16 {
		go func() {
			defer func() { done <- nil }()
			for j := range 10 {
				if w%4 == 0 {
					i := 100 + w/4*25 + j
					ts.ok(201, "POST", col+"/add", map[string]any{"ids": []string{ids[i]}, "embeddings": [][]float32{vecs[i]}, "documents": []string{"doc"}})
					continue
				}
				var q queryAnswer
				require.NoError(t, json.Unmarshal([]byte(ts.ok(200, "POST", col+"/query", map[string]any{"query_embeddings": [][]float32{queries[w]}, "n_results": 3, "include": []string{"distances"}})), &q))
				require.Len(t, q.IDs[0], 3)
				for h := 1; h < 3; h++ {
					require.LessOrEqual(t, q.Distances[0][h-1], q.Distances[0][h])
				}
			}
		}()
	}
	for range 16 {
		<-done
	}
	requireJSON(t, `140`, ts.ok(200, "GET", col+"/count", nil))
}

// TestSlowClientsAreCut: a client that sends its headers, or its body,
// too slowly has its connection closed by the server, which answers
// others meanwhile.
func TestSlowClientsAreCut(t *testing.T) {
	dir := t.TempDir()
	srv, err := New(context.Background(), Config{Dir: dir, Backend: &Stores{Dir: dir, Config: engine.Config{Device: engine.CPU}},
		ReadHeaderTimeout: 100 * time.Millisecond, ReadTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := srv.HTTPServer()
	go hs.Serve(ln)
	defer hs.Close()
	for _, partial := range []string{
		"GET /api/v2/heartbeat HTTP/1.1\r\nHost: x\r\n",                                               // headers never end
		"POST " + base + "/collections HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"name\":", // body never ends
	} {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		_, err = c.Write([]byte(partial))
		require.NoError(t, err)
		// A generous deadline: the server must close well before it.
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = io.ReadAll(c)
		require.NoError(t, err, "the server kept a slow client's connection open: %q", partial)
		c.Close()
	}
	resp, err := http.Get("http://" + ln.Addr().String() + "/api/v2/heartbeat")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}

// TestLeftoverStoresRemoved: a collection's store that the registry no
// longer names (a crash between the registry's change and the store's
// removal) is removed at start; the others are kept.
func TestLeftoverStoresRemoved(t *testing.T) {
	dir := t.TempDir()
	ts := newTestServer(t, dir, nil)
	col := base + "/collections/" + ts.create(`{"name":"kept"}`)
	ts.ok(201, "POST", col+"/add", `{"ids":["a"],"embeddings":[[1]]}`)
	ts.close()
	orphan := filepath.Join(dir, "collections", newUUID())
	require.NoError(t, os.MkdirAll(orphan, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(orphan, "store"), []byte("left over"), 0o644))
	ts = newTestServer(t, dir, nil)
	require.NoDirExists(t, orphan)
	requireJSON(t, `1`, ts.ok(200, "GET", col+"/count", nil))
}

// TestWideWriteKeepsEachRecordsOwn: a write big enough that its records'
// rows and payloads are built on every core stores each record with its
// own embedding, metadata and document, whatever worker built it.
func TestWideWriteKeepsEachRecordsOwn(t *testing.T) {
	ts := newTestServer(t, t.TempDir(), nil)
	col := base + "/collections/" + ts.create(`{"name":"wide","configuration":{"hnsw":{"space":"l2"}}}`)
	rng := testkit.Rand(t)
	const n, dim = 300, 768
	ids, embs, docs, metas := make([]string, n), make([]string, n), make([]string, n), make([]map[string]any, n)
	vs := testkit.Vectors(rng, n, dim)
	for i := range ids {
		ids[i], embs[i], docs[i], metas[i] = fmt.Sprintf("r%d", i), b64(vs[i]), fmt.Sprintf("doc %d", i), map[string]any{"n": i}
	}
	ts.ok(201, "POST", col+"/add", map[string]any{"ids": ids, "embeddings": embs, "documents": docs, "metadatas": metas})
	var got struct {
		IDs        []string
		Embeddings [][]float32
		Documents  []string
		Metadatas  []map[string]int
	}
	require.NoError(t, json.Unmarshal([]byte(ts.ok(200, "POST", col+"/get", `{"include":["embeddings","documents","metadatas"]}`)), &got))
	require.Len(t, got.IDs, n)
	for j, id := range got.IDs {
		var i int
		_, err := fmt.Sscanf(id, "r%d", &i)
		require.NoError(t, err)
		require.Equal(t, docs[i], got.Documents[j], id)
		require.Equal(t, map[string]int{"n": i}, got.Metadatas[j], id)
		require.Equal(t, vs[i], got.Embeddings[j], id)
	}
}

// TestWriteAllOrNothing: a write refused for one of its records stores
// none of them — an upsert of a new record and a stored one whose
// replacement is refused leaves both as they were, and a first add with
// embeddings of two dimensions fixes no dimension.
func TestWriteAllOrNothing(t *testing.T) {
	ts := newTestServer(t, t.TempDir(), nil)
	col := base + "/collections/" + ts.create(`{"name":"whole","configuration":{"hnsw":{"space":"cosine"}}}`)
	ts.ok(201, "POST", col+"/add", `{"ids":["a"],"embeddings":[[1,1]],"documents":["kept"]}`)
	code, got := ts.call("POST", col+"/upsert", `{"ids":["new","a"],"embeddings":[[1,0],[0,0]],"documents":["n","changed"]}`)
	require.Equal(t, 400, code, got)
	requireJSON(t, `{"ids":["a"],"embeddings":null,"documents":["kept"],"uris":null,"metadatas":null,"include":["documents"]}`,
		ts.ok(200, "POST", col+"/get", `{"include":["documents"]}`))

	col2 := base + "/collections/" + ts.create(`{"name":"nodim"}`)
	code, got = ts.call("POST", col2+"/add", `{"ids":["a","b"],"embeddings":[[1,2],[1]]}`)
	require.Equal(t, 400, code, got)
	ts.ok(201, "POST", col2+"/add", `{"ids":["a"],"embeddings":[[1]]}`)
}
