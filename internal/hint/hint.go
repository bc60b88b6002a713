// Package hint holds engine.Hint (an alias of Hint here): what to do when
// the GPU path is not used, as a code and arguments. It lives here so that
// the engine, package diag and the umbra command share one type: the engine
// and diag report it, String words it for Go callers (naming Config's
// fields), and the umbra command words every code in its own flags.
package hint

import (
	"fmt"
	"strings"
)

// Codes, stable: programs branch on them and the umbra command's probe
// report prints them.
const (
	// NoGPUSupport: the binary was built without the wgpu backend (no cgo,
	// or the nogpu tag).
	NoGPUSupport = "no-gpu-support"
	// NoAdapter: no GPU adapter answered.
	NoAdapter = "no-adapter"
	// NoMatch: adapters answered, but none passes the adapter selection.
	NoMatch = "no-match"
	// SoftwareOnly: only software adapters (which run on the CPU) work.
	SoftwareOnly = "software-only"
	// ProbeFailed: an adapter was found but failed its test dispatch, its
	// calibration, or a search after start-up.
	ProbeFailed = "probe-failed"
	// TooLarge: the index outgrew what the GPU can hold.
	TooLarge = "too-large"
)

// Codes lists every code, for the tests that check each has words.
var Codes = []string{NoGPUSupport, NoAdapter, NoMatch, SoftwareOnly, ProbeFailed, TooLarge}

// Argument keys: the adapter selection a hint was found under, present
// when that part of the selection was set.
const (
	Backend = "backend" // the graphics API asked for: vulkan, metal, dx12 or gl
	Name    = "name"    // the adapter name fragment asked for
)

// Hint is engine.Hint; its doc is there.
type Hint struct {
	Code string
	Args map[string]string
}

// For is the hint code under an adapter selection of backend and name
// ("" for unset).
func For(code, backend, name string) Hint {
	h := Hint{Code: code}
	if backend != "" || name != "" {
		h.Args = map[string]string{}
		if backend != "" {
			h.Args[Backend] = backend
		}
		if name != "" {
			h.Args[Name] = name
		}
	}
	return h
}

// String is the hint in words for a Go caller, or "" for no hint.
func (h Hint) String() string {
	switch h.Code {
	case "":
		return ""
	case NoGPUSupport:
		return "this binary was built without cgo or with the nogpu tag; rebuild with CGO_ENABLED=1 and a C compiler to use the GPU."
	case NoAdapter:
		return "no GPU adapter was found: install your GPU vendor's driver with its Vulkan ICD " +
			"(NVIDIA: the proprietary driver; AMD/Intel on Linux: apt-get install mesa-vulkan-drivers) and the Vulkan loader " +
			"(apt-get install libvulkan1); `vulkaninfo --summary` should list the GPU. Run `umbra probe` for details."
	case NoMatch:
		return fmt.Sprintf("no adapter matches the selection: loosen Config.Adapters (%s) or run `umbra probe` to list adapters.", h.selection())
	case SoftwareOnly:
		return "only software adapters (which run on the CPU) were found, and the pure-Go path is faster on them: " +
			"install your GPU's driver so a hardware adapter appears, or set Device: GPU to use the software adapter anyway."
	case ProbeFailed:
		return "the adapter was found but failed its test dispatch: update the GPU driver, or pick another adapter " +
			"with Config.Adapters (Name or Backend). Run `umbra probe` to see every adapter's result."
	case TooLarge:
		return "split the vectors over several indexes, or use a GPU whose maxStorageBufferBindingSize is larger " +
			"(`umbra probe` lists it); the CPU path has no such limit."
	}
	return "(hint " + h.Code + ")"
}

// selection names the adapter selection's fields as Config.Adapters
// spells them, with their values when the hint has them.
func (h Hint) selection() string {
	var parts []string
	if b := h.Args[Backend]; b != "" {
		parts = append(parts, fmt.Sprintf("Backend %q", b))
	}
	if n := h.Args[Name]; n != "" {
		parts = append(parts, fmt.Sprintf("Name %q", n))
	}
	if len(parts) == 0 {
		return "Name, Backend"
	}
	return strings.Join(parts, ", ")
}
