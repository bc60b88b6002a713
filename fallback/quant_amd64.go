//go:build amd64 && !purego

package fallback

func asmQuantKernels() []quantKernelSet { return nil }
