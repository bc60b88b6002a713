package diag

import (
	"time"

	"github.com/umbravec/umbra"
)

// AdapterReport is what the probe (engine.Probe) found out about one
// adapter.
type AdapterReport struct {
	Adapter  AdapterInfo
	Limits   Limits
	Features []string
	// Works is true when a device was created on the adapter and the real
	// search shader compiled, ran on a small input and gave the right
	// answer.
	Works bool
	// Error says why Works is false.
	Error string
	// Eligible is true when Auto may choose the adapter: it works and it is
	// not a software (CPU-type) adapter.
	Eligible bool
	Elapsed  time.Duration
	// Checks are the probe's self-tests and timings, one per variant it
	// tried (scores.wgsl's teams and reductions, the fused top-k,
	// gemm.wgsl): which passed, which the device uses, and why the others
	// are not used.
	Checks []VariantCheck
}

// ProbeReport is the result of probing every adapter that matches a
// selection.
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
