//go:build !(js && wasm)

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeProgram writes a directory the server accepts with --wasm: a
// main.wasm that is only WebAssembly's header, and a wasm_exec.js.
func fakeProgram(t *testing.T) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wasm_exec.js"), []byte("// test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// closedByServer reads c until it ends and fails the test unless the
// server closed it (EOF or a reset); a read still waiting after a
// minute means the server held it.
func closedByServer(t *testing.T, what string, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("%s: still open after a minute: the server holds it", what)
	}
}

// TestWebServerClosesHalfOpenConnections opens more connections than
// the server serves at once, each holding it a different way — sending
// nothing, half a header, a header and part of a body, a finished
// request then nothing (keep-alive), a request whose large answer it
// does not read — and checks that the server closes every one of them
// by its own timeouts (short ones here), then still answers.
func TestWebServerClosesHalfOpenConnections(t *testing.T) {
	lim := webLimits{readHeader: 200 * time.Millisecond, read: 400 * time.Millisecond, write: 400 * time.Millisecond,
		stall: 200 * time.Millisecond, idle: 200 * time.Millisecond, maxHeaderBytes: 4 << 10, maxConns: 8}
	set := syntheticSet(40000, 64, 1) // a 10 MB /vectors
	h, err := webHandler(set, fakeProgram(t), lim)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	// The server's side of each connection's end, by the client's
	// address: a client that reads nothing waits for it.
	var mu sync.Mutex
	ended := map[string]chan struct{}{}
	endOf := func(addr string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if ended[addr] == nil {
			ended[addr] = make(chan struct{})
		}
		return ended[addr]
	}
	srv := newWebServer(h, lim)
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			close(endOf(c.RemoteAddr().String()))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveUntil(ctx, ln, srv, lim) }()

	kinds := []struct {
		name, send string
		unread     bool // requests /vectors and reads nothing
	}{
		{name: "silent"},
		{name: "half a header", send: "GET / HTTP/1.1\r\nHost: x\r\nUser-Ag"},
		{name: "part of a body", send: "GET /page.js HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc"},
		{name: "idle keep-alive", send: "GET /page.js HTTP/1.1\r\nHost: x\r\n\r\n"},
		{name: "unread answer", send: "GET /vectors HTTP/1.1\r\nHost: x\r\n\r\n", unread: true},
	}
	const each = 6 // 30 connections, 8 served at once
	var wg sync.WaitGroup
	for _, k := range kinds {
		for i := 0; i < each; i++ {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if k.unread {
				// A receive buffer well under the answer, so that the
				// server's writes block (but over loopback's largest
				// segment, so that the data left drains at once later).
				c.(*net.TCPConn).SetReadBuffer(256 << 10)
			}
			if k.send != "" {
				if _, err := io.WriteString(c, k.send); err != nil {
					t.Fatal(err)
				}
			}
			wg.Add(1)
			go func(name string, c net.Conn) {
				defer wg.Done()
				if !k.unread {
					closedByServer(t, name, c)
					return
				}
				// Read nothing until the server has closed the
				// connection; then the answer stops short of its length.
				select {
				case <-endOf(c.LocalAddr().String()):
				case <-time.After(time.Minute):
					t.Errorf("%s: still open after a minute: the server holds it", name)
					return
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					return // closed before the header was sent
				}
				n, err := io.Copy(io.Discard, resp.Body)
				if err == nil && n == resp.ContentLength {
					t.Errorf("%s: the whole answer (%d bytes) came: the server never blocked on it", name, n)
				}
			}(fmt.Sprintf("%s %d", k.name, i), c)
		}
	}
	wg.Wait()

	// Still serving.
	resp, err := http.Get("http://" + addr + "/main.wasm")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/wasm" || !strings.HasPrefix(string(body), "\x00asm") {
		t.Fatalf("after the held connections: main.wasm answered %s, %q, %q", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// entries lists dir's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// startWeb runs serveWeb until stop is called and returns the page's
// address and what it printed so far once it listens.
func startWeb(t *testing.T, o options) (addr string, out *strings.Builder, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := serveWeb(ctx, o, pw)
		pw.CloseWithError(fmt.Errorf("serveWeb returned: %v", err))
		done <- err
	}()
	out = &strings.Builder{}
	sc := bufio.NewScanner(pr)
	re := regexp.MustCompile(`open http://(\S+)/`)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	if addr == "" {
		cancel()
		t.Fatalf("the demo did not listen: %v\n%s", <-done, out)
	}
	go io.Copy(io.Discard, pr)
	return addr, out, func() error { cancel(); return <-done }
}

