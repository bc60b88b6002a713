// Command demo shows umbra at work: N memory vectors laid out in 2-D by a
// projection computed on the GPU, every point coloured each frame by its
// cosine similarity to a query that follows the mouse, and the k nearest
// (found by an umbra index living on the same wgpu device) ringed.
//
// Three modes:
//
//	demo [flags]                    a window (needs cgo and -tags demo; see README.md)
//	demo --png FILE --frames N      offscreen, no window or display: writes a PNG
//	demo --web [--listen ADDR]      a page running umbra as wasm on the browser's GPU (web.go)
//
// The offscreen mode needs only cgo (the wgpu backend); the window also needs
// glfw, which is compiled only under the build tag "demo" so that the rest
// of the module builds without X11 headers. Exit status: 0 ok, 1 failure,
// 2 usage (including "this build has no window").
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/umbravec/umbra/cmd/internal/cmdline"
	"github.com/umbravec/umbra/cmd/internal/quiet"
	"github.com/umbravec/umbra/engine"
)

// options are the parsed command-line flags.
type options struct {
	n, dim, k     int
	data          string
	adapter       string
	backend       string
	lowPower      bool
	png           string
	screenshot    string
	check         []string
	frames        int
	seed          int64
	width, height int
	iters         int
	hold          time.Duration
	resizeTo      [2]int
	verbose       bool
	web           bool
	listen        string
	wasm          string
	// Tests: the page's program builder and the server's limits (nil:
	// the user's cache directory, defaultWebLimits).
	wasmBuilder    *wasmBuilder
	webLimits      *webLimits
	explicitDim    bool
	explicitFrames bool
}

// errUsage marks an error that is the caller's (exit status 2).
var errUsage = errors.New("usage")

// errHelp says --help printed the help (exit status 0).
var errHelp = errors.New("help")

// grammar is the demo's command line as kong reads it
// (cmd/internal/cmdline): each field a flag, with its help.
type grammar struct {
	N          int             `name:"n" default:"20000" help:"number of vectors (synthetic set), or the first n rows of --data (0: all)"`
	Dim        int             `name:"dim" default:"384" help:"dimension of the synthetic vectors (ignored with --data)"`
	K          int             `name:"k" default:"10" help:"how many nearest neighbours to ring"`
	Data       string          `name:"data" placeholder:"FILE" help:"read vectors from a .npy (float32/float16, 2-D) or .fvecs file instead of the synthetic set"`
	Adapter    cmdline.Adapter `embed:""`
	PNG        string          `name:"png" placeholder:"FILE" help:"render offscreen (no window) and write the last frame to this PNG file"`
	Screenshot string          `name:"screenshot" placeholder:"FILE" help:"window mode: read back the last frame (see --frames) and write it to this PNG file"`
	Frames     int             `name:"frames" default:"0" help:"frames to render before exiting (0: until the window closes; --png defaults to 30)"`
	Seed       int64           `name:"seed" default:"1" help:"seed of the synthetic set, the projection's start and the scripted query path"`
	Width      int             `name:"width" default:"1280" help:"window or image width in pixels"`
	Height     int             `name:"height" default:"800" help:"window or image height in pixels"`
	Iters      int             `name:"iters" default:"24" help:"power-iteration steps of the 2-D projection (0: a random projection)"`
	Hold       time.Duration   `name:"hold" default:"0s" help:"window mode: keep drawing this long after the last frame of --frames (lets a script capture the screen)"`
	Verbose    bool            `name:"v" help:"print progress and timings to stderr"`
	ResizeTo   string          `name:"resize-to" placeholder:"WxH" help:"window mode: resize the window to WxH half-way through --frames (exercises the resize path in tests)"`
	Web        bool            `name:"web" help:"serve a page that runs umbra as wasm on the browser's GPU (WebGPU), or its CPU; see --listen"`
	Listen     string          `name:"listen" default:"127.0.0.1:8025" placeholder:"ADDR" help:"with --web: the address to serve the page on"`
	Wasm       string          `name:"wasm" placeholder:"DIR" help:"with --web: serve the page's program from DIR (main.wasm and wasm_exec.js) instead of building it into the user's cache directory"`
	Check      bool            `name:"check" help:"check the PNG files named as arguments (exit 1 if one is blank or lacks the ring colour) and draw nothing"`
	Files      []string        `arg:"" optional:"" name:"file" help:"with --check: the PNG files to check"`
}

func (*grammar) Help() string {
	return `The points are N vectors laid out in 2-D by their top two principal
components (power iteration on the GPU). Each frame the query is the vector of
the point under the cursor (or under a scripted tour when the cursor is away or
there is no window), every point is coloured by its cosine similarity to it,
and the k nearest, found by an umbra index on the same device, are ringed.

Three modes: with neither --png nor --check, a window (build with -tags demo;
see cmd/demo/README.md); with --png FILE, render offscreen to a PNG (no window,
no display); with --check FILE..., check screenshots: not blank, top-k ring
colour present (for CI).`
}

