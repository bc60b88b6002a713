// Package kernelset lets umbra's own tests and cmd/bench run the CPU
// kernels with a set other than the one chosen at init: on a CPU with
// AVX-512, the AVX2 and generic sets too, so that every set a machine can
// run is tested and measured there.
//
// The packages that own kernels (fallback for float32 scoring,
// internal/exact for compressed rows) register their sets at init; the
// library itself never forces a set and reads no environment variable, so
// a program's kernels change only when umbra's tests or cmd/bench say so.
// Info.CPUKernel and Info.QuantKernel name the set in use, forced or not.
package kernelset

import (
	"fmt"
	"strings"
	"sync"
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

type family struct {
	sets func() []string
	use  func(name string) (restore func(), ok bool)
}

var (
	mu       sync.Mutex
	families = map[Family]family{}
)

// Register is called at init by the package that owns f's kernels: sets
// names the sets this CPU runs, best first and "generic" last; use makes
// the named one active and returns what restores the one before, or
// reports false for a name it does not run.
func Register(f Family, sets func() []string, use func(name string) (restore func(), ok bool)) {
	mu.Lock()
	defer mu.Unlock()
	families[f] = family{sets, use}
}

// Sets names the kernel sets of f this CPU runs, best first (the one
// chosen at init) and "generic" last; nil if no package registered f.
func Sets(f Family) []string {
	mu.Lock()
	fam, ok := families[f]
	mu.Unlock()
	if !ok {
		return nil
	}
	return fam.sets()
}

// Force makes the set called name f's active one for the whole process
// until restore is called; it fails for a set this CPU does not run. Every
// search that starts afterwards uses it. Float32's set is a plain
// variable: force it before any search starts (at the start of a test or
// a benchmark), never while one runs. Compressed's is read once per
// search, atomically.
func Force(f Family, name string) (restore func(), err error) {
	mu.Lock()
	fam, ok := families[f]
	mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("kernelset: no %s kernels registered", f)
	}
	restore, ok = fam.use(name)
	if !ok {
		return nil, fmt.Errorf("kernelset: no %s kernel set %q on this CPU (it runs %s)", f, name, strings.Join(fam.sets(), ", "))
	}
	return restore, nil
}
