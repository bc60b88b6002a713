package fallback

import (
	"slices"

	"github.com/umbravec/umbra/internal/kernelset"
)

// The float32 kernel sets, for umbra's tests and cmd/bench to force one
// (internal/kernelset); the library never does.
func init() {
	kernelset.Register(kernelset.Float32, func() []string {
		var names []string
		for _, ks := range runnableKernels() {
			names = append(names, ks.name)
		}
		return names
	}, forceKernels)
}

// runnableKernels is every float32 kernel set this CPU runs, best first,
// generic last.
func runnableKernels() []kernelSet { return append(asmKernels(), genericKernels) }

// forceKernels makes the set called name active. active is a plain
// variable read by every search: kernelset.Force says to call this only
// while no search runs.
func forceKernels(name string) (restore func(), ok bool) {
	sets := runnableKernels()
	i := slices.IndexFunc(sets, func(ks kernelSet) bool { return ks.name == name })
	if i < 0 {
		return nil, false
	}
	saved := active
	active = sets[i]
	return func() { active = saved }, true
}
