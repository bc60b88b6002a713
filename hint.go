package umbra

import (
	"fmt"
	"strings"
)

// Hint says what to do when the GPU path is not used, as data: a stable
// Code naming the situation and the Args it was found with. Its String
// method words it for a Go caller, naming engine.Config's fields; a
// program words it for its own users from Code and Args (the umbra
// command names its flags). engine.Info, engine.AdapterError and
// diag.ProbeReport carry one.
type Hint struct {
	// Code is one of the Hint… constants, or "" when there is nothing to
	// fix.
	Code string
	// Args holds "backend" and "name", the Backend and Name of the
	// adapter selection the hint was found under, when they were set.
	Args map[string]string
}

// Hint codes, stable: programs branch on them and the umbra command's
// probe report prints them.
const (
	// HintNoGPUSupport: the binary was built without the wgpu backend (no
	// cgo, or the nogpu tag).
	HintNoGPUSupport = "no-gpu-support"
	// HintNoAdapter: no GPU adapter answered.
	HintNoAdapter = "no-adapter"
	// HintNoMatch: adapters answered, but none passes the adapter
	// selection (engine.Config.Adapters).
	HintNoMatch = "no-match"
	// HintSoftwareOnly: only software adapters (which run on the CPU)
	// work.
	HintSoftwareOnly = "software-only"
	// HintProbeFailed: an adapter was found but failed its test dispatch,
	// its calibration, or a search after start-up.
	HintProbeFailed = "probe-failed"
	// HintTooLarge: the index outgrew what the GPU can hold.
	HintTooLarge = "too-large"
)

// String is the hint in words for a Go caller, or "" for no hint.
func (h Hint) String() string {
	switch h.Code {
	case "":
		return ""
	case HintNoGPUSupport:
		return "this binary was built without cgo or with the nogpu tag; rebuild with CGO_ENABLED=1 and a C compiler to use the GPU."
	case HintNoAdapter:
		return "no GPU adapter was found: install your GPU vendor's driver with its Vulkan ICD " +
			"(NVIDIA: the proprietary driver; AMD/Intel on Linux: apt-get install mesa-vulkan-drivers) and the Vulkan loader " +
			"(apt-get install libvulkan1); `vulkaninfo --summary` should list the GPU. Run `umbra probe` for details."
	case HintNoMatch:
		return fmt.Sprintf("no adapter matches the selection: loosen Config.Adapters (%s) or run `umbra probe` to list adapters.", h.selection())
	case HintSoftwareOnly:
		return "only software adapters (which run on the CPU) were found, and the pure-Go path is faster on them: " +
			"install your GPU's driver so a hardware adapter appears, or set Device: GPU to use the software adapter anyway."
	case HintProbeFailed:
		return "the adapter was found but failed its test dispatch: update the GPU driver, or pick another adapter " +
			"with Config.Adapters (Name or Backend). Run `umbra probe` to see every adapter's result."
	case HintTooLarge:
		return "split the vectors over several indexes, or use a GPU whose maxStorageBufferBindingSize is larger " +
			"(`umbra probe` lists it); the CPU path has no such limit."
	}
	return "(hint " + h.Code + ")"
}

// selection names the adapter selection's fields as Config.Adapters
// spells them, with their values when the hint has them.
func (h Hint) selection() string {
	var parts []string
	if b := h.Args["backend"]; b != "" {
		parts = append(parts, fmt.Sprintf("Backend %q", b))
	}
	if n := h.Args["name"]; n != "" {
		parts = append(parts, fmt.Sprintf("Name %q", n))
	}
	if len(parts) == 0 {
		return "Name, Backend"
	}
	return strings.Join(parts, ", ")
}
