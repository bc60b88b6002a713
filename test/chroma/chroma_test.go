// Package chromatest drives `umbra serve --http` from outside, as a Chroma
// user would: the official chromadb@3.5.0 JavaScript client (client.test.mjs),
// the differential test against a real Chroma (differential.mjs, when
// UMBRA_CHROMA_REF names one), a write acknowledged over HTTP surviving a
// SIGKILL of the server, and the refusal to listen beyond loopback without a
// token.
//
// The JavaScript side needs node and `npm ci` in this directory. Without
// them the tests that need them skip, saying so, unless
// UMBRA_REQUIRE_CHROMA_CLIENT=1 (CI sets it): then they fail.
package chromatest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/umbravec/umbra/internal/testkit"
)

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// umbraBinary builds ./cmd/umbra once per test binary, or takes the one
// UMBRA_CHROMA_BIN names (a build from elsewhere).
func umbraBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("UMBRA_CHROMA_BIN"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "umbra-chroma-bin-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "umbra")
		if runtime.GOOS == "windows" {
			buildBin += ".exe"
		}
		cmd := exec.Command("go", "build", "-o", buildBin, "github.com/umbravec/umbra/cmd/umbra")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/umbra: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// nodeClient returns the node binary when node and the pinned client are
// installed here; otherwise it skips t, or fails it where CI requires them.
func nodeClient(t *testing.T) string {
	t.Helper()
	missing := func(why string) {
		if os.Getenv("UMBRA_REQUIRE_CHROMA_CLIENT") == "1" {
			t.Fatalf("%s (UMBRA_REQUIRE_CHROMA_CLIENT=1: the Chroma client tests must run)", why)
		}
		t.Skipf("%s; set UMBRA_REQUIRE_CHROMA_CLIENT=1 to make this a failure", why)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "chromadb", "package.json")); err != nil {
		missing("test/chroma/node_modules lacks chromadb: run `npm ci` in test/chroma")
	}
	return node
}

// lockedBuffer collects a child's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type server struct {
	cmd    *exec.Cmd
	url    string
	token  string
	out    *lockedBuffer
	exited chan struct{}
}

var listenLine = regexp.MustCompile(`Chroma API on (http://\S+)`)

