package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/umbravec/umbra/fallback"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/packed"
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
	defer ix.recoverInto(&err, ix.watchFaults())
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return Floor{}, ErrClosed
	}
	if ix.onGPU() {
		d, b, clock, err := ix.dev.Floor(ctx)
		err = gpuError(err)
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
// queries; the fallback costs one read of the slab, which also scores the
// first query, plus the arithmetic of every further query (see cpuTime).
// Small indexes (or a slow link to a GPU) go to the CPU.
type Routing struct {
	GPULatency     time.Duration // a search of a one-row index, end to end
	GPUBytesPerSec float64       // scan rate of a real search, latency removed
	CPUBytesPerSec float64       // scan rate of the fallback's one-query search
	// CPUQueryBytesPerSec is what each further query of a batch costs on
	// the fallback, as slab bytes per second: its kernels score a block of
	// queries against rows already in cache, so past the first query a
	// batch is bound by arithmetic, not by memory. Zero means not measured
	// yet: cpuTime then measures it once per process (a few milliseconds).
	CPUQueryBytesPerSec float64
}

// gpuBatchQueries is how many queries one pass over the slab serves on the
// GPU.
const gpuBatchQueries = gpu.BatchQueries

// preferGPU reports whether a search of nq queries over bytes of slab is
// expected to finish sooner on the GPU.
func (r Routing) preferGPU(bytes int64, nq int) bool {
	if r.GPUBytesPerSec <= 0 || r.CPUBytesPerSec <= 0 {
		return true
	}
	return r.gpuTime(bytes, nq) < r.cpuTime(bytes, nq)
}

// gpuTime is the model's time for nq queries over bytes of slab on the
// GPU: the latency plus one scan per tile of queries.
func (r Routing) gpuTime(bytes int64, nq int) time.Duration {
	passes := float64((max(nq, 1) + gpuBatchQueries - 1) / gpuBatchQueries)
	return seconds(r.GPULatency.Seconds() + passes*float64(bytes)/r.GPUBytesPerSec)
}

// cpuTime is the model's time for nq queries over bytes of slab on the
// fallback: one read of the slab, which scores the first query, plus each
// further query's arithmetic. The fallback reads a row once per block of
// fallback.QueryBlock queries (128 at dimension 768), so a batch larger
// than a block reads the slab again per block; the model leaves those
// reads out because it is not told the row stride, and at a block of 128
// they are under a tenth of the time (see BenchmarkRoutingModel).
func (r Routing) cpuTime(bytes int64, nq int) time.Duration {
	perQuery := r.CPUQueryBytesPerSec
	if perQuery <= 0 && nq > 1 {
		perQuery, _ = cpuQueryRate()
	}
	t := float64(bytes) / r.CPUBytesPerSec
	if nq > 1 && perQuery > 0 {
		t += float64(nq-1) * float64(bytes) / perQuery
	}
	return seconds(t)
}

func seconds(s float64) time.Duration {
	if s >= math.MaxInt64/1e9 {
		return math.MaxInt64
	}
	return time.Duration(s * 1e9)
}

// cpuQueryRate measures CPUQueryBytesPerSec once per process: a batch of a
// whole query block over a slab small enough to stay in cache, so the time
// is the kernels' arithmetic. 0 (every query priced as a full read) when
// the fallback fails.
var cpuQueryRate = sync.OnceValues(func() (float64, error) {
	const rows, dim = 1024, 768
	nq := fallback.QueryBlock(dim)
	data := packed.Synthetic(rows+nq, dim).Data
	s := fallback.Slab{Data: data[:rows*dim], Rows: rows, Dim: dim, Stride: dim}
	qs := make([][]float32, nq)
	for j := range qs {
		qs[j] = data[(rows+j)*dim : (rows+j+1)*dim]
	}
	times := make([]time.Duration, 7)
	for i := -1; i < len(times); i++ { // i = -1 warms the cache
		start := time.Now()
		if _, err := fallback.SearchBatch(context.Background(), s, qs, 10, fallback.Dot, 0); err != nil {
			return 0, err
		}
		if i >= 0 {
			times[i] = time.Since(start)
		}
	}
	slices.Sort(times)
	return float64(nq) * float64(rows*dim*4) / times[len(times)/2].Seconds(), nil
})

// crossoverBytes is the slab size above which one query goes to the GPU
// (math.MaxInt64 when the GPU never wins).
func (r Routing) crossoverBytes() int64 {
	perByte := 1/r.CPUBytesPerSec - 1/r.GPUBytesPerSec
	if perByte <= 0 {
		return math.MaxInt64
	}
	return int64(r.GPULatency.Seconds() / perByte)
}

func (r Routing) String() string {
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

// cpuRate is the fallback's one-query scan rate on the calibration slab,
// measured once per process.
var cpuRate = sync.OnceValues(func() (float64, error) {
	s := gpu.CalibrationSlab()
	view := fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride}
	q := s.PaddedRow(1)
	d, err := gpu.MedianOf(5, func() error {
		_, err := fallback.Search(context.Background(), view, q, 10, fallback.Dot, 0)
		return err
	})
	if err != nil {
		return 0, err
	}
	return float64(s.Bytes()) / d.Seconds(), nil
})

// routingFor measures what Auto routes by: the device's latency and scan
// rate (once per device) beside the fallback's rates (once per process).
func routingFor(g device) (*Routing, error) {
	latency, gpuRate, err := g.Calibrate()
	if err != nil {
		return nil, gpuError(err)
	}
	cpu, err := cpuRate()
	if err != nil {
		return nil, err
	}
	perQuery, _ := cpuQueryRate() // 0 (price every query as a read) if it failed
	return &Routing{GPULatency: latency, GPUBytesPerSec: gpuRate, CPUBytesPerSec: cpu, CPUQueryBytesPerSec: perQuery}, nil
}
