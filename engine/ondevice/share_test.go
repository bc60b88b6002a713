//go:build cgo && !nogpu

package ondevice_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/engine/ondevice"
	"github.com/umbravec/umbra/internal/testkit"
)

// ownDevice opens a device of the test's own on the best adapter, as a
// program that draws would, or skips (fails under UMBRA_REQUIRE_GPU=1).
func ownDevice(t *testing.T) (*wgpu.Adapter, *wgpu.Device) {
	t.Helper()
	inst := wgpu.CreateInstance(nil)
	list := inst.EnumerateAdapters(nil)
	infos := make([]diag.AdapterInfo, 0, len(list))
	keep := list[:0]
	for _, a := range list {
		if info, err := ondevice.DescribeAdapter(a); err == nil {
			infos, keep = append(infos, info), append(keep, a)
		}
	}
	for _, i := range ondevice.Rank(infos, engine.AdapterSelect{}) {
		dev, err := keep[i].RequestDevice(&wgpu.DeviceDescriptor{Label: "ondevice test"})
		if err != nil {
			continue
		}
		t.Cleanup(dev.Release)
		t.Logf("adapter %s", infos[i])
		return keep[i], dev
	}
	testkit.NoGPU(t, "no adapter gives a device")
	return nil, nil
}

// readBack copies size bytes of src to the host.
func readBack(t *testing.T, dev *wgpu.Device, src *wgpu.Buffer, size uint64) []byte {
	t.Helper()
	staging, err := dev.TryCreateBuffer(&wgpu.BufferDescriptor{Size: size, Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst})
	require.NoError(t, err)
	defer staging.Release()
	enc, err := dev.TryCreateCommandEncoder(nil)
	require.NoError(t, err)
	defer enc.Release()
	require.NoError(t, enc.TryCopyBufferToBuffer(src, 0, staging, 0, size))
	cmd, err := enc.TryFinish(nil)
	require.NoError(t, err)
	dev.GetQueue().Submit(cmd)
	cmd.Release()
	status := wgpu.MapAsyncStatus(0)
	require.NoError(t, staging.TryMapAsync(wgpu.MapModeRead, 0, size, func(s wgpu.MapAsyncStatus) { status = s }))
	dev.Poll(true, nil)
	require.Equal(t, wgpu.MapAsyncStatusSuccess, status)
	out := slices.Clone(staging.GetMappedRange(0, uint(size)))
	require.NoError(t, staging.TryUnmap())
	return out
}

// TestResidentAndScoreInto: on a device planned with 64 KiB bindings the
// rows span several chunks; Resident's buffers hold them normalised, as
// the index stores them, and ScoreInto's buffer holds for every row the
// score Search reports.
func TestResidentAndScoreInto(t *testing.T) {
	adapter, dev := ownDevice(t)
	r := testkit.Rand(t)
	limits := ondevice.DefaultLimits()
	limits.MaxStorageBufferBindingSize = 64 << 10
	const dim, n = 40, 1500
	ix, err := ondevice.New(context.Background(), engine.Config{Dim: dim, Metric: umbra.Cosine}, adapter, dev, &limits)
	require.NoError(t, err)
	defer ix.Close()
	data := make([]float32, n*dim)
	for i := range data {
		data[i] = r.Float32()*4 - 2
	}
	_, err = ix.Add(context.Background(), umbra.Flat(data, ix.Dim()))
	require.NoError(t, err)

	chunks, err := ix.Resident()
	require.NoError(t, err)
	require.Greater(t, len(chunks), 1, "64 KiB bindings split %d rows", n)
	next := 0
	for c, ch := range chunks {
		require.Equal(t, next, ch.First, "chunk %d", c)
		require.Equal(t, dim, ch.Stride) // 40 is already a multiple of 4
		got := wgpu.FromBytes[float32](readBack(t, dev, ch.Buffer, uint64(ch.Rows*ch.Stride)*4))
		for i := 0; i < ch.Rows; i++ {
			row := data[(ch.First+i)*dim : (ch.First+i+1)*dim]
			var norm float64
			for _, x := range row {
				norm += float64(x) * float64(x)
			}
			for j, x := range row {
				require.InDelta(t, float64(x)/math.Sqrt(norm), got[i*ch.Stride+j], 1e-6, "row %d component %d", ch.First+i, j)
			}
		}
		next += ch.Rows
	}
	require.Equal(t, n, next)

	q := make([]float32, dim) // row 0, not unit: ScoreInto normalises as Search does
	for i := range q {
		q[i] = 3 * data[i]
	}
	s, err := ix.ScoreInto(context.Background(), q)
	require.NoError(t, err)
	require.Equal(t, n, s.Rows)
	scores := wgpu.FromBytes[float32](readBack(t, dev, s.Buffer, n*4))
	hits, err := ix.Search(context.Background(), q, n)
	require.NoError(t, err)
	require.Len(t, hits, n)
	for _, h := range hits {
		require.Equal(t, h.Score, scores[h.ID], "row %d", h.ID)
	}
	assert.InDelta(t, 1, scores[0], 1e-5, "row 0 is the query's direction")
}

