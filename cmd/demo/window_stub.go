//go:build !demo || !cgo || nogpu

package main

import (
	"fmt"
	"io"
)

// runWindow in a build without glfw explains how to build the window. The
// window needs the build tag "demo" so that `go build ./...` works on a
// machine without X11 development headers.
func runWindow(o options, stdout, stderr io.Writer) error {
	return fmt.Errorf("%w: this binary has no window: it was built without the build tag \"demo\" (or without cgo).\n"+
		"  Build the window with glfw (needs a C compiler; on Linux the X11 development packages, see cmd/demo/README.md):\n"+
		"      go run -tags demo,x11 ./cmd/demo          # Linux, X11 (works on Wayland desktops through XWayland)\n"+
		"      go run -tags demo ./cmd/demo              # macOS, Windows; Linux with X11 and Wayland\n"+
		"  This build can render offscreen instead:\n"+
		"      go run ./cmd/demo --png demo.png", errUsage)
}