// sameFile fails the test unless path is still the file first was (the
// same inode, or file ID, and modification time): not rebuilt.
func sameFile(t *testing.T, what string, first os.FileInfo, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(first, fi) || !fi.ModTime().Equal(first.ModTime()) {
		t.Errorf("%s rewrote %s (modified %v, then %v)", what, path, first.ModTime(), fi.ModTime())
	}
}

func stat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// TestWebStartLeavesNothingAndReuses starts and stops the --web server
// twice with a private TMPDIR and cache directory: the first start
// builds the page's program into the cache, the second reuses it (no
// build: the builder's count and the file's inode), and neither leaves
// anything in the temporary directory.
func TestWebStartLeavesNothingAndReuses(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	cache := filepath.Join(t.TempDir(), "cache")
	b := &wasmBuilder{cacheDir: cache}
	o := options{n: 50, dim: 8, seed: 1, listen: "127.0.0.1:0", wasmBuilder: b}
	var first os.FileInfo
	for start := 1; start <= 2; start++ {
		addr, out, stop := startWeb(t, o)
		resp, err := http.Get("http://" + addr + "/main.wasm")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasPrefix(string(body), "\x00asm") || resp.Header.Get("Content-Type") != "application/wasm" {
			t.Fatalf("start %d: main.wasm is %d bytes of %q", start, len(body), resp.Header.Get("Content-Type"))
		}
		if err := stop(); err != nil {
			t.Fatalf("start %d: %v", start, err)
		}
		if left := entries(t, tmp); len(left) > 0 {
			t.Errorf("start %d left %v in TMPDIR", start, left)
		}
		progs, err := filepath.Glob(filepath.Join(cache, "*", "main.wasm"))
		if err != nil || len(progs) != 1 {
			t.Fatalf("start %d: the cache holds %v (%v), want one main.wasm", start, progs, err)
		}
		if others := entries(t, cache); len(others) != 1 {
			t.Errorf("start %d: the cache holds %v, want only the program's directory", start, others)
		}
		if b.builds != 1 {
			t.Errorf("start %d: %d builds, want 1\n%s", start, b.builds, out)
		}
		if start == 1 {
			first = stat(t, progs[0])
			if !strings.Contains(out.String(), "building it into "+filepath.Dir(progs[0])) {
				t.Errorf("start 1 did not say it builds into the cache:\n%s", out)
			}
		} else {
			sameFile(t, "start 2", first, progs[0])
			if !strings.Contains(out.String(), "reusing "+progs[0]) {
				t.Errorf("start 2 did not say it reuses %s:\n%s", progs[0], out)
			}
		}
	}
}

