package engine

import (
	"fmt"
	"math"
	"time"
)

// routing is what Device Auto measured once per process to send each
// search to the faster path for its shape: a GPU search costs a fixed
// dispatch and readback latency plus the stored vectors at the GPU's scan
// rate, per tile of queries; the CPU costs one read of them, which also
// scores the first query, plus the arithmetic of every further query.
// Small indexes (or a slow link to a GPU) go to the CPU.
type routing struct {
	GPULatency     time.Duration // a search of a one-row index, end to end
	GPUBytesPerSec float64       // scan rate of a real search, latency removed
	CPUBytesPerSec float64       // scan rate of the fallback's one-query search
	// CPUQueryBytesPerSec is what each further query of a batch costs on
	// the CPU, as bytes of stored vectors per second: its kernels score a
	// block of queries against rows already in cache, so past the first
	// query a batch is bound by arithmetic, not by memory. Zero means not
	// measured.
	CPUQueryBytesPerSec float64
}

// crossoverBytes is the size of the stored vectors above which one query
// goes to the GPU (math.MaxInt64 when the GPU never wins).
func (r routing) crossoverBytes() int64 {
	perByte := 1/r.CPUBytesPerSec - 1/r.GPUBytesPerSec
	if perByte <= 0 {
		return math.MaxInt64
	}
	return int64(r.GPULatency.Seconds() / perByte)
}

// String says the model in words (Info.Routing): where one query starts going to the
// GPU, and the rates it was measured at.
func (r routing) String() string {
	cross := "never"
	if c := r.crossoverBytes(); c != math.MaxInt64 {
		cross = fmt.Sprintf("above %.1f MB of vectors", float64(c)/1e6)
	}
	s := fmt.Sprintf("one query goes to the GPU %s (GPU: %.3f ms latency, %.1f GB/s; CPU: %.1f GB/s",
		cross, r.GPULatency.Seconds()*1e3, r.GPUBytesPerSec/1e9, r.CPUBytesPerSec/1e9)
	if r.CPUQueryBytesPerSec > 0 {
		s += fmt.Sprintf(", %.0f GB/s per further query of a batch", r.CPUQueryBytesPerSec/1e9)
	}
	return s + ")"
}
