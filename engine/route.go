package engine

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/packed"
)

// ReadFloor times one read pass over the stored vectors: read.wgsl over the
// resident chunks on the GPU, or the fallback's vector read on the CPU.
func (ix *Index) ReadFloor(ctx context.Context) (f diag.Floor, err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return diag.Floor{}, umbra.ErrClosed
	}
	if ix.onGPU() {
		d, b, clock, err := ix.dev.Floor(ctx)
		err = gpuError(err)
		return diag.Floor{Device: "gpu", Bytes: b, Time: d, Clock: clock}, err
	}
	start := time.Now()
	if _, err := fallback.ReadPass(ctx, ix.view(), ix.cfg.Workers); err != nil {
		return diag.Floor{}, err
	}
	return diag.Floor{Device: "cpu", Bytes: int64(ix.slab.Bytes()), Time: time.Since(start), Clock: "cpu"}, nil
}

// gpuBatchQueries is how many queries one pass over the slab serves on the
// GPU.
const gpuBatchQueries = gpu.BatchQueries

// preferGPU reports whether a search of nq queries over bytes of slab is
// expected to finish sooner on the GPU.
func preferGPU(r *routing, bytes int64, nq int) bool {
	if r == nil || r.GPUBytesPerSec <= 0 || r.CPUBytesPerSec <= 0 {
		return true
	}
	return gpuTime(r, bytes, nq) < cpuTime(r, bytes, nq)
}

// gpuTime is the model's time for nq queries over bytes of slab on the
// GPU: the latency plus one scan per tile of queries.
func gpuTime(r *routing, bytes int64, nq int) time.Duration {
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
func cpuTime(r *routing, bytes int64, nq int) time.Duration {
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
func routingFor(g device) (*routing, error) {
	latency, gpuRate, err := g.Calibrate()
	if err != nil {
		return nil, gpuError(err)
	}
	cpu, err := cpuRate()
	if err != nil {
		return nil, err
	}
	perQuery, _ := cpuQueryRate() // 0 (price every query as a read) if it failed
	return &routing{GPULatency: latency, GPUBytesPerSec: gpuRate, CPUBytesPerSec: cpu, CPUQueryBytesPerSec: perQuery}, nil
}