// TestWebFailedBuildLeavesNothing builds with a go whose build fails
// after writing half a program: the error carries the compiler's
// output, and neither the cache nor TMPDIR keeps anything of it.
func TestWebFailedBuildLeavesNothing(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake go is a shell script")
	}
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	fake := filepath.Join(t.TempDir(), "go")
	script := `#!/bin/sh
if [ "$1" = build ]; then
	mkdir -p "$GOTMPDIR/b001" && echo partial > "$GOTMPDIR/b001/x.o" && echo partial > "$3"
	echo "webapp/main.go:1:1: syntax error: injected" >&2
	exit 1
fi
exec ` + realGo + ` "$@"
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache")
	b := &wasmBuilder{cacheDir: cache, goBin: fake}
	_, err = b.get(context.Background(), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "syntax error: injected") {
		t.Fatalf("the failed build returned %v, want the compiler's message", err)
	}
	if left := entries(t, cache); len(left) > 0 {
		t.Errorf("the failed build left %v in the cache", left)
	}
	if left := entries(t, tmp); len(left) > 0 {
		t.Errorf("the failed build left %v in TMPDIR", left)
	}
}

// TestWebOutsideTheModule builds the demo binary and runs --web from a
// directory outside umbra's module, with HOME, XDG_CACHE_HOME and TMPDIR
// private: it builds the page's program into that cache and serves it,
// stops cleanly on SIGINT leaving nothing in TMPDIR, reuses the program
// on its second start, says exactly what to do when there is no Go
// toolchain, and then serves a program given with --wasm.
func TestWebOutsideTheModule(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("stops the demo with SIGINT")
	}
	if testing.Short() {
		t.Skip("builds the demo and its page's program; skipped under -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "demo")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the demo: %v\n%s", err, out)
	}
	// The go command's own caches stay the machine's (a cold build cache
	// would compile the standard library for js/wasm); everything the
	// demo keeps goes under home.
	env := func(name string) string {
		out, err := exec.Command(goBin, "env", name).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	gocache, gomodcache, gopath := env("GOCACHE"), env("GOMODCACHE"), env("GOPATH")
	home, tmp, cwd := t.TempDir(), t.TempDir(), t.TempDir()
	cache := filepath.Join(home, "cache")
	demoEnv := func(path string) []string {
		return []string{"PATH=" + path, "HOME=" + home, "XDG_CACHE_HOME=" + cache, "TMPDIR=" + tmp,
			"GOCACHE=" + gocache, "GOMODCACHE=" + gomodcache, "GOPATH=" + gopath, "GOFLAGS=" + os.Getenv("GOFLAGS"),
			"GOTOOLCHAIN=" + os.Getenv("GOTOOLCHAIN"), "GOPROXY=off"}
	}
	// run starts the demo and, once it serves, fetches main.wasm,
	// interrupts it and returns what it printed.
	run := func(path string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--web", "--listen", "127.0.0.1:0", "--n", "50", "--dim", "8"}, args...)...)
		cmd.Dir, cmd.Env = cwd, demoEnv(path)
		var errb strings.Builder
		cmd.Stderr = &errb
		pr, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		sc := bufio.NewScanner(pr)
		re := regexp.MustCompile(`open http://(\S+)/`)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				resp, err := http.Get("http://" + m[1] + "/main.wasm")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if !strings.HasPrefix(string(body), "\x00asm") || resp.Header.Get("Content-Type") != "application/wasm" {
					t.Errorf("main.wasm from the demo: %d bytes of %q", len(body), resp.Header.Get("Content-Type"))
				}
				cmd.Process.Signal(os.Interrupt)
			}
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	path := os.Getenv("PATH")

	out, errs, code := run(path)
	t.Logf("first start:\n%s", out)
	if code != 0 || !strings.Contains(out, "building it into "+filepath.Join(cache, "umbra", "demo-wasm")) || !strings.Contains(out, "umbra demo: stopped") {
		t.Fatalf("first start: exit %d\nstdout:\n%sstderr:\n%s", code, out, errs)
	}
	progs, _ := filepath.Glob(filepath.Join(cache, "umbra", "demo-wasm", "*", "main.wasm"))
	if len(progs) != 1 {
		t.Fatalf("the cache holds %v, want one main.wasm", progs)
	}
	first := stat(t, progs[0])
	if left := entries(t, tmp); len(left) > 0 {
		t.Errorf("the first start left %v in TMPDIR", left)
	}

	out, errs, code = run(path)
	t.Logf("second start:\n%s", out)
	if code != 0 || !strings.Contains(out, "reusing "+progs[0]) || strings.Contains(out, "building") {
		t.Fatalf("second start: exit %d\nstdout:\n%sstderr:\n%s", code, out, errs)
	}
	sameFile(t, "the second start", first, progs[0])
	if left := entries(t, tmp); len(left) > 0 {
		t.Errorf("the second start left %v in TMPDIR", left)
	}

	// No Go toolchain: the error names the problem and the commands.
	_, errs, code = run(t.TempDir())
	t.Logf("without go:\n%s", errs)
	for _, want := range []string{"no Go toolchain", "GOOS=js GOARCH=wasm go build -o umbra-web/main.wasm ./cmd/demo/webapp", "demo --web --wasm umbra-web"} {
		if code != 1 || !strings.Contains(errs, want) {
			t.Fatalf("without go: exit %d, stderr lacks %q:\n%s", code, want, errs)
		}
	}
	// What it says to do works: --wasm with a built program, no go.
	out, errs, code = run(t.TempDir(), "--wasm", filepath.Dir(progs[0]))
	if code != 0 || !strings.Contains(out, "the page's program from "+filepath.Dir(progs[0])) {
		t.Fatalf("--wasm without go: exit %d\nstdout:\n%sstderr:\n%s", code, out, errs)
	}
}
