package exact

import "slices"

// init picks the best compressed kernel set this CPU runs (cpuid): the
// stdlib's crc32 and sha256 choose their fast paths the same way. It
// registers nothing anywhere.
func init() {
	sets := quantKernelSets()
	activeQuant.Store(&sets[0])
}

// QuantKernelSets names the compressed kernel sets this machine runs, best
// first (the one in use unless one was forced) and "generic" last: for
// umbra's tests and cmd/bench to force one (internal/kernelset).
func QuantKernelSets() []string {
	var names []string
	for _, ks := range quantKernelSets() {
		names = append(names, ks.name)
	}
	return names
}

// quantKernelSets is every compressed kernel set this machine runs, best
// first, generic last.
func quantKernelSets() []quantKernelSet { return append(asmQuantKernels(), genericQuantKernels) }

// ForceQuantKernels makes the set called name active (kernelset.Force);
// searches already running keep the set they loaded.
func ForceQuantKernels(name string) (restore func(), ok bool) {
	sets := quantKernelSets()
	i := slices.IndexFunc(sets, func(ks quantKernelSet) bool { return ks.name == name })
	if i < 0 {
		return nil, false
	}
	saved := activeQuant.Swap(&sets[i])
	return func() { activeQuant.Store(saved) }, true
}
