package engine

import (
	"fmt"
	"strings"

	"github.com/umbravec/umbra/internal/hint"
)

// Hint says what to do when the GPU path is not used, as data: a stable
// Code naming the situation and the Args it was found with. String words
// it for a Go caller, naming Config's fields; a program words it for its
// own users from Code and Args (the umbra command names its flags).
//
// Code is one of
//
//   - "no-gpu-support": the binary has no wgpu backend (no cgo, or the
//     nogpu tag);
//   - "no-adapter": no GPU adapter answered;
//   - "no-match": adapters answered, but none passes Config.Adapter;
//   - "software-only": only software adapters, which run on the CPU, work;
//   - "probe-failed": an adapter failed its test dispatch, its
//     calibration, or a search after start-up;
//   - "too-large": the index outgrew what the GPU can hold;
//
// or "" when there is nothing to fix. Args holds "backend" and "name",
// the Backend and Name of the adapter selection, when they were set.
type Hint struct {
	Code string
	Args map[string]string
}

// String is the hint in words for a Go caller, or "" for no hint.
func (h Hint) String() string {
	switch h.Code {
	case "":
		return ""
	case hint.NoGPUSupport:
		return "this binary was built without cgo or with the nogpu tag; rebuild with CGO_ENABLED=1 and a C compiler to use the GPU."
	case hint.NoAdapter:
		return "no GPU adapter was found: install your GPU vendor's driver with its Vulkan ICD " +
			"(NVIDIA: the proprietary driver; AMD/Intel on Linux: apt-get install mesa-vulkan-drivers) and the Vulkan loader " +
			"(apt-get install libvulkan1); `vulkaninfo --summary` should list the GPU. Run `umbra probe` for details."
	case hint.NoMatch:
		return fmt.Sprintf("no adapter matches the selection: loosen Config.Adapter (%s) or run `umbra probe` to list adapters.", h.selection())
	case hint.SoftwareOnly:
		return "only software adapters (which run on the CPU) were found, and the pure-Go path is faster on them: " +
			"install your GPU's driver so a hardware adapter appears, or set Device: GPU to use the software adapter anyway."
	case hint.ProbeFailed:
		return "the adapter was found but failed its test dispatch: update the GPU driver, or pick another adapter " +
			"with Config.Adapter (Name or Backend). Run `umbra probe` to see every adapter's result."
	case hint.TooLarge:
		return "split the vectors over several indexes, or use a GPU whose maxStorageBufferBindingSize is larger " +
			"(`umbra probe` lists it); the CPU path has no such limit."
	}
	return "(hint " + h.Code + ")"
}

// selection names the adapter selection's fields as Config.Adapter spells
// them, with their values when the hint has them.
func (h Hint) selection() string {
	var parts []string
	if b := h.Args[hint.Backend]; b != "" {
		parts = append(parts, fmt.Sprintf("Backend %q", b))
	}
	if n := h.Args[hint.Name]; n != "" {
		parts = append(parts, fmt.Sprintf("Name %q", n))
	}
	if len(parts) == 0 {
		return "Name, Backend"
	}
	return strings.Join(parts, ", ")
}

// hintFor is the hint code under the adapter selection sel.
func hintFor(code string, sel AdapterSelect) Hint {
	h := Hint{Code: code}
	if sel.Backend != "" || sel.Name != "" {
		h.Args = map[string]string{}
		if sel.Backend != "" {
			h.Args[hint.Backend] = sel.Backend
		}
		if sel.Name != "" {
			h.Args[hint.Name] = sel.Name
		}
	}
	return h
}
