package engine

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRoutingCrossover(t *testing.T) {
	// A GPU with 0.2 ms of latency and 500 GB/s against a CPU at 20 GB/s:
	// one query breaks even at 0.2e-3 / (1/20e9 - 1/500e9) ≈ 4.17 MB.
	r := routing{GPULatency: 200 * time.Microsecond, GPUBytesPerSec: 500e9, CPUBytesPerSec: 20e9}
	assert.InDelta(t, 4.1667e6, float64(r.crossoverBytes()), 1e3)
	assert.Contains(t, r.String(), "above 4.2 MB")
	assert.NotContains(t, r.String(), "per further query", "no per-query rate measured")

	// A GPU slower than the CPU never takes one query.
	slow := routing{GPULatency: time.Millisecond, GPUBytesPerSec: 10e9, CPUBytesPerSec: 20e9}
	assert.Equal(t, int64(math.MaxInt64), slow.crossoverBytes())
	assert.Contains(t, slow.String(), "never")
}
