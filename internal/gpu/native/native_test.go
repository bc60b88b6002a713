//go:build cgo && !nogpu

package native

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/shaders"
	"github.com/umbravec/umbra/internal/testkit"
)

var opened struct {
	sync.Once
	d   *Device
	err error
}

// testDevice opens, once per process, a device on the first adapter
// (Vulkan first), skipping (or failing under UMBRA_REQUIRE_GPU=1) where
// none opens.
func testDevice(t *testing.T) *Device {
	t.Helper()
	opened.Do(func() {
		opened.err = errors.New("no adapter")
		for _, backend := range []string{"vulkan", ""} {
			as, err := Adapters(backend)
			if err != nil {
				continue
			}
			for _, a := range as {
				if opened.d, opened.err = Open(a, nil); opened.err == nil {
					return
				}
			}
		}
	})
	if opened.err != nil {
		testkit.NoGPU(t, "no adapter opens: %v", opened.err)
	}
	return opened.d
}

// The binding recycles error-capture objects without clearing them: after a
// failed Try* call, a later good call could report the old error. call
// flushes the pool after a failure; this is the test that it works.
func TestErrorPoolFlushedAfterFailure(t *testing.T) {
	d := testDevice(t)
	for i := 0; i < 3; i++ {
		_, err := d.NewBuffer("oversized buffer", d.limits.MaxBufferSize+1<<20, gpuplan.Storage)
		require.Error(t, err, "a buffer over maxBufferSize must fail")
		assert.ErrorIs(t, err, gpuplan.ErrFailed)
		b, err := d.NewBuffer("small buffer", 64, gpuplan.Storage)
		require.NoError(t, err, "a good call after a failed one must not report the old error")
		d.Free(b)
	}
}

func TestCallRecoversPanics(t *testing.T) {
	err := call("boom", func() error { panic("validation failed") })
	require.Error(t, err)
	assert.ErrorIs(t, err, gpuplan.ErrFailed)
	assert.Contains(t, err.Error(), "boom: validation failed")
	wrapped := call("wrap", func() error { return errors.New("inner") })
	assert.ErrorIs(t, wrapped, gpuplan.ErrFailed)
}

// The device is created with the adapter's own limits, so a buffer larger
// than WebGPU's default 256 MiB maxBufferSize can be created when the
// adapter allows it.
func TestDeviceHasAdapterLimits(t *testing.T) {
	d := testDevice(t)
	const size = 300 << 20
	if d.limits.MaxBufferSize < size {
		t.Skipf("adapter maxBufferSize is %d", d.limits.MaxBufferSize)
	}
	b, err := d.NewBuffer("300 MiB buffer", size, gpuplan.Storage)
	require.NoError(t, err)
	d.Free(b)
}

// TestScopeCatchesWhatTheBindingMisses provokes a validation error outside
// any scope of the binding's; only Scope's own error scopes can catch it
// (unscoped, wgpu-native would abort the process). It proves the C
// declarations in scope.go match the library's.
func TestScopeCatchesWhatTheBindingMisses(t *testing.T) {
	d := testDevice(t)
	err := d.Scope("oversized buffer", func() error {
		d.ProvokeValidationError(d.limits.MaxBufferSize + 4096)
		return nil
	})
	require.Error(t, err)
	assert.ErrorIs(t, err, gpuplan.ErrFailed)
	assert.Contains(t, err.Error(), "oversized buffer: validation:")
	assert.Contains(t, err.Error(), "greater than the maximum buffer size")
	require.NoError(t, d.Scope("nothing", func() error { return nil }), "a clean scope reports no error")
}

// TestBindGroupsFollowTheirBuffers: a dispatch's bind group is made once
// per set of buffers and dropped when one of them is freed, so a buffer
// freed and another created in its place is never bound through a stale
// group.
func TestBindGroupsFollowTheirBuffers(t *testing.T) {
	d := testDevice(t)
	src := `@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1) fn main() { out[0] = out[0] + 1u; }`
	bs := []gpuplan.PipeSpec{{Label: "test", Source: src, Entry: "main", Layout: "test out",
		Bindings: []shaders.Binding{{Binding: 0, Kind: shaders.Storage}}}}
	ps, err := d.Pipelines(bs...)
	require.NoError(t, err)
	run := func(b gpuplan.Buffer, rd gpuplan.Buffer, times int) uint32 {
		var w gpuplan.Work
		for range times {
			w.Pass = append(w.Pass, gpuplan.Dispatch{Pipe: ps[0], Buffers: []gpuplan.Buffer{b}, X: 1, Y: 1, Z: 1})
		}
		w.Copies = []gpuplan.Copy{{Src: b, Dst: rd, Size: 4}}
		w.Map, w.MapBytes = rd, 4
		done, err := d.Submit(w, false)
		require.NoError(t, err)
		return uint32(done.Data[0]) | uint32(done.Data[1])<<8
	}
	rd, err := d.NewBuffer("read", 4, gpuplan.MapRead|gpuplan.CopyDst)
	require.NoError(t, err)
	defer d.Free(rd)
	for i := range 3 {
		b, err := d.NewBuffer("out", 4, gpuplan.Storage|gpuplan.CopySrc|gpuplan.CopyDst)
		require.NoError(t, err)
		require.NoError(t, d.Write(b, 0, []byte{0, 0, 0, 0}))
		assert.Equal(t, uint32(3), run(b, rd, 3), "round %d", i)
		assert.Equal(t, uint32(5), run(b, rd, 2), "round %d: the same group again", i)
		d.Free(b)
		for k := range d.binds {
			for _, x := range k.bufs {
				require.NotSame(t, RawBuffer(b), x, "a freed buffer's bind group is dropped")
			}
		}
	}
}
