package engine

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/umbravec/umbra/fallback"
)

// Floor is one timed plain read of an index's resident slab on the backend
// that serves it: the memory-bandwidth floor any exact scan of that slab
// must pay. Benchmarks report search times as multiples of it.
type Floor struct {
	Backend Backend
	Bytes   int64
	Time    time.Duration
	// Clock says how Time was taken, as Trace.KernelClock does: "gpu"
	// (device timestamps around the dispatches), "wall" or "cpu".
	Clock string
}

// BytesPerSecond is the achieved read bandwidth.
func (f Floor) BytesPerSecond() float64 {
	if f.Time <= 0 {
		return 0
	}
	return float64(f.Bytes) / f.Time.Seconds()
}

// ReadFloor times one read pass over the stored vectors: read.wgsl over the
// resident chunks on the GPU, or the fallback's vector read on the CPU.
func (ix *Index) ReadFloor(ctx context.Context) (f Floor, err error) {
	defer ix.recoverInto(&err)
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return Floor{}, ErrClosed
	}
	if ix.onGPU() {
		d, b, clock, err := ix.gpuFloor(ctx)
		return Floor{Backend: BackendGPU, Bytes: b, Time: d, Clock: clock}, err
	}
	start := time.Now()
	if _, err := fallback.ReadPass(ctx, ix.view(), ix.cfg.Workers); err != nil {
		return Floor{}, err
	}
	return Floor{Backend: BackendCPU, Bytes: int64(ix.slab.Bytes()), Time: time.Since(start), Clock: "cpu"}, nil
}

// Routing is what Auto measured once per process to send each search to
// the faster path for its shape: a GPU search costs a fixed dispatch and
// readback latency plus the slab at the GPU's scan rate, per tile of
// queries; the fallback costs the slab at the CPU's scan rate per block of
// queries. Small indexes (or a slow link to a GPU) go to the CPU.
type Routing struct {
	GPULatency     time.Duration // a search of a one-row index, end to end
	GPUBytesPerSec float64       // scan rate of a real search, latency removed
	CPUBytesPerSec float64       // scan rate of the fallback's search
}

// cpuBatchQueries and gpuBatchQueries are how many queries one pass over
// the slab serves on each path.
const (
	cpuBatchQueries = 4
	gpuBatchQueries = batchQueriesPerPass
)

// PreferGPU reports whether a search of nq queries over bytes of slab is
// expected to finish sooner on the GPU.
func (r Routing) PreferGPU(bytes int64, nq int) bool {
	if r.GPUBytesPerSec <= 0 || r.CPUBytesPerSec <= 0 {
		return true
	}
	passesG := float64((nq + gpuBatchQueries - 1) / gpuBatchQueries)
	passesC := float64((nq + cpuBatchQueries - 1) / cpuBatchQueries)
	gpu := r.GPULatency.Seconds() + passesG*float64(bytes)/r.GPUBytesPerSec
	cpu := passesC * float64(bytes) / r.CPUBytesPerSec
	return gpu < cpu
}

// CrossoverBytes is the slab size above which one query goes to the GPU
// (math.MaxInt64 when the GPU never wins).
func (r Routing) CrossoverBytes() int64 {
	perByte := 1/r.CPUBytesPerSec - 1/r.GPUBytesPerSec
	if perByte <= 0 {
		return math.MaxInt64
	}
	return int64(r.GPULatency.Seconds() / perByte)
}

func (r Routing) String() string {
	cross := "never"
	if c := r.CrossoverBytes(); c != math.MaxInt64 {
		cross = fmt.Sprintf("above %.1f MB of vectors", float64(c)/1e6)
	}
	return fmt.Sprintf("one query goes to the GPU %s (GPU: %.3f ms latency, %.1f GB/s; CPU: %.1f GB/s)",
		cross, r.GPULatency.Seconds()*1e3, r.GPUBytesPerSec/1e9, r.CPUBytesPerSec/1e9)
}
