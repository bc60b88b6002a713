package engine_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

func TestRoutingChoosesByShape(t *testing.T) {
	// A GPU with 0.2 ms of latency and 500 GB/s against a CPU at 20 GB/s
	// for one query and 400 GB/s for each further query of a batch: one
	// query breaks even at 0.2e-3 / (1/20e9 - 1/500e9) ≈ 4.17 MB.
	r := engine.Routing{GPULatency: 200 * time.Microsecond, GPUBytesPerSec: 500e9, CPUBytesPerSec: 20e9, CPUQueryBytesPerSec: 400e9}
	assert.False(t, engine.PreferGPU(r, 1e6, 1), "1 MB: the dispatch latency dominates")
	assert.True(t, engine.PreferGPU(r, 10e6, 1), "10 MB: the GPU's bandwidth wins")
	assert.Contains(t, r.String(), "above 4.2 MB")
	assert.Contains(t, r.String(), "400 GB/s per further query")

	// The fallback reads 1 MB once for a whole batch of 64 and pays
	// arithmetic per query: 50 µs + 63 × 2.5 µs = 207.5 µs, against the
	// GPU's 200 µs + 8 passes × 2 µs = 216 µs. Counting a read per four
	// queries (800 µs) would have sent this batch to the GPU.
	assert.Equal(t, 50*time.Microsecond, engine.CPUTime(r, 1e6, 1))
	assert.InDelta(t, 207.5e3, float64(engine.CPUTime(r, 1e6, 64)), 1)
	assert.InDelta(t, 216e3, float64(engine.GPUTime(r, 1e6, 64)), 1)
	assert.False(t, engine.PreferGPU(r, 1e6, 64), "64 queries over 1 MB: one read and cheap arithmetic on the CPU")
	assert.True(t, engine.PreferGPU(r, 10e6, 64), "64 queries over 10 MB: 2.08 ms on the CPU, 0.36 ms on the GPU")

	slow := engine.Routing{GPULatency: time.Millisecond, GPUBytesPerSec: 10e9, CPUBytesPerSec: 20e9, CPUQueryBytesPerSec: 400e9}
	assert.False(t, engine.PreferGPU(slow, 1e9, 1), "a GPU slower than the CPU never wins one query")
	assert.Contains(t, slow.String(), "never")

	assert.True(t, engine.PreferGPU(engine.Routing{}, 1, 1), "without measurements the GPU keeps the call")
	assert.Equal(t, time.Duration(math.MaxInt64), engine.GPUTime(engine.Routing{GPULatency: time.Millisecond}, 1, 1),
		"an unmeasured GPU costs forever, without overflow")
}

// TestRoutingMeasuresBatchArithmetic: without a measured per-query rate the
// model measures the fallback's once per process and prices every further
// query of a batch at it.
func TestRoutingMeasuresBatchArithmetic(t *testing.T) {
	r := engine.Routing{CPUBytesPerSec: 20e9}
	one, two, batch := engine.CPUTime(r, 1e8, 1), engine.CPUTime(r, 1e8, 2), engine.CPUTime(r, 1e8, 64)
	assert.Equal(t, 5*time.Millisecond, one, "one query is one read")
	require.Greater(t, two, one, "a second query costs its arithmetic")
	assert.InDelta(t, float64(63*(two-one)), float64(batch-one), 63, "every further query costs the same")
	assert.Equal(t, batch, engine.CPUTime(r, 1e8, 64), "measured once, not per call")
}

// BenchmarkRoutingModel compares the routing model's CPU time with the
// fallback's measured time at 50,000×768 for batches of 1, 8 and 64
// queries. The model is given the single-query scan rate measured here, as
// Auto's calibration measures it, and measures its per-query arithmetic
// rate itself; model-ms next to ns/op shows how far the two agree.
func BenchmarkRoutingModel(b *testing.B) {
	const n, dim = 50_000, 768
	r := testkit.Rand(b)
	ix, err := engine.New(context.Background(), engine.Config{Dim: dim, Metric: umbra.Dot, Device: engine.CPU})
	require.NoError(b, err)
	b.Cleanup(func() { ix.Close() })
	_, err = ix.Add(context.Background(), umbra.Vectors(testkit.Vectors(r, n, dim)))
	require.NoError(b, err)
	queries := testkit.Vectors(r, 64, dim)
	ctx := context.Background()
	bytes := int64(n * dim * 4)

	times := make([]time.Duration, 9)
	for i := range times {
		start := time.Now()
		_, err := ix.Search(ctx, queries[0], 10)
		require.NoError(b, err)
		times[i] = time.Since(start)
	}
	slices.Sort(times)
	model := engine.Routing{CPUBytesPerSec: float64(bytes) / times[len(times)/2].Seconds()}
	for _, nq := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("queries=%d", nq), func(b *testing.B) {
			for b.Loop() {
				_, err := ix.SearchBatch(ctx, queries[:nq], 10)
				require.NoError(b, err)
			}
			b.ReportMetric(float64(engine.CPUTime(model, bytes, nq))/1e6, "model-ms")
			b.ReportMetric(model.CPUBytesPerSec/1e9, "read-GB/s")
		})
	}
}

