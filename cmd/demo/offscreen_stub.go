//go:build !cgo || nogpu

package main

import (
	"fmt"
	"io"
)

// runOffscreen in a build without the wgpu backend explains how to get one.
func runOffscreen(o options, stdout, stderr io.Writer) error {
	return fmt.Errorf("%w: this binary was built without the wgpu backend (CGO_ENABLED=0 or -tags nogpu), "+
		"and the demo draws with the GPU; rebuild with cgo: CGO_ENABLED=1 go run ./cmd/demo --png %s", errUsage, o.png)
}