func (*grammar) Examples() []string {
	return []string{
		"go run -tags demo,x11 ./cmd/demo",
		"go run ./cmd/demo --png demo.png --frames 30 --backend vulkan",
		"go run -tags demo,x11 ./cmd/demo --data vectors.npy --k 20",
		"go run ./cmd/demo --check shot.png",
		"go run ./cmd/demo --web --n 50000 --dim 768",
	}
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var g grammar
	kctx, helped, err := cmdline.Parse(&g, args, cmdline.Options{
		Name:        "demo",
		Description: "umbra demo: exact similarity search drawn live on the GPU.",
		Help:        stderr,
	})
	switch {
	case helped:
		return options{}, errHelp
	case err != nil:
		return options{}, fmt.Errorf("%w: %v", errUsage, err)
	}
	sel := g.Adapter.Select()
	o := options{n: g.N, dim: g.Dim, k: g.K, data: g.Data, adapter: sel.Name, backend: sel.Backend, lowPower: sel.LowPower,
		png: g.PNG, screenshot: g.Screenshot, frames: g.Frames, seed: g.Seed, width: g.Width, height: g.Height,
		iters: g.Iters, hold: g.Hold, verbose: g.Verbose, web: g.Web, listen: g.Listen, wasm: g.Wasm,
		explicitDim: cmdline.Given(kctx, "dim"), explicitFrames: cmdline.Given(kctx, "frames")}
	if g.Check {
		if len(g.Files) == 0 {
			return o, fmt.Errorf("%w: --check needs one or more PNG files", errUsage)
		}
		o.check = g.Files
		return o, nil
	}
	if len(g.Files) > 0 {
		return o, fmt.Errorf("%w: unexpected argument %q (all options are flags; see --help)", errUsage, g.Files[0])
	}
	if g.ResizeTo != "" {
		if _, err := fmt.Sscanf(g.ResizeTo, "%dx%d", &o.resizeTo[0], &o.resizeTo[1]); err != nil || o.resizeTo[0] < 16 || o.resizeTo[1] < 16 {
			return o, fmt.Errorf("%w: --resize-to wants WxH of at least 16x16, got %q", errUsage, g.ResizeTo)
		}
	}
	if o.png != "" && !o.explicitFrames {
		o.frames = 30
	}
	return o, o.validate()
}

func (o options) validate() error {
	switch {
	case o.n < 0 || (o.data == "" && o.n == 0):
		return fmt.Errorf("%w: --n must be positive (or 0 with --data for every row), got %d", errUsage, o.n)
	case o.data == "" && o.dim < 2:
		return fmt.Errorf("%w: --dim must be at least 2, got %d", errUsage, o.dim)
	case o.k < 1:
		return fmt.Errorf("%w: --k must be at least 1, got %d", errUsage, o.k)
	case o.frames < 0:
		return fmt.Errorf("%w: --frames must not be negative, got %d", errUsage, o.frames)
	case o.png != "" && o.frames == 0:
		return fmt.Errorf("%w: --png needs --frames of at least 1", errUsage)
	case o.width < 16 || o.height < 16 || o.width > 8192 || o.height > 8192:
		return fmt.Errorf("%w: --width and --height must be within 16..8192, got %dx%d", errUsage, o.width, o.height)
	case o.iters < 0 || o.iters > 1000:
		return fmt.Errorf("%w: --iters must be within 0..1000, got %d", errUsage, o.iters)
	case o.png != "" && o.screenshot != "":
		return fmt.Errorf("%w: --screenshot is for the window; --png already writes the offscreen frame", errUsage)
	case o.hold < 0:
		return fmt.Errorf("%w: --hold must not be negative", errUsage)
	}
	return nil
}

func main() {
	quiet.Wayland()
	engine.ServeGPUChildIfRequested()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without os.Exit, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, errHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	}
	switch {
	case len(o.check) > 0:
		err = runCheck(o.check, stdout)
	case o.web:
		err = runWeb(o, stdout, stderr)
	case o.png != "":
		err = runOffscreen(o, stdout, stderr)
	default:
		err = runWindow(o, stdout, stderr)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "demo: %v\n", strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	default:
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
}

// runCheck checks each screenshot and reports what it found.
func runCheck(files []string, stdout io.Writer) error {
	var failed []string
	for _, f := range files {
		s, err := checkFile(f)
		if err != nil {
			fmt.Fprintf(stdout, "FAIL %v\n", err)
			failed = append(failed, f)
			continue
		}
		fmt.Fprintf(stdout, "ok   %s: %s\n", f, s)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d pictures failed the check", len(failed), len(files))
	}
	return nil
}