// startServer runs `umbra serve --http 127.0.0.1:0 --dir dir extra...`,
// learns its address from the line it prints, and waits for its heartbeat.
func startServer(t *testing.T, dir, token string, extra ...string) *server {
	t.Helper()
	args := append([]string{"serve", "--http", "127.0.0.1:0", "--dir", dir}, extra...)
	cmd := exec.Command(umbraBinary(t), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, token: token, out: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = s.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("umbra %s: %v", strings.Join(args, " "), err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.out, line)
			if m := listenLine.FindStringSubmatch(line); m != nil {
				select {
				case urlc <- m[1]:
				default:
				}
			}
		}
	}()
	go func() { cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() { s.kill() })
	select {
	case s.url = <-urlc:
	case <-s.exited:
		t.Fatalf("umbra %s exited before listening:\n%s", strings.Join(args, " "), s.out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("umbra %s printed no \"Chroma API on http://…\" line in 60 s:\n%s", strings.Join(args, " "), s.out.String())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _, err := s.do(http.MethodGet, "/api/v2/heartbeat", nil)
		if err == nil && st == http.StatusOK {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat from %s in 30 s (last: %d %v):\n%s", s.url, st, err, s.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *server) kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exited
	}
}

// do sends one request (body marshalled as JSON) and returns the status and
// the raw answer.
func (s *server) do(method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, r)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.token != "" {
		req.Header.Set("X-Chroma-Token", s.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// must sends a request that has to succeed, decoding the answer into out.
func (s *server) must(t *testing.T, method, path string, body, out any) {
	t.Helper()
	st, b, err := s.do(method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if st/100 != 2 {
		t.Fatalf("%s %s: status %d: %s", method, path, st, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
}

// runNode runs a script of this directory with the seed derived from the
// test's, and fails t with its output unless it exits 0.
func runNode(t *testing.T, node string, args ...string) {
	t.Helper()
	seed := testkit.Rand(t).Uint32()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Env = testkit.Env(fmt.Sprintf("UMBRA_SEED=%d", seed))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s (UMBRA_SEED=%d): %v\n%s", strings.Join(args, " "), seed, err, out)
	}
	t.Logf("node %s:\n%s", strings.Join(args, " "), out)
}

// TestChromaClient: the official client, every operation, against a server
// without a token that refuses reset, then against one with a token that
// allows it.
func TestChromaClient(t *testing.T) {
	node := nodeClient(t)
	s := startServer(t, t.TempDir(), "")
	runNode(t, node, "client.test.mjs", s.url, "--reset", "refused")
	s.kill()

	tokenFile := filepath.Join(t.TempDir(), "token")
	token := fmt.Sprintf("tok-%016x", testkit.Rand(t).Uint64())
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := startServer(t, t.TempDir(), token, "--token-file", tokenFile, "--allow-reset")
	runNode(t, node, "client.test.mjs", s2.url, "--token", token, "--reset", "allowed")
}

// TestChromaDifferential: the same requests to umbra and to the Chroma at
// UMBRA_CHROMA_REF (e.g. one started by ../shared/tools/chroma-local.sh),
// answers compared.
func TestChromaDifferential(t *testing.T) {
	ref := os.Getenv("UMBRA_CHROMA_REF")
	if ref == "" {
		t.Skip("UMBRA_CHROMA_REF is not set: no reference Chroma to compare with")
	}
	node := nodeClient(t)
	s := startServer(t, t.TempDir(), "")
	runNode(t, node, "differential.mjs", s.url, ref)
}

// TestChromaWriteSurvivesKill: records acknowledged over HTTP are there,
// whole, after the server is killed with SIGKILL and started again.
func TestChromaWriteSurvivesKill(t *testing.T) {
	r := testkit.Rand(t)
	dir := t.TempDir()
	s := startServer(t, dir, "")
	const db = "/api/v2/tenants/default_tenant/databases/default_database"
	var col struct {
		ID string `json:"id"`
	}
	s.must(t, http.MethodPost, db+"/collections", map[string]any{"name": "survivor", "configuration": map[string]any{"hnsw": map[string]any{"space": "l2"}}, "metadata": map[string]any{"kept": true}}, &col)
	const n, dim = 300, 12
	ids := make([]string, n)
	embs := make([][]float32, n)
	metas := make([]map[string]any, n)
	docs := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("k%d", i)
		embs[i] = make([]float32, dim)
		for j := range embs[i] {
			embs[i][j] = float32(r.NormFloat64())
		}
		metas[i] = map[string]any{"i": i, "half": i%2 == 0}
		docs[i] = fmt.Sprintf("document %d", i)
	}
	// Two adds and an update, each acknowledged before the kill.
	s.must(t, http.MethodPost, db+"/collections/"+col.ID+"/add", map[string]any{"ids": ids[:200], "embeddings": embs[:200], "metadatas": metas[:200], "documents": docs[:200]}, nil)
	s.must(t, http.MethodPost, db+"/collections/"+col.ID+"/add", map[string]any{"ids": ids[200:], "embeddings": embs[200:], "metadatas": metas[200:], "documents": docs[200:]}, nil)
	docs[7] = "rewritten just before the kill"
	s.must(t, http.MethodPost, db+"/collections/"+col.ID+"/update", map[string]any{"ids": []string{ids[7]}, "documents": []string{docs[7]}}, nil)
	// Deletes acknowledged before the kill stay deleted: ids, and a where.
	gone := map[string]bool{}
	var del struct {
		Deleted int `json:"deleted"`
	}
	s.must(t, http.MethodPost, db+"/collections/"+col.ID+"/delete", map[string]any{"ids": ids[10:15]}, &del)
	for _, id := range ids[10:15] {
		gone[id] = true
	}
	s.must(t, http.MethodPost, db+"/collections/"+col.ID+"/delete", map[string]any{"where": map[string]any{"i": map[string]any{"$gte": 290}}}, &del)
	for _, id := range ids[290:] {
		gone[id] = true
	}
	// A collection created and one deleted before the kill.
	s.must(t, http.MethodPost, db+"/collections", map[string]any{"name": "short-lived"}, nil)
	s.must(t, http.MethodDelete, db+"/collections/short-lived", nil, nil)
	s.must(t, http.MethodPost, db+"/collections", map[string]any{"name": "created-last"}, nil)
	// A tenant and a database in it, with a collection.
	s.must(t, http.MethodPost, "/api/v2/tenants", map[string]any{"name": "acme"}, nil)
	s.must(t, http.MethodPost, "/api/v2/tenants/acme/databases", map[string]any{"name": "notes"}, nil)
	s.must(t, http.MethodPost, "/api/v2/tenants/acme/databases/notes/collections", map[string]any{"name": "inner"}, nil)
	s.kill()

	s2 := startServer(t, dir, "")
	var count int
	s2.must(t, http.MethodGet, db+"/collections/"+col.ID+"/count", nil, &count)
	if count != n-len(gone) {
		t.Fatalf("after SIGKILL and restart: count %d, want %d\n%s", count, n-len(gone), s2.out.String())
	}
	if st, b, _ := s2.do(http.MethodGet, db+"/collections/short-lived", nil); st != http.StatusNotFound {
		t.Fatalf("after restart: the collection deleted before the kill answers %d %s, want 404", st, b)
	}
	s2.must(t, http.MethodGet, db+"/collections/created-last", nil, nil)
	s2.must(t, http.MethodGet, "/api/v2/tenants/acme", nil, nil)
	s2.must(t, http.MethodGet, "/api/v2/tenants/acme/databases/notes", nil, nil)
	s2.must(t, http.MethodGet, "/api/v2/tenants/acme/databases/notes/collections/inner", nil, nil)
	var got struct {
		IDs        []string         `json:"ids"`
		Embeddings [][]float32      `json:"embeddings"`
		Metadatas  []map[string]any `json:"metadatas"`
		Documents  []string         `json:"documents"`
	}
	s2.must(t, http.MethodPost, db+"/collections/"+col.ID+"/get", map[string]any{"include": []string{"embeddings", "metadatas", "documents"}}, &got)
	if len(got.IDs) != n-len(gone) {
		t.Fatalf("after restart: get returned %d records, want %d", len(got.IDs), n-len(gone))
	}
	for k, id := range got.IDs {
		var i int
		if _, err := fmt.Sscanf(id, "k%d", &i); err != nil || i < 0 || i >= n || gone[id] {
			t.Fatalf("after restart: unexpected id %q (deleted before the kill: %v)", id, gone[id])
		}
		for j := range dim {
			if got.Embeddings[k][j] != embs[i][j] {
				t.Fatalf("after restart: %s embedding[%d] = %v, want %v", id, j, got.Embeddings[k][j], embs[i][j])
			}
		}
		if got.Documents[k] != docs[i] {
			t.Fatalf("after restart: %s document %q, want %q", id, got.Documents[k], docs[i])
		}
		if v, ok := got.Metadatas[k]["i"].(float64); !ok || int(v) != i || got.Metadatas[k]["half"] != (i%2 == 0) {
			t.Fatalf("after restart: %s metadata %v, want i=%d half=%v", id, got.Metadatas[k], i, i%2 == 0)
		}
	}
	// The collection's own metadata and space survive, and a query is exact.
	var c2 struct {
		Metadata map[string]any `json:"metadata"`
		Config   struct {
			HNSW struct {
				Space string `json:"space"`
			} `json:"hnsw"`
		} `json:"configuration_json"`
	}
	s2.must(t, http.MethodGet, db+"/collections/survivor", nil, &c2)
	if c2.Metadata["kept"] != true || c2.Config.HNSW.Space != "l2" {
		t.Fatalf("after restart: collection metadata %v, space %q; want {kept: true}, l2", c2.Metadata, c2.Config.HNSW.Space)
	}
	q := embs[123]
	var res struct {
		IDs       [][]string  `json:"ids"`
		Distances [][]float64 `json:"distances"`
	}
	s2.must(t, http.MethodPost, db+"/collections/"+col.ID+"/query", map[string]any{"query_embeddings": [][]float32{q}, "n_results": 1, "include": []string{"distances"}}, &res)
	if len(res.IDs) != 1 || len(res.IDs[0]) != 1 || res.IDs[0][0] != "k123" || math.Abs(res.Distances[0][0]) > 1e-6 {
		t.Fatalf("after restart: query for k123's own vector answered %v %v", res.IDs, res.Distances)
	}
}

// TestChromaRefusesOpenListenWithoutToken: --http beyond loopback without
// --token-file is refused at start, naming the flag; with one it serves.
func TestChromaRefusesOpenListenWithoutToken(t *testing.T) {
	bin := umbraBinary(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, "serve", "--http", addr, "--dir", t.TempDir())
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() == context.DeadlineExceeded
		cancel()
		if timedOut {
			t.Fatalf("umbra serve --http %s without --token-file was still running after 30 s: it must refuse at start\n%s", addr, out)
		}
		if err == nil {
			t.Fatalf("umbra serve --http %s without --token-file exited 0; want a refusal\n%s", addr, out)
		}
		if !strings.Contains(string(out), "--token-file") {
			t.Fatalf("umbra serve --http %s: the refusal should name --token-file:\n%s", addr, out)
		}
	}
	// With a token the same address is served, and a request without the
	// token is refused.
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("open-sesame\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--http", "0.0.0.0:0", "--dir", t.TempDir(), "--token-file", tokenFile)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	var url string
	for sc.Scan() {
		if m := listenLine.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
			break
		}
	}
	if url == "" {
		t.Fatalf("umbra serve --http 0.0.0.0:0 --token-file printed no address:\n%s", stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	port := url[strings.LastIndex(url, ":")+1:]
	s := &server{url: "http://127.0.0.1:" + port}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, b, err := s.do(http.MethodGet, "/api/v2/tenants/default_tenant/databases/default_database/collections", nil)
		if err == nil {
			if st != http.StatusUnauthorized {
				t.Fatalf("no token: status %d %s, want 401", st, b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server with --token-file never answered: %v\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.token = "open-sesame"
	if st, b, err := s.do(http.MethodGet, "/api/v2/tenants/default_tenant/databases/default_database/collections", nil); err != nil || st != http.StatusOK {
		t.Fatalf("with the token: %d %s %v, want 200", st, b, err)
	}
}
