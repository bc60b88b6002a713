// Command demo shows umbra at work: N memory vectors laid out in 2-D by a
// projection computed on the GPU, every point coloured each frame by its
// cosine similarity to a query that follows the mouse, and the k nearest
// (found by an umbra index living on the same wgpu device) ringed.
//
// Two modes:
//
//	demo [flags]                    a window (needs cgo and -tags demo; see README.md)
//	demo --png FILE --frames N      offscreen, no window or display: writes a PNG
//
// The offscreen mode needs only cgo (the wgpu backend); the window also needs
// glfw, which is compiled only under the build tag "demo" so that the rest
// of the module builds without X11 headers. Exit status: 0 ok, 1 failure,
// 2 usage (including "this build has no window").
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/umbravec/umbra/cmd/internal/quiet"
	"github.com/umbravec/umbra/engine"
)

// options are the parsed command-line flags.
type options struct {
	n, dim, k      int
	data           string
	adapter        string
	backend        string
	png            string
	screenshot     string
	check          []string
	frames         int
	seed           int64
	width, height  int
	iters          int
	hold           time.Duration
	resizeTo       [2]int
	verbose        bool
	explicitDim    bool
	explicitFrames bool
}

// errUsage marks an error that is the caller's (exit status 2).
var errUsage = errors.New("usage")

const usageText = `umbra demo: exact similarity search drawn live on the GPU.

Usage:
  demo [flags]                        open a window (build with -tags demo; see cmd/demo/README.md)
  demo --png FILE [--frames N]        render offscreen to a PNG (no window, no display)
  demo --check FILE...                check screenshots: not blank, top-k ring colour present (for CI)

The points are N vectors laid out in 2-D by their top two principal
components (power iteration on the GPU). Each frame the query is the vector of
the point under the cursor (or under a scripted tour when the cursor is away or
there is no window), every point is coloured by its cosine similarity to it,
and the k nearest, found by an umbra index on the same device, are ringed.

Examples:
  go run -tags demo,x11 ./cmd/demo
  go run ./cmd/demo --png demo.png --frames 30 --backend vulkan
  go run -tags demo,x11 ./cmd/demo --data vectors.npy --k 20

Flags:
`

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	fs.IntVar(&o.n, "n", 20000, "number of vectors (synthetic set), or the first n rows of --data (0: all)")
	fs.IntVar(&o.dim, "dim", 384, "dimension of the synthetic vectors (ignored with --data)")
	fs.IntVar(&o.k, "k", 10, "how many nearest neighbours to ring")
	fs.StringVar(&o.data, "data", "", "read vectors from a .npy (float32/float16, 2-D) or .fvecs file instead of the synthetic set")
	fs.StringVar(&o.adapter, "adapter", "", "use the adapter whose name, vendor or driver contains this (case-insensitive)")
	fs.StringVar(&o.backend, "backend", "", "graphics API: vulkan, metal, dx12 or gl (default: any, native APIs first)")
	fs.StringVar(&o.png, "png", "", "render offscreen (no window) and write the last frame to this PNG file")
	fs.StringVar(&o.screenshot, "screenshot", "", "window mode: read back the last frame (see --frames) and write it to this PNG file")
	fs.IntVar(&o.frames, "frames", 0, "frames to render before exiting (0: until the window closes; --png defaults to 30)")
	fs.Int64Var(&o.seed, "seed", 1, "seed of the synthetic set, the projection's start and the scripted query path")
	fs.IntVar(&o.width, "width", 1280, "window or image width in pixels")
	fs.IntVar(&o.height, "height", 800, "window or image height in pixels")
	fs.IntVar(&o.iters, "iters", 24, "power-iteration steps of the 2-D projection (0: a random projection)")
	fs.DurationVar(&o.hold, "hold", 0, "window mode: keep drawing this long after the last frame of --frames (lets a script capture the screen)")
	fs.BoolVar(&o.verbose, "v", false, "print progress and timings to stderr")
	resize := fs.String("resize-to", "", "window mode: resize the window to `WxH` half-way through --frames (exercises the resize path in tests)")
	checkMode := fs.Bool("check", false, "check the PNG files named as arguments (exit 1 if one is blank or lacks the ring colour) and draw nothing")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	if *checkMode {
		if fs.NArg() == 0 {
			return o, fmt.Errorf("%w: --check needs one or more PNG files", errUsage)
		}
		o.check = fs.Args()
		return o, nil
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected argument %q (all options are flags; see --help)", errUsage, fs.Arg(0))
	}
	if *resize != "" {
		if _, err := fmt.Sscanf(*resize, "%dx%d", &o.resizeTo[0], &o.resizeTo[1]); err != nil || o.resizeTo[0] < 16 || o.resizeTo[1] < 16 {
			return o, fmt.Errorf("%w: --resize-to wants WxH of at least 16x16, got %q", errUsage, *resize)
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "dim":
			o.explicitDim = true
		case "frames":
			o.explicitFrames = true
		}
	})
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
	switch strings.ToLower(o.backend) {
	case "", "vulkan", "metal", "dx12", "gl":
	default:
		return fmt.Errorf("%w: unknown --backend %q (want vulkan, metal, dx12 or gl)", errUsage, o.backend)
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
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	}
	switch {
	case len(o.check) > 0:
		err = runCheck(o.check, stdout)
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
