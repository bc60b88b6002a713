//go:build demo && cgo && !nogpu

package main

import (
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWindowWithoutADisplay runs the windowed demo with no display: it must stop with
// the message, before glfw.Init, instead of crashing or hanging.
func TestWindowWithoutADisplay(t *testing.T) {
	stdout, stderr, code := runDemo(t, map[string]string{"DISPLAY": "", "WAYLAND_DISPLAY": ""}, "--frames", "1")
	assert.Equal(t, 1, code, "stdout: %s", stdout)
	assert.Contains(t, stderr, "no display: DISPLAY and WAYLAND_DISPLAY are both unset")
	assert.Contains(t, stderr, "--png")
}

// requireDisplay skips a window test without a display, or fails it under
// UMBRA_REQUIRE_DISPLAY=1 (cmd/demo/xvfb-check.sh sets it).
func requireDisplay(t *testing.T) {
	t.Helper()
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		if os.Getenv("UMBRA_REQUIRE_DISPLAY") == "1" {
			t.Fatal("no display (UMBRA_REQUIRE_DISPLAY=1): run under xvfb-run")
		}
		t.Skip("no display: run under xvfb-run (cmd/demo/xvfb-check.sh)")
	}
}

// TestWindowScreenshot opens the window for a few frames, reads the last
// one back and checks it; halfway through, the window is resized, so the
// surface is reconfigured and the screenshot has the new size.
func TestWindowScreenshot(t *testing.T) {
	requireDisplay(t)
	seed := testSeed(t)
	shot := filepath.Join(t.TempDir(), "shot.png")
	stdout, stderr, code := runDemo(t, nil, "--frames", "8", "--screenshot", shot, "--n", "3000", "--dim", "64",
		"--width", "400", "--height", "260", "--resize-to", "360x240", "--backend", "vulkan", "--seed", fmt.Sprint(seed), "-v")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	t.Logf("%s", stdout)
	assert.Contains(t, stdout, "window 360×240")

	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Equal(t, 360, img.Bounds().Dx(), "the screenshot follows the resize")
	assert.Equal(t, 240, img.Bounds().Dy())
	s := measure(img)
	t.Logf("screenshot: %s", s)
	assert.NoError(t, checkPicture(s))
}

// TestWindowGLExplains: on Linux the GL backend cannot present to a
// window with this wgpu-native; the demo must say so, not crash.
func TestWindowGLExplains(t *testing.T) {
	requireDisplay(t)
	stdout, stderr, code := runDemo(t, nil, "--frames", "2", "--n", "500", "--dim", "16", "--backend", "gl")
	if code == 0 {
		t.Logf("GL presented to the window here: %s", stdout)
		return
	}
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "use --backend vulkan for the window")
}
