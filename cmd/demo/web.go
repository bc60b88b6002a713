package main

import (
	"embed"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// The --web mode: a page that runs umbra as wasm on the browser's GPU
// (WebGPU, internal/webgpu), or on its CPU when the browser has no usable
// adapter. The page (web/) is embedded; the wasm (./webapp) is built at
// start-up with the Go toolchain that runs the demo, beside the Go
// distribution's wasm_exec.js. Nothing is fetched from another site.

//go:embed web
var webFiles embed.FS

// wasmPackage is the program the page runs.
const wasmPackage = "github.com/umbravec/umbra/cmd/demo/webapp"

// runWeb builds the wasm, serves the page on o.listen and blocks.
func runWeb(o options, stdout, stderr io.Writer) error {
	h, err := webHandler(o, stderr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "umbra demo page: http://%s/ (Ctrl-C stops)\n", ln.Addr())
	return http.Serve(ln, h)
}

// webHandler builds the wasm into a temporary directory and returns the
// page's handler: the embedded page, main.wasm, wasm_exec.js, and the
// vectors at /vectors (uint32 rows, uint32 dim, then the float32 rows, all
// little-endian).
func webHandler(o options, stderr io.Writer) (http.Handler, error) {
	var set *memorySet
	var err error
	if o.data != "" {
		if set, err = loadSet(o.data, o.n); err != nil {
			return nil, err
		}
	} else {
		set = syntheticSet(o.n, o.dim, o.seed)
	}
	dir, err := os.MkdirTemp("", "umbra-web-")
	if err != nil {
		return nil, err
	}
	if o.verbose {
		fmt.Fprintf(stderr, "building %s for js/wasm\n", wasmPackage)
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "main.wasm"), wasmPackage)
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the page's wasm (the --web mode runs the Go toolchain): %v\n%s", err, out)
	}
	goroot := runtime.GOROOT()
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		goroot = strings.TrimSpace(string(out))
	}
	wasmExec, err := os.ReadFile(filepath.Join(goroot, "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		if wasmExec, err = os.ReadFile(filepath.Join(goroot, "misc", "wasm", "wasm_exec.js")); err != nil {
			return nil, fmt.Errorf("the Go distribution's wasm_exec.js: %w", err)
		}
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
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServerFS(page))
	mux.HandleFunc("/main.wasm", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join(dir, "main.wasm"))
	})
	mux.HandleFunc("/wasm_exec.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Write(wasmExec)
	})
	mux.HandleFunc("/vectors", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("X-Umbra-Source", set.source)
		w.Write(vectors)
	})
	return mux, nil
}
