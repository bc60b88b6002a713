//go:build cgo && !nogpu

package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine/internal/devices"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/testkit"
)

// smallDevice returns a device whose storage bindings really are at most
// binding bytes, so a binding past it is a validation error on the device:
// one of its own on the first adapter, Vulkan first, that gives one,
// adopted and self-tested as a caller's device is.
func smallDevice(t *testing.T, binding uint64) *gpu.Device {
	t.Helper()
	workingAdapter(t) // skips where no adapter works
	list := wgpu.CreateInstance(nil).EnumerateAdapters(nil)
	for _, api := range []string{"vulkan", ""} {
		for _, a := range list {
			if info, err := gpu.DescribeAdapter(a); err != nil || api != "" && info.API != api {
				continue
			}
			lim := a.GetLimits()
			lim.MaxStorageBufferBindingSize = binding
			dev, err := a.RequestDevice(&wgpu.DeviceDescriptor{Label: "umbra limited", RequiredLimits: &lim})
			if err != nil {
				continue
			}
			d, err := gpu.Adopt(a, dev, &lim)
			if err != nil {
				dev.Release()
				continue
			}
			t.Cleanup(dev.Release)
			return d
		}
	}
	t.Fatalf("no adapter gives a device with %d-byte bindings", binding)
	return nil
}

// workingDevice returns the probed device of the first working adapter.
func workingDevice(t *testing.T) *gpu.Device {
	t.Helper()
	_, d := workingAdapter(t)
	return d
}

// workingAdapter returns the first adapter, Vulkan first, whose probe
// works, with its device, skipping (or failing under UMBRA_REQUIRE_GPU=1)
// when none does.
func workingAdapter(t *testing.T) (*gpu.Adapter, *gpu.Device) {
	t.Helper()
	for _, backend := range []string{"vulkan", ""} {
		as, err := gpu.Adapters(backend)
		if err != nil {
			break
		}
		for _, a := range as {
			if d, _ := a.Probe(context.Background(), 30*time.Second); d != nil {
				return a, d
			}
		}
	}
	testkit.NoGPU(t, "no adapter works")
	return nil, nil
}

// TestRequestsSplitToFitTheDevice: the three requests that once failed on
// the device and left its index answering zeros — a batch whose hits
// outgrow a binding (k close to the row count), a batch whose queries
// outgrow one (a long dimension), and k larger than half the rows — now
// succeed with the fallback's answers, split into as many submissions as
// the device's bindings need, and the index answers exactly afterwards.
func TestRequestsSplitToFitTheDevice(t *testing.T) {
	r := testkit.Rand(t)
	vecs := func(n, dim int) [][]float32 {
		vs := make([][]float32, n)
		for i := range vs {
			vs[i] = make([]float32, dim)
			for j := range vs[i] {
				vs[i][j] = r.Float32()*2 - 1
			}
		}
		return vs
	}
	small := smallDevice(t, 64<<10)
	ctx := context.Background()
	for _, c := range []struct {
		name          string
		dim, rows, nq int
		ks            []int
		metric        umbra.Metric
	}{
		// 64 KiB holds 16 queries' scores of 1,000 rows, but k = 1,000
		// hits of 8 bytes for 16 queries would need 128,000 bytes.
		{"hits past the binding", 8, 1000, 40, []int{1000, 999, 501, 499, 7}, umbra.Dot},
		// 10 queries of 4,096 floats are 160 KiB of queries.
		{"queries past the binding", 4096, 10, 10, []int{3, 10}, umbra.L2},
	} {
		t.Run(c.name, func(t *testing.T) {
			gx, err := newOnDevice(context.Background(), Config{Dim: c.dim, Metric: c.metric}, &devices.Slot{Device: small})
			require.NoError(t, err)
			defer gx.Close()
			cpu, err := New(context.Background(), Config{Dim: c.dim, Metric: c.metric, Device: CPU})
			require.NoError(t, err)
			data := vecs(c.rows, c.dim)
			for _, ix := range []*Index{gx, cpu} {
				_, err := ix.Add(context.Background(), umbra.Vectors(data))
				require.NoError(t, err)
			}
			qs := vecs(c.nq, c.dim)
			compare := func(k int, what string) {
				want, err := cpu.SearchBatch(ctx, qs, k)
				require.NoError(t, err)
				got, err := gx.SearchBatch(ctx, qs, k)
				require.NoError(t, err, "%s: k=%d", what, k)
				require.Len(t, got, len(want))
				for i := range want {
					require.NoError(t, sameRanking(c.metric, data, qs[i], want[i], got[i]), "%s: k=%d query %d", what, k, i)
				}
			}
			for _, k := range c.ks {
				compare(k, "split")
			}
			compare(5, "afterwards")
			require.Equal(t, GPU, gx.Info().Device)
		})
	}
}

