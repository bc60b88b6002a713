//go:build (!amd64 && !arm64) || purego

package fallback

// Without assembly the portable kernels in kernels.go are the only choice,
// and active already names them.

func asmKernels() []kernelSet { return nil }