// TestRowIDsMapScores: with caller IDs and a deleted vector, RowIDs says
// which ID each scored row holds and that the deleted one is no longer
// live; the live rows' scores are the ones Search reports for their IDs.
func TestRowIDsMapScores(t *testing.T) {
	adapter, dev := ownDevice(t)
	r := testkit.Rand(t)
	const dim = 8
	ix, err := ondevice.New(context.Background(), engine.Config{Dim: dim, Metric: umbra.Dot}, adapter, dev, nil)
	require.NoError(t, err)
	defer ix.Close()
	ids := []uint64{70, 3, 999, 12, 45}
	vs := make([][]float32, len(ids))
	for i := range vs {
		vs[i] = make([]float32, dim)
		for j := range vs[i] {
			vs[i][j] = r.Float32()*2 - 1
		}
	}
	require.NoError(t, testkit.ErrOf(ix.Add(context.Background(), umbra.Vectors(vs), umbra.WithIDs(ids...))))
	require.NoError(t, ix.Delete(context.Background(), umbra.WithIDs(999)))

	rowIDs, live, err := ix.RowIDs()
	require.NoError(t, err)
	assert.Equal(t, ids, rowIDs, "rows keep the order they were added in")
	assert.Equal(t, []bool{true, true, false, true, true}, live)

	q := vs[1]
	s, err := ix.ScoreInto(context.Background(), q)
	require.NoError(t, err)
	require.Equal(t, len(ids), s.Rows, "the deleted row is still resident")
	scores := wgpu.FromBytes[float32](readBack(t, dev, s.Buffer, uint64(s.Rows)*4))
	hits, err := ix.Search(context.Background(), q, len(ids))
	require.NoError(t, err)
	require.Len(t, hits, len(ids)-1)
	byID := map[uint64]float32{}
	for _, h := range hits {
		byID[h.ID] = h.Score
	}
	for row, id := range rowIDs {
		if live[row] {
			assert.Equal(t, byID[id], scores[row], "row %d, ID %d", row, id)
		}
	}
}

// TestShareErrors: the query is checked as Search checks it, and indexes
// without a caller's device, or closed, are refused by name.
func TestShareErrors(t *testing.T) {
	adapter, dev := ownDevice(t)
	ix, err := ondevice.New(context.Background(), engine.Config{Dim: 3}, adapter, dev, nil)
	require.NoError(t, err)
	_, err = ix.Add(context.Background(), umbra.Vectors([][]float32{{1, 2, 3}}))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = ix.ScoreInto(ctx, []float32{1, 2})
	assert.ErrorIs(t, err, umbra.ErrDimMismatch)
	_, err = ix.ScoreInto(ctx, []float32{1, float32(math.NaN()), 3})
	assert.ErrorIs(t, err, umbra.ErrNonFinite)
	_, err = ix.ScoreInto(ctx, []float32{0, 0, 0})
	assert.ErrorIs(t, err, umbra.ErrZeroVector)
	require.NoError(t, ix.Close())
	_, err = ix.ScoreInto(ctx, []float32{1, 2, 3})
	assert.ErrorIs(t, err, umbra.ErrClosed)
	_, err = ix.Resident()
	assert.ErrorIs(t, err, umbra.ErrClosed)
	_, _, err = ix.RowIDs()
	assert.ErrorIs(t, err, umbra.ErrClosed)

	var none *ondevice.Index
	_, err = none.Resident()
	assert.ErrorIs(t, err, ondevice.ErrNotOnDevice)
}

// ExampleIndex_ScoreInto colours a draw by every row's similarity to a query
// without reading the scores back: the buffer is bound as a vertex buffer
// of the caller's render pass.
func ExampleIndex_ScoreInto() {
	var adapter *wgpu.Adapter // the caller's, as is device
	var device *wgpu.Device
	ctx := context.Background()
	ix, err := ondevice.New(ctx, engine.Config{Dim: 3}, adapter, device, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ix.Close()
	if _, err := ix.Add(ctx, umbra.Vectors([][]float32{{1, 0, 0}, {0, 1, 0}})); err != nil {
		fmt.Println(err)
		return
	}
	scores, err := ix.ScoreInto(ctx, []float32{1, 1, 0})
	if err != nil {
		fmt.Println(err)
		return
	}
	// In the caller's render pass: one instance per row, its score at
	// vertex slot 1 (float32, step mode instance).
	var pass *wgpu.RenderPassEncoder
	pass.SetVertexBuffer(1, scores.Buffer, 0, wgpu.WholeSize)
	pass.Draw(6, uint32(scores.Rows), 0, 0)
}

// ExampleIndex_Resident binds an index's rows in the caller's own compute pass,
// chunk by chunk, instead of uploading a second copy.
func ExampleIndex_Resident() {
	var ix *ondevice.Index // made by New, with rows added
	chunks, err := ix.Resident()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range chunks {
		// Bind c.Buffer as array<vec4<f32>>, c.Stride/4 vec4 per row;
		// its row i is the index's row c.First+i.
		fmt.Println(c.First, c.Rows, c.Stride)
	}
}

// TestNewRefusesWhatCannotApply: a Config field that cannot apply to an
// index on the caller's device is refused by name, before the device is
// touched, rather than ignored.
func TestNewRefusesWhatCannotApply(t *testing.T) {
	ctx := context.Background()
	for field, cfg := range map[string]engine.Config{
		"Device CPU":      {Dim: 3, Device: engine.CPU},
		"Adapters":        {Dim: 3, Adapters: []engine.AdapterSelect{{Name: "x"}}},
		"Isolate":         {Dim: 3, Isolate: true},
		"Limits.Overflow": {Dim: 3, Limits: engine.Limits{Overflow: true, MaxDeviceBytes: 1 << 20}},
		"ProbeTimeout":    {Dim: 3, ProbeTimeout: time.Second},
	} {
		_, err := ondevice.New(ctx, cfg, nil, nil, nil)
		require.ErrorIs(t, err, umbra.ErrInvalidConfig, field)
		assert.Contains(t, err.Error(), field)
	}
}
