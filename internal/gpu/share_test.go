//go:build cgo && !nogpu

package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/oliverbestmann/webgpu/wgpu"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/testkit"
)

// ownedDevice adopts the working adapter's device, as ondevice.New does
// with a caller's.
// The adopted device is self-tested once per process and shared by the
// tests that need one (each adoption repeats the probe's self-tests and
// tuning, seconds on a software adapter).
func ownedDevice(t *testing.T) *Device {
	t.Helper()
	d := softwareDevice(t)
	adopted.Lock()
	defer adopted.Unlock()
	if adopted.of != d {
		owned, err := Adopt(nativeOf(d).Adapter(), nativeOf(d).Raw(), nil)
		require.NoError(t, err)
		adopted.of, adopted.d = d, owned
	}
	return adopted.d
}

// adopted is ownedDevice's adoption and the device it adopted.
var adopted struct {
	sync.Mutex
	of, d *Device
}

// randomSlab is rows random vectors of dimension dim, each component in
// [-1, 1).
func randomSlab(r *rand.Rand, rows, dim int) *packed.Slab {
	s := packed.NewSlab(dim)
	flat := make([]float32, rows*dim)
	for i := range flat {
		flat[i] = r.Float32()*2 - 1
	}
	s.AppendFlat(flat, false)
	return s
}

// readDevice copies size bytes of src back to the host. The caller owns
// the device, as a program using ScoreInto does.
func readDevice(t *testing.T, d *Device, src *wgpu.Buffer, size uint64) []byte {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	n := nativeOf(d)
	var out []byte
	err := n.Scope("test readback", func() error {
		staging, err := n.Raw().TryCreateBuffer(&wgpu.BufferDescriptor{Label: "test readback", Size: size,
			Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst})
		if err != nil {
			return err
		}
		defer staging.Release()
		enc, err := n.Raw().TryCreateCommandEncoder(nil)
		if err != nil {
			return err
		}
		defer enc.Release()
		if err := enc.TryCopyBufferToBuffer(src, 0, staging, 0, size); err != nil {
			return err
		}
		cmd, err := enc.TryFinish(nil)
		if err != nil {
			return err
		}
		n.Raw().GetQueue().Submit(cmd)
		cmd.Release()
		status := wgpu.MapAsyncStatus(0)
		if err := staging.TryMapAsync(wgpu.MapModeRead, 0, size, func(s wgpu.MapAsyncStatus) { status = s }); err != nil {
			return err
		}
		n.Raw().Poll(true, nil)
		if status != wgpu.MapAsyncStatusSuccess {
			return fmt.Errorf("map: %v", status)
		}
		out = append([]byte(nil), staging.GetMappedRange(0, uint(size))...)
		return staging.TryUnmap()
	})
	require.NoError(t, err)
	return out
}

// TestScoreIntoMatchesSearch: the scores ScoreInto leaves on the device are
// the ones a read-back search computes, bit for bit (the same pass), and
// agree with float64; a search afterwards leaves them alone; rows added
// later are scored too.
func TestScoreIntoMatchesSearch(t *testing.T) {
	d := ownedDevice(t)
	r := testkit.Rand(t)
	for _, metric := range []core.Metric{core.Dot, core.L2} {
		t.Run(fmt.Sprint("metric", metric), func(t *testing.T) {
			const dim, rows, chunk = 50, 1000, 300 // four chunks, the last partial
			slab := randomSlab(r, rows, dim)
			g, err := d.NewIndex(slab.Stride, metric, chunk)
			require.NoError(t, err)
			defer g.Release()
			require.NoError(t, g.Upload(context.Background(), slab, 0, nil, nil))
			q := randomSlab(r, 1, dim).PaddedRow(0)

			got, err := g.ScoreInto(context.Background(), q)
			require.NoError(t, err)
			require.Equal(t, rows, got.Rows)
			usage := got.Buffer.GetUsage()
			for _, u := range []wgpu.BufferUsage{wgpu.BufferUsageStorage, wgpu.BufferUsageVertex, wgpu.BufferUsageCopySrc} {
				assert.NotZero(t, usage&u, "scores buffer usage %v lacks %v", usage, u)
			}
			device := wgpu.FromBytes[float32](readDevice(t, d, got.Buffer, rows*4))
			want, err := g.scores(context.Background(), q, rows)
			require.NoError(t, err)
			require.Equal(t, want, device, "ScoreInto vs the read-back search pass")
			for i := 0; i < rows; i++ {
				var ref float64
				for j, x := range slab.Row(i) {
					if metric == core.Dot {
						ref += float64(x) * float64(q[j])
					} else {
						ref += (float64(x) - float64(q[j])) * (float64(x) - float64(q[j]))
					}
				}
				require.InDelta(t, ref, float64(device[i]), 1e-5*math.Max(1, math.Abs(ref)), "row %d", i)
			}

			// A search with another query writes its own scratch, not
			// the shared scores.
			_, err = g.Search(context.Background(), [][]float32{randomSlab(r, 1, dim).PaddedRow(0)}, 5, rows, nil, nil)
			require.NoError(t, err)
			assert.Equal(t, device, wgpu.FromBytes[float32](readDevice(t, d, got.Buffer, rows*4)), "a search changed the shared scores")

			// More rows: the last chunk grows into a new buffer and a
			// fifth chunk appears; both are scored.
			more := randomSlab(r, 250, dim)
			slab.AppendFlat(flatRows(more), false)
			require.NoError(t, g.Upload(context.Background(), slab, rows, nil, nil))
			got, err = g.ScoreInto(context.Background(), q)
			require.NoError(t, err)
			require.Equal(t, slab.Rows, got.Rows)
			want, err = g.scores(context.Background(), q, slab.Rows)
			require.NoError(t, err)
			assert.Equal(t, want, wgpu.FromBytes[float32](readDevice(t, d, got.Buffer, uint64(slab.Rows)*4)))
		})
	}
}

