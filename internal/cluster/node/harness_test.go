package node

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/cluster"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// harness is one embedded NATS server, a client and a node, all under a
// test's temporary directory.
type harness struct {
	t    *testing.T
	dir  string
	srv  *Embedded
	c    *cluster.Client
	x    *protocol.Conn // the node's connection: c's, as a node's
	node *Node
}

func newHarness(t *testing.T, serve func(string, int) bool) *harness {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster tests start a NATS server (skipped under -short)")
	}
	h := &harness{t: t}
	h.dir, h.srv, h.c = serverAndClient(t, cluster.Timeout(20*time.Second))
	ctx := context.Background()
	var err error
	h.x = connOf(t, h.c)
	h.node, err = Start(ctx, h.x, Config{Dir: h.dir, Device: engine.CPU, Serve: serve, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.node.Close() })
	return h
}

// serverAndClient starts an embedded NATS server in a test's temporary
// directory and connects a client to it with the node's credentials (it
// may run a node), both closed when the test ends.
func serverAndClient(t *testing.T, opts ...cluster.ClientOption) (dir string, srv *Embedded, c *cluster.Client) {
	t.Helper()
	dir = t.TempDir()
	srv, err := StartEmbedded(EmbeddedConfig{Listen: "127.0.0.1:0", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if c, err = cluster.Connect(context.Background(), srv.URL(), append([]cluster.ClientOption{cluster.Credentials(srv.NodeCreds()), cluster.AsNode()}, opts...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return dir, srv, c
}

// mirror applies the same writes to a local engine index: the reference
// every cluster answer must equal exactly (the engine's own tests check it
// against float64 brute force, ties by lower ID included).
type mirror struct {
	ix *engine.Index
}

func newMirror(t *testing.T, dim int, metric umbra.Metric) *mirror {
	ix, err := engine.New(context.Background(), engine.Config{Dim: dim, Metric: metric, Device: engine.CPU})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return &mirror{ix: ix}
}

func sameHits(t *testing.T, what string, want, got []umbra.Hit) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d hits, want %d\n got %v\nwant %v", what, len(got), len(want), got, want)
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: hit %d is %+v, want %+v\n got %v\nwant %v", what, i, got[i], want[i], got, want)
		}
	}
}

// threeServers starts three NATS servers in one cluster on loopback and a
// client of all three, once JetStream has its meta leader (within 50 s).
func threeServers(t *testing.T) ([]*Embedded, *cluster.Client) {
	t.Helper()
	var routes []string
	ports := []int{freePort(t), freePort(t), freePort(t)}
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	var srvs []*Embedded
	creds := filepath.Join(t.TempDir(), "creds")
	for i, p := range ports {
		s, err := StartEmbedded(EmbeddedConfig{Listen: "127.0.0.1:0", Dir: t.TempDir(), Name: fmt.Sprintf("n%d", i),
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
		c, err := cluster.NewClient(actx, nc, cluster.AsNode(), cluster.Timeout(30*time.Second))
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

// noDenials fails the test at its end if the server refused c anything:
// what a role needs must be in its permissions.
func noDenials(t *testing.T, c *protocol.Conn) {
	t.Cleanup(func() {
		if n, last := c.Denials(); n > 0 {
			t.Errorf("the server refused the connection %d requests, the last: %s", n, last)
		}
	})
}

// connOf is a node's connection over c's, a client made with
// cluster.AsNode: the node role's rights, its inbox. The server's
// refusals on it are checked when the test ends.
func connOf(t *testing.T, c *cluster.Client) *protocol.Conn {
	t.Helper()
	x, err := protocol.Open(context.Background(), c.Conn(), true)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// nodeNATS are the nats.Connect options of a node's connection made by
// hand: its credentials and its inbox.
func nodeNATS(t *testing.T, creds string) []nats.Option {
	t.Helper()
	opt, err := nats.NkeyOptionFromSeed(creds)
	if err != nil {
		t.Fatal(err)
	}
	return []nats.Option{opt, nats.CustomInboxPrefix(protocol.NodeInboxPrefix)}
}
