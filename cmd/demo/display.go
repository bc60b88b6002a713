package main

import (
	"errors"
	"fmt"
)

// errNoDisplay is returned by the window mode where no display server can
// be reached. It is checked before glfw.Init: glfw 3.4 on X11 does not
// always fail cleanly without one.
var errNoDisplay = errors.New("no display")

// checkDisplay reports errNoDisplay, with what to do instead, where goos
// needs a display server (Linux and the BSDs) and neither DISPLAY nor
// WAYLAND_DISPLAY is set. macOS and Windows always have a window system.
func checkDisplay(goos string, getenv func(string) string) error {
	switch goos {
	case "linux", "freebsd", "netbsd", "openbsd", "dragonfly", "solaris", "illumos":
	default:
		return nil
	}
	if getenv("DISPLAY") != "" || getenv("WAYLAND_DISPLAY") != "" {
		return nil
	}
	return fmt.Errorf("%w: DISPLAY and WAYLAND_DISPLAY are both unset, so no window can open here.\n"+
		"  Run it in a desktop session, or under a virtual X server:\n"+
		"      xvfb-run -a go run -tags demo,x11 ./cmd/demo --frames 60\n"+
		"  or render offscreen without any display:\n"+
		"      go run ./cmd/demo --png demo.png", errNoDisplay)
}
