//go:build (!amd64 && !arm64) || purego

package exact

// Without assembly the portable compressed kernels are the only choice.

func asmQuantKernels() []quantKernelSet { return nil }