// TestAutoAnswersTheFailedCall: under Auto a search whose GPU work fails is
// still answered, exactly, by the fallback from the host copy, and Info says
// why the index left the GPU.
func TestAutoAnswersTheFailedCall(t *testing.T) {
	d := workingDevice(t)
	r := testkit.Rand(t)
	data := make([][]float32, 500)
	for i := range data {
		data[i] = []float32{r.Float32() - 0.5, r.Float32() - 0.5, r.Float32() - 0.5}
	}
	q := []float32{0.3, -0.2, 0.9}
	cpu, err := New(context.Background(), Config{Dim: 3, Device: CPU})
	require.NoError(t, err)
	_, err = cpu.Add(context.Background(), umbra.Vectors(data))
	require.NoError(t, err)
	want, err := cpu.Search(context.Background(), q, 7)
	require.NoError(t, err)

	for _, step := range []string{"write queries", "submit", "map readback"} {
		auto, err := newOnDevice(context.Background(), Config{Dim: 3}, &devices.Slot{Device: d})
		require.NoError(t, err)
		auto.cfg.Device = Auto // as if Auto had chosen this device
		_, err = auto.Add(context.Background(), umbra.Vectors(data))
		require.NoError(t, err)
		auto.dev.SetFault(func(s string) error {
			if s == step {
				return errInjected
			}
			return nil
		})
		got, err := auto.Search(context.Background(), q, 7)
		require.NoError(t, err, step)
		require.Equal(t, want, got, "%s: the failed call is answered by the fallback", step)
		info := auto.Info()
		require.Equal(t, CPU, info.Device, step)
		require.Contains(t, info.Reason, step)
		require.NoError(t, auto.Close())
	}
}

var errInjected = errors.New("injected fault")

// TestTooLargeForTheDevice shrinks a device's storage binding limit so a
// few thousand rows exceed what one query's scores may occupy: under
// Device GPU the Add fails with ErrTooLarge before allocating and nothing
// is stored; under Auto the index moves to the CPU and keeps every vector.
func TestTooLargeForTheDevice(t *testing.T) {
	d := smallDevice(t, 4096) // 1,024 scores; 256 rows of dim 4 per chunk
	r := testkit.Rand(t)
	vecs := func(n int) [][]float32 {
		vs := make([][]float32, n)
		for i := range vs {
			vs[i] = []float32{r.Float32() + 0.1, r.Float32(), r.Float32(), r.Float32()}
		}
		return vs
	}
	first, more := vecs(1000), vecs(100)

	ix, err := newOnDevice(context.Background(), Config{Dim: 4}, &devices.Slot{Device: d})
	require.NoError(t, err)
	defer ix.Close()
	_, err = ix.Add(context.Background(), umbra.Vectors(first))
	require.NoError(t, err)
	_, err = ix.Add(context.Background(), umbra.Vectors(more))
	require.ErrorIs(t, err, umbra.ErrTooLarge)
	assert.Contains(t, err.Error(), "1100 rows need a 4400-byte scores binding, the device allows 4096")
	assert.Equal(t, 1000, ix.Len())
	hits, err := ix.Search(context.Background(), first[3], 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), hits[0].ID)

	auto, err := newOnDevice(context.Background(), Config{Dim: 4}, &devices.Slot{Device: d})
	require.NoError(t, err)
	defer auto.Close()
	auto.cfg.Device = Auto // as if Auto had chosen this device
	_, err = auto.Add(context.Background(), umbra.Vectors(first))
	require.NoError(t, err)
	_, err = auto.Add(context.Background(), umbra.Vectors(more))
	require.NoError(t, err, "under Auto the fallback takes what the device cannot hold")
	assert.Equal(t, 1100, auto.Len())
	info := auto.Info()
	assert.Equal(t, CPU, info.Device)
	assert.Contains(t, info.Reason, "outgrew what the GPU can hold")
	assert.Equal(t, umbra.HintTooLarge, info.Hint.Code)
	hits, err = auto.Search(context.Background(), more[7], 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(1007), hits[0].ID)
}

// TestScratchGrowthStaysWithinTheBinding: scratch buffers double as batches
// grow, but never past the storage binding limit, which the whole buffer is
// bound under. A small batch, then one at the per-submission limit, then
// one that must be split, all give the fallback's answers.
func TestScratchGrowthStaysWithinTheBinding(t *testing.T) {
	r := testkit.Rand(t)
	small := smallDevice(t, 64<<10) // 1,000 rows: 16 queries' scores per submission
	gx, err := newOnDevice(context.Background(), Config{Dim: 8, Metric: umbra.Dot}, &devices.Slot{Device: small})
	require.NoError(t, err)
	defer gx.Close()
	cpu, err := New(context.Background(), Config{Dim: 8, Metric: umbra.Dot, Device: CPU})
	require.NoError(t, err)
	vecs := func(n int) [][]float32 {
		vs := make([][]float32, n)
		for i := range vs {
			vs[i] = make([]float32, 8)
			for j := range vs[i] {
				vs[i][j] = r.Float32()*2 - 1
			}
		}
		return vs
	}
	data := vecs(1000)
	_, err = gx.Add(context.Background(), umbra.Vectors(data))
	require.NoError(t, err)
	_, err = cpu.Add(context.Background(), umbra.Vectors(data))
	require.NoError(t, err)
	for _, nq := range []int{3, 10, 16, 40} {
		qs := vecs(nq)
		got, err := gx.SearchBatch(context.Background(), qs, 5)
		require.NoError(t, err, "%d queries", nq)
		want, err := cpu.SearchBatch(context.Background(), qs, 5)
		require.NoError(t, err)
		for i := range want {
			for j := range want[i] {
				assert.Equal(t, want[i][j].ID, got[i][j].ID, "%d queries: query %d rank %d", nq, i, j)
			}
		}
	}
}
