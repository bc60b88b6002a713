package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/cluster"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
)

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServeLines runs `umbra serve ARGS` in the background and returns its
// stdout and stderr lines; it is interrupted when the test ends.
func startServeLines(t *testing.T, args ...string) (stdout, stderr chan string, exited chan error) {
	t.Helper()
	cmd := exec.Command(umbraBin, append([]string{"serve"}, args...)...)
	cmd.Env = childEnv
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errp, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	stdout, stderr, exited = make(chan string, 1024), make(chan string, 1024), make(chan error, 1)
	scan := func(r interface{ Read([]byte) (int, error) }, ch chan string) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case ch <- sc.Text():
			default:
			}
		}
	}
	go scan(out, stdout)
	go scan(errp, stderr)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	return stdout, stderr, exited
}

// `umbra serve --nats` started while its NATS cluster forms (one server of
// three up: JetStream has no meta leader, so the buckets cannot be made)
// waits, saying so, and joins once the other two servers start: it then
// answers searches. Before, it exited with "bucket …: context deadline
// exceeded".
func TestServeWaitsForItsCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts three NATS servers and a node (skipped under -short)")
	}
	ports := []int{freePort(t), freePort(t), freePort(t)}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	clientPorts := []int{freePort(t), freePort(t), freePort(t)}
	creds := filepath.Join(t.TempDir(), "creds") // one set of credentials for the three servers (made 0700)
	start := func(i int) *node.Embedded {
		s, err := node.StartEmbedded(node.EmbeddedConfig{Listen: fmt.Sprintf("127.0.0.1:%d", clientPorts[i]), Dir: t.TempDir(), Creds: creds,
			Name: fmt.Sprintf("n%d", i), ClusterName: "umbra-serve-test", ClusterListen: fmt.Sprintf("127.0.0.1:%d", ports[i]), Routes: routes})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s
	}
	first := start(0)
	url := first.URL()
	stdout, stderr, exited := startServeLines(t, "--nats", url, "--creds", first.NodeCreds(), "--dir", t.TempDir(), "--device", "cpu", "--wait", "3m", "--max-hits", "1000")
	// It waits, and says why.
	deadline := time.After(2 * time.Minute)
	for waiting := false; !waiting; {
		select {
		case l := <-stderr:
			t.Log(l)
			waiting = strings.HasPrefix(l, "umbra serve: waiting for the NATS cluster: ")
		case err := <-exited:
			t.Fatalf("serve exited while its cluster formed: %v", err)
		case <-deadline:
			t.Fatal("serve said nothing of waiting for its cluster")
		}
	}
	start(1)
	start(2)
	for ready := false; !ready; {
		select {
		case l := <-stdout:
			ready = strings.HasPrefix(l, "umbra serve: NATS ")
		case l := <-stderr:
			t.Log(l)
		case err := <-exited:
			t.Fatalf("serve exited: %v", err)
		case <-deadline:
			t.Fatal("serve did not start once its cluster formed")
		}
	}
	// The node answers: a write waits for its outcome from a replica,
	// and a search finds it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.Connect(ctx, url, cluster.Timeout(time.Minute), cluster.Credentials(first.ClientCreds()))
	require.NoError(t, err)
	defer c.Close()
	col, err := c.Create(ctx, "formed", cluster.CollectionConfig{Dim: 4, Shards: 2})
	require.NoError(t, err)
	r := testkit.Rand(t)
	vs := [][]float32{testkit.Unit(r, 4), testkit.Unit(r, 4), testkit.Unit(r, 4)}
	ids, err := col.Add(ctx, umbra.Vectors(vs))
	require.NoError(t, err)
	hits, err := col.Search(ctx, vs[1], 1)
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Equal(t, ids[1], hits[0].ID)
	// info --cluster names the node, its counts and its limits (the
	// flags' defaults, --max-hits as given).
	var info struct {
		Nodes []struct {
			Node     string `json:"node"`
			Shards   int    `json:"shards"`
			Answered uint64 `json:"answered"`
			Refused  struct {
				Total uint64 `json:"total"`
				Hits  uint64 `json:"hits"`
			} `json:"refused"`
			Limits struct {
				MaxWaitMs        int64 `json:"max_wait_ms"`
				MaxRequestBytes  int   `json:"max_request_bytes"`
				MaxInFlight      int   `json:"max_in_flight"`
				MaxInFlightBytes int64 `json:"max_in_flight_bytes"`
				MaxHits          int   `json:"max_hits"`
				PendingBytes     int   `json:"pending_bytes"`
			} `json:"limits"`
			MemoryBound int64 `json:"memory_bound"`
		} `json:"nodes"`
	}
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = col.Search(sctx, vs[0], 1001) // over --max-hits: refused until the deadline
	scancel()
	require.ErrorIs(t, err, cluster.ErrShardsUnavailable)
	require.Contains(t, err.Error(), "over the node's limit of 1000 (Limits.MaxHits)")
	require.NoError(t, json.Unmarshal([]byte(ok(t, runUmbra(t, "info", "--cluster", url, "--creds", first.ClientCreds(), "--collection", "formed", "--json")).stdout), &info))
	require.Len(t, info.Nodes, 1)
	n := info.Nodes[0]
	require.Equal(t, 2, n.Shards)
	require.GreaterOrEqual(t, n.Answered, uint64(3)) // the write's outcome, the search, the rows info asked
	require.Equal(t, n.Refused.Total, n.Refused.Hits)
	require.NotZero(t, n.Refused.Hits)
	def := protocol.Limits{}.WithDefaults()
	require.Equal(t, [6]int64{def.MaxWait.Milliseconds(), int64(def.MaxRequestBytes), int64(def.MaxInFlight), def.MaxInFlightBytes, 1000, int64(def.PendingBytes)},
		[6]int64{n.Limits.MaxWaitMs, int64(n.Limits.MaxRequestBytes), int64(n.Limits.MaxInFlight), n.Limits.MaxInFlightBytes, int64(n.Limits.MaxHits), int64(n.Limits.PendingBytes)})
	require.Equal(t, protocol.Limits{MaxHits: 1000}.MemoryBound(2), n.MemoryBound)
	text := ok(t, runUmbra(t, "info", "--cluster", url, "--creds", first.ClientCreds())).stdout
	t.Log(text)
	require.Contains(t, text, "nodes: 1\n  node "+n.Node+" (")
	require.Contains(t, text, "limits: wait 2s, request 8.0 MiB, 64 requests and 128.0 MiB in flight, 1000 hits an answer")
}

// A failure waiting does not change is not waited on; a cluster that
// never forms is given up after --wait, naming it.
func TestServeGivesUp(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS server (skipped under -short)")
	}
	port := freePort(t)
	// Nothing listens: given up after --wait, naming the flag.
	r := runUmbra(t, "serve", "--nats", fmt.Sprintf("nats://127.0.0.1:%d", port), "--dir", t.TempDir(), "--device", "cpu", "--wait", "1s")
	require.Equal(t, exitFailure, r.code, r.String())
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "umbra: the NATS system at "), r.String())
	require.Contains(t, lines[len(lines)-1], "was not ready within 1s (--wait)")
	require.Contains(t, r.stderr, "umbra serve: waiting for the NATS cluster: ")
	// Bad limits are usage errors.
	r = runUmbra(t, "serve", "--dir", t.TempDir(), "--max-request-mib", "100")
	require.Equal(t, exitUsage, r.code, r.String())
	require.Contains(t, requireErrorLine(t, r), "--max-in-flight-mib 128 is under twice --max-request-mib 100")
}
