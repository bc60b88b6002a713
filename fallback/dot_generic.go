//go:build !amd64 || purego

package fallback

// Without assembly the portable kernels in kernels.go are the only choice,
// and active already names them.

func asmKernels() []kernelSet { return nil }

// readPass sums x: the benchmarks' floor.
func readPass(x []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i]
		s1 += x[i+1]
		s2 += x[i+2]
		s3 += x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i]
	}
	return (s0 + s1) + (s2 + s3)
}
