package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// httpServer is a running `umbra serve --http`.
type httpServer struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

var listening = regexp.MustCompile(`Chroma API on http://\S*:(\d+) `)

// startHTTP starts umbra serve --http 127.0.0.1:0 with args and waits for
// the line that says where it listens.
func startHTTP(t *testing.T, args ...string) *httpServer {
	t.Helper()
	return startHTTPAt(t, "127.0.0.1:0", args...)
}

// startHTTPAt is startHTTP on addr; the server is reached on loopback.
func startHTTPAt(t *testing.T, addr string, args ...string) *httpServer {
	t.Helper()
	cmd := exec.Command(umbraBin, append([]string{"serve", "--http", addr, "--device", "cpu"}, args...)...)
	cmd.Env = childEnv
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	s := &httpServer{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- "http://127.0.0.1:" + m[1]
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.kill() })
	select {
	case s.url = <-found:
	case <-s.done:
		t.Fatalf("umbra serve --http exited before listening: %s", stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("umbra serve --http did not listen: %s", stderr.String())
	}
	return s
}

// kill ends the server with SIGKILL: no shutdown, no flush.
func (s *httpServer) kill() {
	s.cmd.Process.Kill()
	<-s.done
}

func (s *httpServer) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), "POST", s.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const chromaDB = "/api/v2/tenants/default_tenant/databases/default_database"

// TestServeHTTPWriteSurvivesKill: every write `umbra serve --http`
// acknowledged — a collection created, records added, updated and
// deleted — is there after the server is killed with SIGKILL and started
// again on the same directory.
func TestServeHTTPWriteSurvivesKill(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	s := startHTTP(t, "--dir", dir)
	code, body := s.post(t, chromaDB+"/collections", `{"name":"durable","metadata":{"owner":"me"}}`)
	require.Equal(t, 200, code, body)
	var col struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &col))
	path := chromaDB + "/collections/" + col.ID
	want := map[string]string{}
	for i := range 40 {
		id := fmt.Sprintf("m%d", i)
		doc := fmt.Sprintf("memory %d of %d", i, rng.IntN(1000))
		code, body := s.post(t, path+"/add", fmt.Sprintf(`{"ids":[%q],"embeddings":[[%g,%g,1]],"documents":[%q]}`, id, rng.Float64(), rng.Float64(), doc))
		require.Equal(t, 201, code, body)
		want[id] = doc
		if i%7 == 3 {
			code, body = s.post(t, path+"/delete", fmt.Sprintf(`{"ids":[%q]}`, id))
			require.Equal(t, 200, code, body)
			delete(want, id)
		}
	}
	code, body = s.post(t, path+"/update", `{"ids":["m0"],"embeddings":[[0,0,1]],"documents":["changed"]}`)
	require.Equal(t, 200, code, body)
	want["m0"] = "changed"
	s.kill()

	s2 := startHTTP(t, "--dir", dir)
	code, body = s2.post(t, path+"/get", `{"include":["documents"]}`)
	require.Equal(t, 200, code, body)
	var got struct {
		IDs       []string
		Documents []string
	}
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	have := map[string]string{}
	for i, id := range got.IDs {
		have[id] = got.Documents[i]
	}
	require.Equal(t, want, have)
	code, body = s2.post(t, path+"/get", `{"where_document":{"$contains":"changed"},"include":[]}`)
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `"ids":["m0"]`)
}

// TestServeHTTPRefusesOpenListenWithoutToken: without --token-file the
// server refuses, at start, to listen beyond loopback; with one it
// starts, and requests without the token are 401.
func TestServeHTTPRefusesOpenListenWithoutToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		r := runUmbra(t, "serve", "--http", addr, "--dir", dir)
		require.Equal(t, exitUsage, r.code, "%s: %s", addr, r)
		require.Contains(t, requireErrorLine(t, r), "--token-file", addr)
	}
	r := runUmbra(t, "serve", "--token-file", "x", "--dir", dir)
	require.Equal(t, exitUsage, r.code, "%s", r)
	require.Contains(t, requireErrorLine(t, r), "--token-file needs --http")

	tok := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tok, []byte("t0k3n\n"), 0o600))
	srv := startHTTPAt(t, "0.0.0.0:0", "--token-file", tok, "--dir", dir)
	resp, err := http.Get(srv.url + "/api/v2/heartbeat")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 401, resp.StatusCode)
	req, _ := http.NewRequest("GET", srv.url+"/api/v2/heartbeat", nil)
	req.Header.Set("x-chroma-token", "t0k3n")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}

// TestServeHTTPPrecisionRefusedWhereUnread: --precision chooses the copy a
// store's searches scan; a cluster's replicas and a cluster node read no
// such flag, so there it is refused by name rather than ignored.
func TestServeHTTPPrecisionRefusedWhereUnread(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runUmbra(t, "serve", "--precision", "f16", "--dir", dir)
	require.Equal(t, exitUsage, r.code, "%s", r)
	require.Contains(t, requireErrorLine(t, r), "--precision needs --http")

	r = runUmbra(t, "serve", "--http", "127.0.0.1:0", "--cluster", "nats://127.0.0.1:1", "--precision", "int8", "--dir", dir)
	require.Equal(t, exitUsage, r.code, "%s", r)
	require.Contains(t, requireErrorLine(t, r), "--precision int8: a cluster's replicas scan float32")

	r = runUmbra(t, "serve", "--http", "127.0.0.1:0", "--precision", "f64", "--dir", dir)
	require.Equal(t, exitUsage, r.code, "%s", r)
	require.Contains(t, requireErrorLine(t, r), "--precision f64")
}

// TestServeHTTPServerTiming: --server-timing makes the server's answers
// carry a Server-Timing header with its stages; without --http it is
// refused by name.
func TestServeHTTPServerTiming(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runUmbra(t, "serve", "--server-timing", "--dir", dir)
	require.Equal(t, exitUsage, r.code, "%s", r)
	require.Contains(t, requireErrorLine(t, r), "--server-timing needs --http")

	for _, on := range []bool{false, true} {
		args := []string{"--dir", t.TempDir()}
		if on {
			args = append(args, "--server-timing")
		}
		s := startHTTP(t, args...)
		resp, err := http.Get(s.url + "/api/v2/heartbeat")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		h := resp.Header.Get("Server-Timing")
		if on {
			require.Regexp(t, `^encode;dur=[0-9.]+, total;dur=[0-9.]+$`, h)
		} else {
			require.Empty(t, h)
		}
		s.kill()
	}
}
