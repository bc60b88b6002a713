package exact

func init() {
	if ks := asmQuantKernels(); len(ks) > 0 {
		activeQuant = ks[0]
	}
}
