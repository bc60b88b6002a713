package chroma

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/cluster"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestClusterBackendAnswersAsStores: the same requests, sent to a server
// over stores and to one over a cluster's collections (an embedded NATS
// server and one node), get the same answers: the handler is written
// against umbra.Collection only.
func TestClusterBackendAnswersAsStores(t *testing.T) {
	rng := testkit.Rand(t)
	dir := t.TempDir()
	srv, err := node.StartEmbedded(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: dir})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	x, err := protocol.Dial(ctx, srv.URL(), protocol.DialConfig{Creds: srv.NodeCreds(), Node: true})
	require.NoError(t, err)
	t.Cleanup(x.Close)
	n, err := node.Start(ctx, x, node.Config{Dir: t.TempDir(), Device: engine.CPU, Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { n.Close() })
	c, err := cluster.Connect(ctx, srv.URL(), cluster.Credentials(srv.ClientCreds()))
	require.NoError(t, err)
	t.Cleanup(c.Close)

	stores := newTestServer(t, t.TempDir(), nil)
	clustered := newTestServer(t, t.TempDir(), func(cfg *Config) { cfg.Backend = NewClusterBackend(c) })

	const rows, dim = 60, 6
	vecs := testkit.Vectors(rng, rows, dim)
	ids := make([]string, rows)
	docs := make([]string, rows)
	metas := make([]map[string]any, rows)
	words := []string{"red", "green", "blue"}
	for i := range rows {
		ids[i] = fmt.Sprintf("id%02d", i)
		docs[i] = words[i%3] + " thing " + words[(i/3)%3]
		metas[i] = map[string]any{"g": i % 4, "tag": words[i%3]}
	}
	addBody := must(json.Marshal(map[string]any{"ids": ids, "embeddings": vecs, "documents": docs, "metadatas": metas}))
	q := must(json.Marshal([][]float32{testkit.Vector(rng, dim), testkit.Vector(rng, dim)}))
	steps := []struct {
		method, path, body string
	}{
		{"POST", "/add", string(addBody)},
		{"GET", "/count", ""},
		{"POST", "/get", `{"ids":["id03","id07","nope"],"include":["documents","metadatas","embeddings"]}`},
		{"POST", "/get", `{"where":{"g":2},"limit":5,"offset":2}`},
		{"POST", "/query", `{"query_embeddings":` + string(q) + `,"n_results":5,"include":["distances","documents","metadatas"]}`},
		{"POST", "/query", `{"query_embeddings":` + string(q) + `,"n_results":4,"where":{"tag":{"$ne":"red"}},"where_document":{"$contains":"thing blue"}}`},
		{"POST", "/update", `{"ids":["id01"],"documents":["changed words"],"metadatas":[{"g":9}]}`},
		{"POST", "/upsert", `{"ids":["id02","new"],"embeddings":[[1,0,0,0,0,0],[0,1,0,0,0,0]],"documents":["upserted","fresh"]}`},
		{"POST", "/delete", `{"where":{"g":3}}`},
		{"POST", "/get", `{"include":["documents","metadatas"]}`},
		{"POST", "/query", `{"query_embeddings":[[1,0,0,0,0,0]],"n_results":3,"ids":["id01","id02","new"]}`},
		{"POST", "/get", `{"where_document":{"$contains":"changed"}}`},
	}
	colOf := map[*testServer]string{}
	for _, ts := range []*testServer{stores, clustered} {
		colOf[ts] = base + "/collections/" + ts.create(`{"name":"same","configuration":{"hnsw":{"space":"cosine"}}}`)
	}
	for _, s := range steps {
		var answers []string
		for _, ts := range []*testServer{stores, clustered} {
			code, got := ts.call(s.method, colOf[ts]+s.path, s.body)
			require.Less(t, code, 300, "%s %s: %s", s.method, s.path, got)
			answers = append(answers, got)
		}
		requireJSON(t, answers[0], answers[1], "%s %s %s", s.method, s.path, firstN(s.body, 200))
	}
	// Deleting the collection empties its cluster collection.
	clustered.ok(200, "DELETE", base+"/collections/same", nil)
	col, err := c.Open(ctx, clusterName(strings.TrimPrefix(colOf[clustered], base+"/collections/")))
	require.NoError(t, err)
	defer col.Close()
	sum, err := col.Summary(ctx)
	require.NoError(t, err)
	require.Zero(t, sum.Rows)
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
