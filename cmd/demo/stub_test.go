//go:build !demo || !cgo || nogpu

package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestWindowNeedsTag: a build without the demo tag says how to get the
// window, and exits with the usage status.
func TestWindowNeedsTag(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"--frames", "1"}, &out, &errb)
	assert.Equal(t, 2, code)
	assert.Contains(t, errb.String(), `without the build tag "demo"`)
	assert.Contains(t, errb.String(), "go run -tags demo,x11 ./cmd/demo")
	assert.Contains(t, errb.String(), "go run ./cmd/demo --png demo.png")
}
