// Package quiet holds what umbra's programs do to their own process before
// anything else runs; the library itself never changes the environment.
package quiet

import (
	"crypto/rand"
	"os"
	"path/filepath"
)

// Wayland keeps libwayland from printing "error: XDG_RUNTIME_DIR is invalid
// or not set in the environment." on stderr each time wgpu's GL backend
// looks for a display, on machines with no session (containers, CI), where
// the line looks like a failure. When XDG_RUNTIME_DIR is unset it points
// the variable at an absolute path that does not exist (a random name under
// the temporary directory): libwayland then finds no display and says
// nothing, as with the variable unset, and nothing is created or left
// behind. A variable that is set is left alone.
//
// Call it first thing in main, before any goroutine or C thread could read
// the environment; child processes inherit the variable.
func Wayland() {
	if _, set := os.LookupEnv("XDG_RUNTIME_DIR"); set {
		return
	}
	_ = os.Setenv("XDG_RUNTIME_DIR", filepath.Join(os.TempDir(), "umbra-no-runtime-dir-"+rand.Text()))
}
