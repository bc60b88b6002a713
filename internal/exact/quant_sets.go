package exact

import (
	"slices"

	"github.com/umbravec/umbra/internal/kernelset"
)

func init() {
	sets := quantKernelSets()
	activeQuant.Store(&sets[0])
	kernelset.Register(kernelset.Compressed, func() []string {
		var names []string
		for _, ks := range quantKernelSets() {
			names = append(names, ks.name)
		}
		return names
	}, forceQuantKernels)
}

// quantKernelSets is every compressed kernel set this machine runs, best
// first, generic last.
func quantKernelSets() []quantKernelSet { return append(asmQuantKernels(), genericQuantKernels) }

// forceQuantKernels makes the set called name active (kernelset.Force);
// searches already running keep the set they loaded.
func forceQuantKernels(name string) (restore func(), ok bool) {
	sets := quantKernelSets()
	i := slices.IndexFunc(sets, func(ks quantKernelSet) bool { return ks.name == name })
	if i < 0 {
		return nil, false
	}
	saved := activeQuant.Swap(&sets[i])
	return func() { activeQuant.Store(saved) }, true
}