// flatRows is the slab's rows without their padding.
func flatRows(s *packed.Slab) []float32 {
	out := make([]float32, 0, s.Rows*s.Dim)
	for i := 0; i < s.Rows; i++ {
		out = append(out, s.Row(i)[:s.Dim]...)
	}
	return out
}

// TestResidentHoldsUploadedRows: Resident lists the chunks in row order,
// and each buffer holds exactly the rows uploaded there.
func TestResidentHoldsUploadedRows(t *testing.T) {
	d := ownedDevice(t)
	r := testkit.Rand(t)
	const dim, rows, chunk = 37, 1111, 256
	slab := randomSlab(r, rows, dim)
	g, err := d.NewIndex(slab.Stride, core.Dot, chunk)
	require.NoError(t, err)
	defer g.Release()
	empty, err := g.Resident()
	require.NoError(t, err)
	assert.Empty(t, empty, "no rows yet")
	require.NoError(t, g.Upload(context.Background(), slab, 0, nil, nil))
	chunks, err := g.Resident()
	require.NoError(t, err)
	require.Len(t, chunks, (rows+chunk-1)/chunk)
	next := 0
	for c, ch := range chunks {
		assert.Equal(t, next, ch.First, "chunk %d", c)
		assert.Equal(t, min(chunk, rows-ch.First), ch.Rows, "chunk %d", c)
		assert.Equal(t, slab.Stride, ch.Stride)
		got := wgpu.FromBytes[float32](readDevice(t, d, ch.Buffer, uint64(ch.Rows*ch.Stride)*4))
		require.Equal(t, slab.Data[ch.First*slab.Stride:(ch.First+ch.Rows)*slab.Stride], got, "chunk %d", c)
		next += ch.Rows
	}
	assert.Equal(t, rows, next)
}

// TestShareRefusals: an index on umbra's own device, a released index, a
// query of the wrong length and an empty index each get a clear answer.
func TestShareRefusals(t *testing.T) {
	probed := softwareDevice(t)
	g, err := probed.NewIndex(8, core.Dot, 0)
	require.NoError(t, err)
	_, err = g.Resident()
	assert.ErrorIs(t, err, ErrNotOwned)
	_, err = g.ScoreInto(context.Background(), make([]float32, 8))
	assert.ErrorIs(t, err, ErrNotOwned)
	g.Release()

	d := ownedDevice(t)
	g, err = d.NewIndex(8, core.Dot, 0)
	require.NoError(t, err)
	s, err := g.ScoreInto(context.Background(), make([]float32, 8))
	require.NoError(t, err)
	assert.Equal(t, Scores{}, s, "an empty index has no scores and no buffer")
	_, err = g.ScoreInto(context.Background(), make([]float32, 5))
	assert.ErrorContains(t, err, "query has 5 values, the index's rows have stride 8")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = g.ScoreInto(ctx, make([]float32, 8))
	assert.ErrorIs(t, err, context.Canceled)
	g.Release()
	_, err = g.Resident()
	assert.ErrorIs(t, err, ErrReleased)
	_, err = g.ScoreInto(context.Background(), make([]float32, 8))
	assert.ErrorIs(t, err, ErrReleased)
}

// TestScoreIntoRecoversFromFaults fails each step of ScoreInto once: the
// call reports the step, and the next call, fault-free, scores correctly
// from rebuilt state.
func TestScoreIntoRecoversFromFaults(t *testing.T) {
	d := ownedDevice(t)
	r := testkit.Rand(t)
	const dim, rows = 20, 500
	slab := randomSlab(r, rows, dim)
	g, err := d.NewIndex(slab.Stride, core.Dot, 200)
	require.NoError(t, err)
	defer g.Release()
	require.NoError(t, g.Upload(context.Background(), slab, 0, nil, nil))
	q := randomSlab(r, 1, dim).PaddedRow(0)
	want, err := g.scores(context.Background(), q, rows)
	require.NoError(t, err)
	for _, step := range []string{"create umbra shared query", "create umbra shared scores",
		"write queries", "write params", "encode", "submit"} {
		t.Run(step, func(t *testing.T) {
			// From nothing, so that every step is taken.
			g.dev.mu.Lock()
			g.dropShared()
			g.dev.mu.Unlock()
			g.SetFault(func(s string) error {
				if s == step {
					return errors.New("injected")
				}
				return nil
			})
			_, err := g.ScoreInto(context.Background(), q)
			require.ErrorIs(t, err, ErrFailed)
			assert.Contains(t, err.Error(), step)
			g.SetFault(nil)
			s, err := g.ScoreInto(context.Background(), q)
			require.NoError(t, err)
			assert.Equal(t, want, wgpu.FromBytes[float32](readDevice(t, d, s.Buffer, rows*4)))
		})
	}
}