func TestReadFloor(t *testing.T) {
	r := testkit.Rand(t)
	data := testkit.Vectors(r, 3000, 100)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: 100}, 1000)
			_, err := ix.Add(context.Background(), umbra.Vectors(data))
			require.NoError(t, err)
			f, err := ix.ReadFloor(context.Background())
			require.NoError(t, err)
			assert.Equal(t, int64(3000*100*4), f.Bytes)
			assert.Positive(t, f.Time)
			assert.Positive(t, f.BytesPerSecond())
			want, clock := "cpu", "cpu"
			if b.device == engine.GPU {
				want, clock = "gpu", "wall"
				if engine.DeviceLimits(ix).Timestamps {
					clock = "gpu"
				}
			}
			assert.Equal(t, want, f.Device)
			assert.Equal(t, clock, f.Clock)
		})
	}
}

// TestTraceRecordsBackend: a traced search says which path served it, as
// Auto routing may send a GPU index's search to the CPU.
func TestTraceRecordsBackend(t *testing.T) {
	r := testkit.Rand(t)
	data := testkit.Vectors(r, 50, 8)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: 8})
			_, err := ix.Add(context.Background(), umbra.Vectors(data))
			require.NoError(t, err)
			var tr diag.Trace
			_, err = ix.Search(diag.WithTrace(context.Background(), &tr), data[0], 3)
			require.NoError(t, err)
			want := "cpu"
			if b.device == engine.GPU {
				want = "gpu"
				clock, stamps := "wall", int64(0)
				if engine.DeviceLimits(ix).Timestamps {
					clock, stamps = "gpu", 16 // two timestamps mapped with the hits
				}
				assert.Equal(t, 3*8+stamps, tr.BytesDown, "the device returns k (score, row) pairs")
				assert.Equal(t, clock, tr.KernelClock)
			}
			assert.Equal(t, want, tr.Device)
			assert.Positive(t, tr.Kernel)
		})
	}
}

// TestProgress: long calls report validate, upload and search progress that
// ends at the total, on every backend.
func TestProgress(t *testing.T) {
	r := testkit.Rand(t)
	data := testkit.Vectors(r, 70000, 4)
	queries := testkit.Vectors(r, 300, 4)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: 4, Metric: umbra.Dot})
			last := map[string][2]int{}
			calls := map[string]int{}
			ctx := engine.WithProgress(context.Background(), func(stage string, done, total int) {
				prev := last[stage]
				assert.GreaterOrEqual(t, done, prev[0], "%s went backwards", stage)
				assert.LessOrEqual(t, done, total, stage)
				last[stage] = [2]int{done, total}
				calls[stage]++
			})
			_, err := ix.Add(ctx, umbra.Vectors(data))
			require.NoError(t, err)
			all, err := ix.SearchBatch(ctx, queries, 3)
			require.NoError(t, err)
			require.Len(t, all, len(queries))
			assert.Equal(t, [2]int{70000, 70000}, last["validate"])
			assert.GreaterOrEqual(t, calls["validate"], 2, "70,000 rows report more than once")
			assert.Equal(t, [2]int{300, 300}, last["search"])
			assert.Equal(t, 2, calls["search"], "300 queries in pieces of 256")
			if b.device == engine.GPU {
				assert.Equal(t, [2]int{70000, 70000}, last["upload"])
			}
			want, err := ix.SearchBatch(context.Background(), queries, 3)
			require.NoError(t, err)
			assert.Equal(t, want, all, "progress does not change results")
		})
	}
}
