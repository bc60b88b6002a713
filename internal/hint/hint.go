// Package hint names the situations in which an umbra index does not use a
// GPU: the codes and argument keys of engine.Hint. The engine words each
// code for Go callers (naming Config's fields), the umbra command in its
// own flags; both keep a rendering for every code listed here.
package hint

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

// Codes lists every code, for the tests that check each has a rendering.
var Codes = []string{NoGPUSupport, NoAdapter, NoMatch, SoftwareOnly, ProbeFailed, TooLarge}

// Argument keys: the adapter selection a hint was found under, present
// when that part of the selection was set.
const (
	Backend = "backend" // the graphics API asked for: vulkan, metal, dx12 or gl
	Name    = "name"    // the adapter name fragment asked for
)
