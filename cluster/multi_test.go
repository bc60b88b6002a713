package cluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/testkit"
)

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// threeServers starts three NATS servers in one cluster on loopback and a
// client of all three, once JetStream has its meta leader (within 50 s).
func threeServers(t *testing.T) ([]*node.Embedded, *Client) {
	t.Helper()
	var routes []string
	ports := []int{freePort(t), freePort(t), freePort(t)}
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	var srvs []*node.Embedded
	creds := filepath.Join(t.TempDir(), "creds")
	for i, p := range ports {
		s, err := node.StartEmbedded(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: t.TempDir(), Name: fmt.Sprintf("n%d", i),
			ClusterName: "umbra-test", ClusterListen: fmt.Sprintf("127.0.0.1:%d", p), Routes: routes, Creds: creds})
		if err != nil {
			t.Fatal(err)
		}
		srvs = append(srvs, s)
		t.Cleanup(s.Close)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	url := srvs[0].URL() + "," + srvs[1].URL() + "," + srvs[2].URL()
	// JetStream needs its meta leader before buckets can be made.
	for {
		nc, err := nats.Connect(url, append(nodeNATS(t, srvs[0].NodeCreds()), nats.MaxReconnects(-1))...)
		if err != nil {
			t.Fatal(err)
		}
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := NewClient(actx, nc, AsNode(), Timeout(30*time.Second))
		acancel()
		if err == nil {
			t.Cleanup(nc.Close)
			return srvs, c
		}
		nc.Close()
		if ctx.Err() != nil {
			t.Fatalf("the cluster did not form: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Three NATS servers in one cluster on loopback, R3 streams: a server
// shut down mid-writes loses no acknowledged write, and answers stay exact.
func TestClusterThreeServers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts three NATS servers (skipped under -short)")
	}
	srvs, c := threeServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	if c.x.Replicas != 3 {
		t.Fatalf("a client of a NATS cluster makes R%d buckets", c.x.Replicas)
	}
	const dim = 4
	col, err := c.Create(ctx, "m3", CollectionConfig{Dim: dim, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	node, err := node.Start(ctx, c.x, node.Config{Dir: t.TempDir(), Device: engine.CPU})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	ref := newMirror(t, dim, umbra.Cosine)
	r := testkit.Rand(t)
	for i := range 40 {
		vs := make([][]float32, 10)
		for j := range vs {
			vs[j] = testkit.Grid(r, dim)
			vs[j][0] += 1.0 / 64
		}
		ids, err := col.Add(ctx, umbra.Vectors(vs), umbra.NoWait())
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		ref.ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...))
		if i == 15 {
			// A server the client is not on goes away: R3 keeps a
			// majority, writes go on (after an election if it led).
			for _, s := range srvs {
				if s.URL() != c.Conn().ConnectedUrl() {
					s.Close()
					break
				}
			}
		}
	}
	q := testkit.Grid(r, dim)
	q[1] += 1.0 / 64
	got, err := col.Search(ctx, q, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ref.ix.Search(ctx, q, 1000)
	sameHits(t, "after a server left", want, got)
}
