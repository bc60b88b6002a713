package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/cluster"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
)

// The memory flags through a cluster: a collection built with --keys,
// --meta and --payload answers --where and --with-payload searches as a
// store built from the same files (IDs differ: the cluster chooses a key's
// ID in its shard; keys, scores and payloads agree), --allow-keys included.
func TestClusterMemoryFromTheCommandLine(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS server (skipped under -short)")
	}
	dir, srv, _, _ := testCluster(t, 1)

	rng := testkit.Rand(t)
	const n, dim = 200, 8
	keys, metaF, payF, _ := memoryFiles(t, dir, n)
	data := writeMatrix(t, dir, "v.npy", randomMatrix(rng, n, dim), "")
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 4, dim), "")
	store := filepath.Join(dir, "mem.umbra")
	ok(t, runUmbra(t, "build", "--data", data, "--keys", keys, "--meta", metaF, "--payload", payF, "--out", store))
	ok(t, runUmbra(t, "build", "--cluster", srv.URL(), "--creds", srv.ClientCreds(), "--collection", "mem", "--shards", "3", "--node-replicas", "2", "--data", data, "--keys", keys, "--meta", metaF, "--payload", payF))
	var info struct {
		Shards       int `json:"shards"`
		NodeReplicas int `json:"node_replicas"`
		Rows         int `json:"rows"`
		Streams      []struct {
			Rows int `json:"rows"`
		} `json:"streams"`
	}
	require.NoError(t, json.Unmarshal([]byte(ok(t, runUmbra(t, "info", "--cluster", srv.URL(), "--creds", srv.ClientCreds(), "--collection", "mem", "--json")).stdout), &info))
	require.Equal(t, [3]int{3, 2, n}, [3]int{info.Shards, info.NodeReplicas, info.Rows}, "info --json: shards, node_replicas, rows")
	require.Len(t, info.Streams, 3)
	require.Equal(t, n, info.Streams[0].Rows+info.Streams[1].Rows+info.Streams[2].Rows, "info --json: the shards' rows")
	require.Contains(t, ok(t, runUmbra(t, "info", "--cluster", srv.URL(), "--creds", srv.ClientCreds(), "--collection", "mem")).stdout, fmt.Sprintf("collection mem: %d rows,", n))
	// The collection exists with 2 node replicas: another count is refused,
	// and --node-replicas means nothing without --cluster.
	r := runUmbra(t, "build", "--cluster", srv.URL(), "--creds", srv.ClientCreds(), "--collection", "mem", "--shards", "3", "--node-replicas", "1", "--data", data)
	require.Equal(t, exitFailure, r.code, r.stderr)
	require.Contains(t, r.stderr, "node replicas 2")
	r = runUmbra(t, "build", "--node-replicas", "2", "--data", data, "--out", filepath.Join(dir, "x.umbra"))
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--node-replicas needs --cluster")

	// A third of the keys, for --allow-keys (alone and with --where).
	body, err := os.ReadFile(keys)
	require.NoError(t, err)
	var some []string
	for i, k := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		if i%3 == 0 {
			some = append(some, k)
		}
	}
	allowKeys := writeFile(t, dir, "allow-keys.txt", []byte(strings.Join(some, "\n")+"\n"))
	for _, args := range [][]string{
		{"--allow-keys", allowKeys},
		{"--allow-keys", allowKeys, "--where", `{"user": "alice"}`, "--with-payload"},
		{"--with-payload"},
		{"--where", `{"user": "alice"}`, "--with-payload"},
		{"--where", `{"$and": [{"tags": {"$contains": "work"}}, {"ts": {"$gte": 1700432000}}]}`},
		{"--where", `{"tags": {"$not_contains": "todo"}}`, "--with-payload"},
	} {
		local := decodeSearch(t, runUmbra(t, append([]string{"search", "--store", store, "--queries", queries, "--k", "7", "--device", "cpu", "--json"}, args...)...))
		remote := decodeSearch(t, runUmbra(t, append([]string{"search", "--cluster", srv.URL(), "--creds", srv.ClientCreds(), "--collection", "mem", "--queries", queries, "--k", "7", "--json"}, args...)...))
		require.Len(t, remote.Results, len(local.Results))
		for q := range local.Results {
			require.Len(t, remote.Results[q].Hits, len(local.Results[q].Hits), "search %v query %d", args, q)
			for i, want := range local.Results[q].Hits {
				got := remote.Results[q].Hits[i]
				require.Equal(t, fmt.Sprint(want.Key, want.Score, string(want.Payload)), fmt.Sprint(got.Key, got.Score, string(got.Payload)), "search %v query %d hit %d", args, q, i)
			}
		}
	}
	// A kind other than the collection's is refused, naming the file.
	bad := writeFile(t, dir, "bad.jsonl", []byte(`{"user": 3}`+"\n"))
	one := writeMatrix(t, dir, "one.npy", randomMatrix(rng, 1, dim), "")
	line := requireErrorLine(t, runUmbra(t, "add", "--cluster", srv.URL(), "--creds", srv.ClientCreds(), "--collection", "mem", "--data", one, "--meta", bad))
	require.Contains(t, line, "--meta "+bad)
	// A key the collection does not hold is named; --allow with
	// --allow-keys is a usage error, as with --store.
	unknown := writeFile(t, dir, "unknown-keys.txt", []byte(some[0]+"\nnobody/m1\n"))
	line = requireErrorLine(t, runUmbra(t, "search", "--cluster", srv.URL(), "--creds", srv.ClientCreds(), "--collection", "mem", "--queries", queries, "--k", "3", "--allow-keys", unknown))
	require.Contains(t, line, `key "nobody/m1" is not stored in collection mem`)
	ids := writeFile(t, dir, "ids.txt", []byte("1\n"))
	r = runUmbra(t, "search", "--cluster", srv.URL(), "--creds", srv.ClientCreds(), "--collection", "mem", "--queries", queries, "--k", "3", "--allow-keys", allowKeys, "--allow", ids)
	require.Equal(t, exitUsage, r.code, r.String())
}

// testCluster starts an embedded NATS server in a test's directory and
// nodes (the first keeping its replicas in that directory, the others in
// their own), all on one connection with the node's credentials, closed
// when the test ends. The commands under test connect with --creds.
func testCluster(t *testing.T, nodes int) (dir string, srv *node.Embedded, c *cluster.Client, ns []*node.Node) {
	t.Helper()
	dir = t.TempDir()
	srv, err := node.StartEmbedded(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: dir})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	c, err = cluster.Connect(ctx, srv.URL(), cluster.Credentials(srv.NodeCreds()), cluster.AsNode())
	require.NoError(t, err)
	t.Cleanup(c.Close)
	x, err := protocol.Dial(ctx, srv.URL(), protocol.DialConfig{Creds: srv.NodeCreds(), Node: true})
	require.NoError(t, err)
	t.Cleanup(x.Close)
	for i := range nodes {
		d := dir
		if i > 0 {
			d = t.TempDir()
		}
		n, err := node.Start(ctx, x, node.Config{Dir: d, Device: engine.CPU, Logf: t.Logf})
		require.NoError(t, err)
		t.Cleanup(func() { n.Close() })
		ns = append(ns, n)
	}
	return dir, srv, c, ns
}
