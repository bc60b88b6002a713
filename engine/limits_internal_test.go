//go:build cgo && !nogpu

package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"
	"github.com/stretchr/testify/require"
)

// smallDevice returns a device of the first working adapter that really
// has a storage binding limit of binding bytes, so a binding past it is a
// validation error on the device, and the limits to plan against.
func smallDevice(t *testing.T, binding uint64) (*gpuDevice, *wgpu.Device, *wgpu.Limits) {
	t.Helper()
	d := softwareDevice(t)
	lim := d.adapter.GetLimits()
	lim.MaxStorageBufferBindingSize = binding
	var small *wgpu.Device
	require.NoError(t, gpuCall("small device", func() error {
		var err error
		small, err = d.adapter.RequestDevice(&wgpu.DeviceDescriptor{Label: "umbra small binding", RequiredLimits: &lim})
		return err
	}))
	t.Cleanup(small.Release)
	return d, small, &lim
}

// TestRequestsSplitToFitTheDevice: the three requests that once failed on
// the device and left its index answering zeros — a batch whose hits
// outgrow a binding (k close to the row count), a batch whose queries
// outgrow one (a long dimension), and k larger than half the rows — now
// succeed with the fallback's answers, split into as many submissions as
// the device's bindings need, and the index answers exactly afterwards.
func TestRequestsSplitToFitTheDevice(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 17))
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
	d, small, lim := smallDevice(t, 64<<10)
	ctx := context.Background()
	for _, c := range []struct {
		name           string
		dim, rows, nq  int
		ks             []int
		metric         Metric
		submissionsMin int
	}{
		// 64 KiB holds 16 queries' scores of 1,000 rows, but k = 1,000
		// hits of 8 bytes for 16 queries would need 128,000 bytes.
		{"hits past the binding", 8, 1000, 40, []int{1000, 999, 501, 499, 7}, Dot, 3},
		// 10 queries of 4,096 floats are 160 KiB of queries.
		{"queries past the binding", 4096, 10, 10, []int{3, 10}, L2, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			gpu, err := newOnDevice(context.Background(), Config{Dim: c.dim, Metric: c.metric}, d.adapter, small, lim)
			require.NoError(t, err)
			defer gpu.Close()
			cpu, err := New(context.Background(), Config{Dim: c.dim, Metric: c.metric, Device: CPU})
			require.NoError(t, err)
			data := vecs(c.rows, c.dim)
			for _, ix := range []*Index{gpu, cpu} {
				_, err := ix.Add(context.Background(), data)
				require.NoError(t, err)
			}
			qs := vecs(c.nq, c.dim)
			compare := func(k int, what string) {
				want, err := cpu.SearchBatch(ctx, qs, k)
				require.NoError(t, err)
				got, err := gpu.SearchBatch(ctx, qs, k)
				require.NoError(t, err, "%s: k=%d", what, k)
				require.Len(t, got, len(want))
				for i := range want {
					require.Len(t, got[i], len(want[i]))
					for j, w := range want[i] {
						tol := 1e-5 * max(1, math.Abs(float64(w.Score)))
						require.InDelta(t, w.Score, got[i][j].Score, tol, "%s: k=%d query %d rank %d", what, k, i, j)
						nearTie := j > 0 && math.Abs(float64(want[i][j-1].Score-w.Score)) <= 2*tol ||
							j+1 < len(want[i]) && math.Abs(float64(want[i][j+1].Score-w.Score)) <= 2*tol
						if !nearTie {
							require.Equal(t, w.ID, got[i][j].ID, "%s: k=%d query %d rank %d", what, k, i, j)
						}
					}
				}
			}
			for _, k := range c.ks {
				compare(k, "split")
			}
			g := gpu.gpu.(*wgpuIndex)
			limit := g.batchLimit(submission{k: c.ks[0], rows: c.rows, deviceSelect: 2*c.ks[0] < c.rows})
			require.GreaterOrEqual(t, (c.nq+limit-1)/limit, c.submissionsMin, "the batch really needed splitting")
			compare(5, "afterwards")
			require.Equal(t, BackendGPU, gpu.Info().Backend)
		})
	}
}

// TestBatchLimitCoversEveryBuffer: whatever the request, one submission's
// scratch buffers each fit the device's binding and its readback the
// device's buffer size, and at least one query always fits.
func TestBatchLimitCoversEveryBuffer(t *testing.T) {
	d := softwareDevice(t)
	for _, c := range []struct{ stride, rows, k int }{
		{4, 1, 1}, {4, 20000, 20000}, {4, 20000, 9999}, {768, 50000, 10},
		{65536, 100, 5}, {4, 1 << 25, 1<<24 + 1}, {4, 1 << 25, 1 << 20},
	} {
		t.Run(fmt.Sprintf("stride%d/rows%d/k%d", c.stride, c.rows, c.k), func(t *testing.T) {
			g, err := newGPUIndex(d, c.stride, 0, 0)
			require.NoError(t, err)
			defer g.release()
			sub := submission{k: c.k, rows: c.rows, deviceSelect: 2*c.k < c.rows}
			n := g.batchLimit(sub)
			require.GreaterOrEqual(t, n, 1)
			sub.nq = n
			nq := uint64(n)
			require.LessOrEqual(t, nq*uint64(c.rows)*4, g.bind, "scores")
			require.LessOrEqual(t, nq*uint64(c.stride)*4, g.bind, "queries")
			require.LessOrEqual(t, nq*uint64(sub.hitsPerQuery())*8, g.bind, "hits")
			require.LessOrEqual(t, sub.readbackBytes(), g.dev.lim.MaxBufferBytes, "readback")
		})
	}
}

// TestAutoAnswersTheFailedCall: under Auto a search whose GPU work fails is
// still answered, exactly, by the fallback from the host copy, and Info says
// why the index left the GPU.
func TestAutoAnswersTheFailedCall(t *testing.T) {
	d := softwareDevice(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 23))
	data := make([][]float32, 500)
	for i := range data {
		data[i] = []float32{r.Float32() - 0.5, r.Float32() - 0.5, r.Float32() - 0.5}
	}
	q := []float32{0.3, -0.2, 0.9}
	cpu, err := New(context.Background(), Config{Dim: 3, Device: CPU})
	require.NoError(t, err)
	_, err = cpu.Add(context.Background(), data)
	require.NoError(t, err)
	want, err := cpu.Search(context.Background(), q, 7)
	require.NoError(t, err)

	for _, step := range []string{"bind scores", "submit", "map readback"} {
		auto, err := newOnDevice(context.Background(), Config{Dim: 3}, d.adapter, d.device, nil)
		require.NoError(t, err)
		auto.cfg.Device = Auto // as if Auto had chosen this device
		_, err = auto.Add(context.Background(), data)
		require.NoError(t, err)
		SetGPUFault(auto, func(s string) error {
			if s == step {
				return errInjected
			}
			return nil
		})
		got, err := auto.Search(context.Background(), q, 7)
		require.NoError(t, err, step)
		require.Equal(t, want, got, "%s: the failed call is answered by the fallback", step)
		info := auto.Info()
		require.Equal(t, BackendCPU, info.Backend, step)
		require.Contains(t, info.Reason, step)
		require.NoError(t, auto.Close())
	}
}

var errInjected = fmt.Errorf("injected fault")
