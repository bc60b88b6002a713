//go:build unix

package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// served is an umbra serve process and what it printed at start.
type served struct {
	url, client, node string
}

var serveLine = regexp.MustCompile(`clients connect with --cluster (\S+) --creds (\S+) \(nodes and operators: (\S+)\)`)

// startServe runs umbra serve in its own process until the test ends (or
// stop is called), and returns where its clients connect and with what.
func startServe(t *testing.T, args ...string) (served, func()) {
	t.Helper()
	cmd := exec.Command(umbraBin, append([]string{"serve", "--listen", "127.0.0.1:0", "--device", "cpu"}, args...)...)
	cmd.Env = childEnv
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cmd.Process.Signal(syscall.SIGINT)
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	deadline := time.After(2 * time.Minute)
	var s served
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				stop()
				t.Fatalf("umbra serve %v ended before it said where clients connect:\n%s", args, stderr.String())
			}
			if m := serveLine.FindStringSubmatch(l); m != nil {
				s = served{url: m[1], client: m[2], node: m[3]}
			}
			if strings.HasPrefix(l, "umbra serve: NATS ") {
				require.NotEmpty(t, s.url, "umbra serve said it runs before saying where clients connect")
				return s, stop
			}
		case <-deadline:
			stop()
			t.Fatalf("umbra serve %v did not start within 2 minutes:\n%s", args, stderr.String())
		}
	}
}

// The cluster commands through umbra serve's own server: without --creds
// they are refused with a line that names --creds and where serve wrote
// the file; with it they work; the files are 0600 and stay the same
// across restarts; --rotate-creds makes the old ones refused.
func TestClusterCredsFromTheCommandLine(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts umbra serve (skipped under -short)")
	}
	dir := t.TempDir()
	node := filepath.Join(dir, "node")
	rng := testkit.Rand(t)
	data := writeMatrix(t, dir, "v.npy", randomMatrix(rng, 40, 6), "")
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 2, 6), "")
	s, stop := startServe(t, "--dir", node)
	require.Equal(t, filepath.Join(node, "creds", "client.nk"), s.client)
	require.Equal(t, filepath.Join(node, "creds", "node.nk"), s.node)
	for _, f := range []string{s.client, s.node} {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
	fi, err := os.Stat(filepath.Dir(s.client))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	// Without credentials: refused, naming the flag and the file.
	line := requireErrorLine(t, runUmbra(t, "build", "--cluster", s.url, "--collection", "docs", "--data", data, "--shards", "2"))
	require.Contains(t, line, "--creds FILE")
	require.Contains(t, line, "D/creds/client.nk")
	require.Contains(t, strings.ToLower(line), "authorization violation")
	// The client's: build (created through the node), info, search.
	ok(t, runUmbra(t, "build", "--cluster", s.url, "--creds", s.client, "--collection", "docs", "--data", data, "--shards", "2"))
	require.Contains(t, ok(t, runUmbra(t, "info", "--cluster", s.url, "--creds", s.client, "--collection", "docs")).stdout, "collection docs: 40 rows")
	ok(t, runUmbra(t, "search", "--cluster", s.url, "--creds", s.client, "--collection", "docs", "--queries", queries, "--k", "3"))
	ok(t, runUmbra(t, "delete", "--cluster", s.url, "--creds", s.client, "--collection", "docs", "--ids", "1"))
	// --creds without --cluster is a usage error.
	r := runUmbra(t, "info", filepath.Join(dir, "x.umbra"), "--creds", s.client)
	require.Equal(t, exitUsage, r.code, r.String())
	require.Contains(t, r.stderr, "--creds needs --cluster")

	// Restarted: the same files, still good.
	saved := writeFile(t, t.TempDir(), "client.nk", mustRead(t, s.client))
	require.NoError(t, os.Chmod(saved, 0o600))
	stop()
	s, stop = startServe(t, "--dir", node)
	require.Equal(t, string(mustRead(t, saved)), string(mustRead(t, s.client)), "the client credentials changed across a restart")
	ok(t, runUmbra(t, "add", "--cluster", s.url, "--creds", saved, "--collection", "docs", "--data", data))

	// Rotated: the saved file is refused, naming it; the new one works.
	stop()
	s, stop = startServe(t, "--dir", node, "--rotate-creds")
	line = requireErrorLine(t, runUmbra(t, "search", "--cluster", s.url, "--creds", saved, "--collection", "docs", "--queries", queries, "--k", "3"))
	require.Contains(t, line, "--creds "+saved)
	require.Contains(t, strings.ToLower(line), "authorization violation")
	ok(t, runUmbra(t, "search", "--cluster", s.url, "--creds", s.client, "--collection", "docs", "--queries", queries, "--k", "3"))

	// A credentials file others may read: serve refuses to start, naming it.
	stop()
	require.NoError(t, os.Chmod(s.node, 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	other := exec.CommandContext(ctx, umbraBin, "serve", "--listen", "127.0.0.1:0", "--device", "cpu", "--dir", node)
	other.Env = childEnv
	out, err := other.CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), s.node)
	require.Contains(t, string(out), "0644")
}
