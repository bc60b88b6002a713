package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// The --web mode: a page that runs umbra as wasm on the browser's GPU
// (WebGPU, internal/webgpu), or on its CPU when the browser has no usable
// adapter. The page (web/) is embedded; its program (./webapp) is built
// once for each state of its source and kept in the user's cache
// directory (wasm.go), or given with --wasm. Nothing is fetched from
// another site.

//go:embed web
var webFiles embed.FS

// webLimits bound what a client can hold of the server: the time to send
// a request's header and whole request, to take a small response, to
// take each piece of a large one (main.wasm, the vectors: stall, renewed
// at every write, so a slow link gets any time it needs while it keeps
// reading), an idle keep-alive connection's life, a header's size, and
// the connections served at once (more wait to be accepted).
type webLimits struct {
	readHeader, read, write, stall, idle time.Duration
	maxHeaderBytes, maxConns             int
}

// defaultWebLimits are the server's: a browser sends its header in
// milliseconds and opens at most six connections to a host.
var defaultWebLimits = webLimits{
	readHeader:     10 * time.Second,
	read:           30 * time.Second,
	write:          time.Minute,
	stall:          time.Minute,
	idle:           time.Minute,
	maxHeaderBytes: 16 << 10,
	maxConns:       64,
}

// runWeb serves the page until Ctrl-C (SIGINT) or SIGTERM, then shuts the
// server down gracefully.
func runWeb(o options, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C ends the demo at once
	}()
	return serveWeb(ctx, o, stdout)
}

// serveWeb gets the page's program, loads the vectors, listens on
// o.listen and serves until ctx ends, telling stdout each step.
func serveWeb(ctx context.Context, o options, stdout io.Writer) error {
	var w pageWasm
	var err error
	if o.wasm != "" {
		if w, err = fromDir(o.wasm); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "umbra demo: the page's program from %s\n", o.wasm)
	} else {
		b := o.wasmBuilder
		if b == nil {
			b = &wasmBuilder{}
		}
		if w, err = b.get(ctx, stdout); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted while preparing the page's program: %w", err)
			}
			return err
		}
	}
	set, err := webSet(o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "umbra demo: %d × %d vectors (%s), %.1f MB\n", set.rows, set.dim, set.source, float64(8+4*len(set.data))/1e6)
	h, err := webHandler(set, w.dir, o.limits())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.listen, err)
	}
	fmt.Fprintf(stdout, "umbra demo: open http://%s/ in a browser with WebGPU (Ctrl-C stops)\n", ln.Addr())
	err = serveUntil(ctx, ln, newWebServer(h, o.limits()), o.limits())
	if err == nil {
		fmt.Fprintln(stdout, "umbra demo: stopped")
	}
	return err
}

func (o options) limits() webLimits {
	if o.webLimits != nil {
		return *o.webLimits
	}
	return defaultWebLimits
}

// webSet is the vectors the page indexes.
func webSet(o options) (*memorySet, error) {
	if o.data != "" {
		return loadSet(o.data, o.n)
	}
	return syntheticSet(o.n, o.dim, o.seed), nil
}

// newWebServer is the page's server with lim's timeouts.
func newWebServer(h http.Handler, lim webLimits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.readHeader,
		ReadTimeout:       lim.read,
		WriteTimeout:      lim.write,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    lim.maxHeaderBytes,
	}
}

// shutdownGrace is how long a stopping server lets the requests under
// way finish before it closes their connections.
const shutdownGrace = 5 * time.Second

// serveUntil serves srv on ln, at most lim.maxConns connections at once,
// until ctx ends; then it stops accepting, lets the requests under way
// finish for up to shutdownGrace (or lim.write, if shorter) and closes
// what remains.
func serveUntil(ctx context.Context, ln net.Listener, srv *http.Server, lim webLimits) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(limitListener(ln, lim.maxConns)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	grace := shutdownGrace
	if lim.write > 0 {
		grace = min(grace, lim.write)
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		srv.Close()
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil // the slow downloads were cut
	}
	return err
}

// limitListener accepts at most n connections at once: Accept waits
// while n are open.
func limitListener(ln net.Listener, n int) net.Listener {
	if n <= 0 {
		return ln
	}
	return &limited{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limited struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limited) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limited) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// webHandler serves the embedded page, the program in dir (main.wasm,
// as application/wasm so browsers compile it while it downloads, and
// wasm_exec.js), and the vectors at /vectors (uint32 rows, uint32 dim,
// then the float32 rows, all little-endian).
func webHandler(set *memorySet, dir string, lim webLimits) (http.Handler, error) {
	wasmExec, err := os.ReadFile(filepath.Join(dir, "wasm_exec.js"))
	if err != nil {
		return nil, err
	}
	wasmPath := filepath.Join(dir, "main.wasm")
	if _, err := os.Stat(wasmPath); err != nil {
		return nil, err
	}
	vectors := make([]byte, 8+4*len(set.data))
	binary.LittleEndian.PutUint32(vectors[0:], uint32(set.rows))
	binary.LittleEndian.PutUint32(vectors[4:], uint32(set.dim))
	for i, x := range set.data {
		binary.LittleEndian.PutUint32(vectors[8+4*i:], math.Float32bits(x))
	}
	page, err := fs.Sub(webFiles, "web")
	if err != nil {
		return nil, err
	}
	started := time.Now()
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(page))
	mux.HandleFunc("GET /main.wasm", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(wasmPath)
		if err != nil {
			http.Error(w, "main.wasm: "+err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			http.Error(w, "main.wasm: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/wasm")
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeContent(stallWriter(w, r, lim.stall), r, "main.wasm", fi.ModTime(), f)
	})
	mux.HandleFunc("GET /wasm_exec.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, "wasm_exec.js", started, bytes.NewReader(wasmExec))
	})
	mux.HandleFunc("GET /vectors", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Umbra-Source", set.source)
		http.ServeContent(stallWriter(w, r, lim.stall), r, "", time.Time{}, bytes.NewReader(vectors))
	})
	return mux, nil
}

// stallWriter is w with its connection's write deadline renewed to stall
// from now before each write: a large body may take as long as it needs,
// as long as the client keeps reading.
func stallWriter(w http.ResponseWriter, r *http.Request, stall time.Duration) http.ResponseWriter {
	if stall <= 0 {
		return w
	}
	return &renewing{ResponseWriter: w, rc: http.NewResponseController(w), stall: stall}
}

type renewing struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
}

func (w *renewing) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.stall))
	return w.ResponseWriter.Write(p)
}

func (w *renewing) Unwrap() http.ResponseWriter { return w.ResponseWriter }
