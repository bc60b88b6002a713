// Package kernelset lets umbra's own tests and cmd/bench run the CPU
// kernels with a set other than the one chosen at start: on a CPU with
// AVX-512, the AVX2 and generic sets too, so that every set a machine can
// run is tested and measured there.
//
// It imports the packages that own kernels (fallback for float32 scoring,
// internal/exact for compressed rows) and asks them; nothing registers at
// init. The library itself never forces a set and reads no environment
// variable, so a program's kernels change only when umbra's tests or
// cmd/bench say so. Info.CPUKernel and Info.QuantKernel name the set in
// use, forced or not.
package kernelset

import (
	"fmt"
	"strings"

	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/fallback"
)

// Family is one kind of CPU kernel.
type Family string

const (
	// Float32 is package fallback's scoring kernels (Info.CPUKernel):
	// the float32 search, the read floor and the compressed path's rescore.
	Float32 Family = "float32"
	// Compressed is internal/exact's int8 and float16 kernels over
	// compressed rows (Info.QuantKernel).
	Compressed Family = "compressed"
)

// Sets names the kernel sets of f this CPU runs, best first (the one
// chosen at start) and "generic" last; nil for an unknown family.
func Sets(f Family) []string {
	switch f {
	case Float32:
		return fallback.KernelSets()
	case Compressed:
		return exact.QuantKernelSets()
	}
	return nil
}

// Force makes the set called name f's active one for the whole process
// until restore is called; it fails for a set this CPU does not run. Every
// search that starts afterwards uses it. Float32's set is a plain
// variable: force it before any search starts (at the start of a test or
// a benchmark), never while one runs. Compressed's is read once per
// search, atomically.
func Force(f Family, name string) (restore func(), err error) {
	var ok bool
	switch f {
	case Float32:
		restore, ok = fallback.ForceKernels(name)
	case Compressed:
		restore, ok = exact.ForceQuantKernels(name)
	default:
		return nil, fmt.Errorf("kernelset: no %s kernels", f)
	}
	if !ok {
		return nil, fmt.Errorf("kernelset: no %s kernel set %q on this CPU (it runs %s)", f, name, strings.Join(Sets(f), ", "))
	}
	return restore, nil
}
