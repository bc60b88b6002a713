package exact

func init() {
	if ks := asmQuantKernels(); len(ks) > 0 {
		activeQuant = ks[0]
	}
}

// quantKernelSets is every compressed kernel set this machine runs,
// generic last.
func quantKernelSets() []quantKernelSet { return append(asmQuantKernels(), genericQuantKernels) }
