package engine_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
)

func TestRoutingChoosesByShape(t *testing.T) {
	// A GPU with 0.2 ms of latency and 500 GB/s against a CPU at 20 GB/s:
	// one query breaks even at 0.2e-3 / (1/20e9 - 1/500e9) ≈ 4.17 MB.
	r := engine.Routing{GPULatency: 200 * time.Microsecond, GPUBytesPerSec: 500e9, CPUBytesPerSec: 20e9}
	assert.InDelta(t, 4.1667e6, float64(r.CrossoverBytes()), 1e3)
	assert.False(t, r.PreferGPU(1e6, 1), "1 MB: the dispatch latency dominates")
	assert.True(t, r.PreferGPU(10e6, 1), "10 MB: the GPU's bandwidth wins")
	assert.True(t, r.PreferGPU(1e6, 64), "64 queries over 1 MB: the CPU needs 16 passes")
	assert.Contains(t, r.String(), "above 4.2 MB")

	slow := engine.Routing{GPULatency: time.Millisecond, GPUBytesPerSec: 10e9, CPUBytesPerSec: 20e9}
	assert.Equal(t, int64(math.MaxInt64), slow.CrossoverBytes())
	assert.False(t, slow.PreferGPU(1e9, 1), "a GPU slower than the CPU never wins one query")
	assert.Contains(t, slow.String(), "never")

	assert.True(t, engine.Routing{}.PreferGPU(1, 1), "without measurements the GPU keeps the call")
}

func TestReadFloor(t *testing.T) {
	r := newRand(t)
	data := randomVectors(r, 3000, 100)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: 100, MaxChunkRows: 1000})
			_, err := ix.Add(data)
			require.NoError(t, err)
			f, err := ix.ReadFloor(context.Background())
			require.NoError(t, err)
			assert.Equal(t, int64(3000*100*4), f.Bytes)
			assert.Positive(t, f.Time)
			assert.Positive(t, f.BytesPerSecond())
			want, clock := engine.BackendCPU, "cpu"
			if b.device == engine.GPU {
				want, clock = engine.BackendGPU, "wall"
				if ix.Info().Limits.Timestamps {
					clock = "gpu"
				}
			}
			assert.Equal(t, want, f.Backend)
			assert.Equal(t, clock, f.Clock)
		})
	}
}

// TestTraceRecordsBackend: a traced search says which path served it, as
// Auto routing may send a GPU index's search to the CPU.
func TestTraceRecordsBackend(t *testing.T) {
	r := newRand(t)
	data := randomVectors(r, 50, 8)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: 8})
			_, err := ix.Add(data)
			require.NoError(t, err)
			var tr engine.Trace
			_, err = ix.Search(engine.WithTrace(context.Background(), &tr), data[0], 3)
			require.NoError(t, err)
			want := engine.BackendCPU
			if b.device == engine.GPU {
				want = engine.BackendGPU
				assert.Equal(t, int64(3*8), tr.ReadbackBytes, "the device returns k (score, row) pairs")
				clock := "wall"
				if ix.Info().Limits.Timestamps {
					clock = "gpu"
				}
				assert.Equal(t, clock, tr.KernelClock)
			}
			assert.Equal(t, want, tr.Backend)
			assert.Positive(t, tr.Kernel)
		})
	}
}

// TestProgress: long calls report validate, upload and search progress that
// ends at the total, on every backend.
func TestProgress(t *testing.T) {
	r := newRand(t)
	data := randomVectors(r, 70000, 4)
	queries := randomVectors(r, 300, 4)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: 4, Metric: engine.Dot})
			last := map[string][2]int{}
			calls := map[string]int{}
			ctx := engine.WithProgress(context.Background(), func(stage string, done, total int) {
				prev := last[stage]
				assert.GreaterOrEqual(t, done, prev[0], "%s went backwards", stage)
				assert.LessOrEqual(t, done, total, stage)
				last[stage] = [2]int{done, total}
				calls[stage]++
			})
			_, err := ix.AddContext(ctx, data)
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
