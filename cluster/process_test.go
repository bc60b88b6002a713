//go:build unix

package cluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m, map[string]func() int{"node": childNode, "natsd": childServer})
}

// childNode is a node in its own process, on the server at UMBRA_NATS_URL,
// keeping its replicas under UMBRA_NODE_DIR, until it is killed.
func childNode() int {
	ctx := context.Background()
	c, err := Connect(ctx, os.Getenv("UMBRA_NATS_URL"), Credentials(os.Getenv("UMBRA_NATS_CREDS")), AsNode())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	if ms, _ := strconv.Atoi(os.Getenv("UMBRA_SERVE_DELAY_MS")); ms > 0 {
		// Every request lingers in this replica (fault tests kill it
		// while requests are in it).
		hold := func(*node.Node) { time.Sleep(time.Duration(ms) * time.Millisecond) }
		node.TestHooks.Serve.Store(&hold)
	}
	if _, err := node.Start(ctx, c.x, node.Config{Dir: os.Getenv("UMBRA_NODE_DIR"), Device: engine.CPU, Logf: logf}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	select {}
}

// startChildNode starts a node process on srv, with its node credentials,
// and waits for it to be ready; its log lines go to the returned channel.
func startChildNode(t *testing.T, srv *node.Embedded, dir string, env ...string) (*os.Process, chan string) {
	t.Helper()
	cmd := testkit.Child("node", append([]string{"UMBRA_NATS_URL=" + srv.URL(), "UMBRA_NATS_CREDS=" + srv.NodeCreds(), "UMBRA_NODE_DIR=" + dir}, env...)...)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ready <- sc.Scan() && sc.Text() == "ready"
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the node process did not start")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the node process did not start within 30 s")
	}
	return cmd.Process, lines
}

// A node SIGKILLed while it applies a stream of writes, and started again
// on the same directory, resumes from the sequence its stores recorded:
// every acknowledged write is there exactly once, the answers equal the
// reference's.
func TestClusterNodeKilledMidApplyResumes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS server and node processes (skipped under -short)")
	}
	dir, srv, c := serverAndClient(t, Timeout(30*time.Second))
	ctx := context.Background()
	const dim, shards = 8, 2
	col, err := c.Create(ctx, "k", CollectionConfig{Dim: dim, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	ref := newMirror(t, dim, umbra.Cosine)
	r := testkit.Rand(t)
	nodeDir := dir + "/node"
	proc, _ := startChildNode(t, srv, nodeDir)
	write := func(i int) {
		vs := make([][]float32, 20)
		for j := range vs {
			vs[j] = testkit.Grid(r, dim)
			vs[j][0] += 1.0 / 64
		}
		ids, err := col.Add(ctx, umbra.Vectors(vs), umbra.NoWait())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ref.ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 { // upserts and deletes too
			if _, err := col.Upsert(ctx, umbra.Vectors(vs[:5]), umbra.WithIDs(ids[10:15]...), umbra.NoWait()); err != nil {
				t.Fatal(err)
			}
			ref.ix.Upsert(ctx, umbra.Vectors(vs[:5]), umbra.WithIDs(ids[10:15]...))
			if err := col.Delete(ctx, umbra.WithIDs(ids[0]), umbra.NoWait()); err != nil {
				t.Fatal(err)
			}
			ref.ix.Delete(ctx, umbra.WithIDs(ids[0]))
		}
	}
	for i := range 150 {
		write(i)
		if i == 100 {
			if err := proc.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	proc2, lines := startChildNode(t, srv, nodeDir)
	defer proc2.Kill()
	// The restarted node says where its stores stood.
	resumed := regexp.MustCompile(`shard k/(\d+): store applied through message (\d+)`)
	var from []uint64
	deadline := time.After(10 * time.Second)
	for len(from) < shards {
		select {
		case l := <-lines:
			if m := resumed.FindStringSubmatch(l); m != nil {
				n, _ := strconv.ParseUint(m[2], 10, 64)
				from = append(from, n)
			}
		case <-deadline:
			t.Fatalf("the restarted node did not say where it resumed (%v so far)", from)
		}
	}
	t.Logf("killed at write 100 of 150; the restarted node resumed after messages %v of %v", from, col.Token())
	// Searches read every write of this handle (its token): the node must
	// have applied them all, once.
	queries := make([][]float32, 10)
	for i := range queries {
		queries[i] = testkit.Grid(r, dim)
		queries[i][1] += 1.0 / 64
	}
	got, err := col.SearchBatch(ctx, queries, 50)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range queries {
		want, _ := ref.ix.Search(ctx, q, 50)
		sameHits(t, fmt.Sprintf("query %d", i), want, got[i])
	}
	all, err := col.Search(ctx, queries[0], 100000)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != ref.ix.Len() {
		t.Fatalf("the cluster holds %d rows, the reference %d", len(all), ref.ix.Len())
	}
	_ = strings.TrimSpace
}
