package diag

import "github.com/umbravec/umbra"

// AdapterReport is what the probe (engine.Probe) found out about one
// adapter: whether it works and whether Device Auto may choose it.
type AdapterReport struct {
	Adapter AdapterInfo
	// Works is true when a device was created on the adapter and the real
	// search shaders compiled, ran on a small input and gave the right
	// answer; Error says why not.
	Works bool
	Error string
	// Eligible is true when Auto may choose the adapter: it works and it is
	// not a software (CPU-type) adapter.
	Eligible bool
}

// ProbeReport is the result of probing every adapter that matches a
// selection. What the probe measured on each adapter (its limits and
// features, every kernel variant's self-test and timing, how long it
// took) is in `umbra probe --json`, the report to attach to a bug.
type ProbeReport struct {
	Adapters []AdapterReport
	// Auto is the index in Adapters of the adapter Device Auto would use,
	// or -1 when Auto would use the CPU.
	Auto int
	// Reason and Hint say why Auto would use the CPU and what to do
	// (empty when Auto is not -1).
	Reason string
	Hint   umbra.Hint
}
