//go:build !(js && wasm)

package engine

import (
	"context"

	"github.com/umbravec/umbra"
)

// browserBuilt: outside a browser the device is wgpu's (backend.go).
const browserBuilt = false

func openBrowser(ctx context.Context, cfg Config, maxChunkRows int, allowSoftware bool) (device, string, umbra.Hint, error) {
	panic("unreachable: openBrowser outside a browser")
}
