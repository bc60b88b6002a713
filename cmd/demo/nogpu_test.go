//go:build !cgo || nogpu

package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestOffscreenNeedsGPUBackend: without cgo the demo cannot draw at all,
// and says how to rebuild.
func TestOffscreenNeedsGPUBackend(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"--png", filepath.Join(t.TempDir(), "x.png")}, &out, &errb)
	assert.Equal(t, 2, code)
	assert.Contains(t, errb.String(), "without the wgpu backend")
	assert.Contains(t, errb.String(), "CGO_ENABLED=1")
}
