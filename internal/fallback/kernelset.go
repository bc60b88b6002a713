package fallback

import "slices"

// KernelSets names the float32 kernel sets this CPU runs, best first (the
// one in use unless one was forced) and "generic" last: for umbra's tests
// and cmd/bench to force one (internal/kernelset); the library never does.
func KernelSets() []string {
	var names []string
	for _, ks := range runnableKernels() {
		names = append(names, ks.name)
	}
	return names
}

// runnableKernels is every float32 kernel set this CPU runs, best first,
// generic last.
func runnableKernels() []kernelSet { return append(asmKernels(), genericKernels) }

// ForceKernels makes the set called name active. active is a plain
// variable read by every search: kernelset.Force says to call this only
// while no search runs.
func ForceKernels(name string) (restore func(), ok bool) {
	sets := runnableKernels()
	i := slices.IndexFunc(sets, func(ks kernelSet) bool { return ks.name == name })
	if i < 0 {
		return nil, false
	}
	saved := active
	active = sets[i]
	return func() { active = saved }, true
}
