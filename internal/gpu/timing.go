//go:build cgo && !nogpu

package gpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/internal/shaders"
)

// Floor times one pass of read.wgsl over every resident chunk: the
// device's memory-bandwidth floor for a scan of this slab, as the time, the
// bytes read and the clock. A first pass warms the pipeline and caches; the
// second is timed with GPU timestamps around its dispatches where the
// device has them (clock "gpu", as a traced search's kernels are), else on
// the wall clock from submit to done ("wall").
func (g *Index) Floor(ctx context.Context) (time.Duration, int64, string, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, "", err
	}
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	var took time.Duration
	var bytes int64
	clock := "wall"
	err := scoped(g.device(), "read floor", func() error {
		if g.dev.readPipe == nil {
			ps, err := g.dev.compile("read.wgsl", shaders.Read, nil, "main")
			if err != nil {
				return err
			}
			g.dev.readPipe = ps[0]
		}
		dev := g.device()
		bgl := g.dev.readPipe.GetBindGroupLayout(0)
		defer bgl.Release()
		sums, err := dev.TryCreateBuffer(&wgpu.BufferDescriptor{Label: "umbra floor sums", Size: shaders.ReadGroups * 16, Usage: wgpu.BufferUsageStorage})
		if err != nil {
			return err
		}
		defer sums.Release()
		var binds []*wgpu.BindGroup
		defer func() {
			for _, b := range binds {
				b.Release()
			}
		}()
		for _, ch := range g.chunks {
			if ch.rows == 0 {
				continue
			}
			words := uint64(ch.rows) * g.rowBytes() / 16
			params, err := dev.TryCreateBuffer(&wgpu.BufferDescriptor{Label: "umbra floor params", Size: shaders.ReadParamsBytes, Usage: wgpu.BufferUsageUniform | wgpu.BufferUsageCopyDst})
			if err != nil {
				return err
			}
			defer params.Release()
			if err := g.queue().TryWriteBuffer(params, 0, shaders.ReadParams(uint32(words))); err != nil {
				return err
			}
			bg, err := dev.TryCreateBindGroup(&wgpu.BindGroupDescriptor{
				Label:  "umbra floor",
				Layout: bgl,
				Entries: []wgpu.BindGroupEntry{
					{Binding: 0, Buffer: ch.data, Size: wgpu.WholeSize},
					{Binding: 1, Buffer: sums, Size: wgpu.WholeSize},
					{Binding: 2, Buffer: params, Size: wgpu.WholeSize},
				},
			})
			if err != nil {
				return err
			}
			binds = append(binds, bg)
			bytes += int64(words) * 16
		}
		timed := g.dev.timestamps && g.ensureStamps() == nil
		pass := func(stamp bool) error {
			enc, err := dev.TryCreateCommandEncoder(nil)
			if err != nil {
				return err
			}
			defer enc.Release()
			cp := enc.BeginComputePass(nil)
			if stamp {
				writeTimestamp(cp, g.stamps, 0)
			}
			cp.SetPipeline(g.dev.readPipe)
			for _, b := range binds {
				cp.SetBindGroup(0, b, nil)
				cp.DispatchWorkgroups(shaders.ReadGroups, 1, 1)
			}
			if stamp {
				writeTimestamp(cp, g.stamps, 1)
			}
			err = cp.TryEnd()
			cp.Release()
			if err != nil {
				return err
			}
			if stamp {
				if err := enc.TryResolveQuerySet(g.stamps, 0, 2, g.resolved, 0); err != nil {
					return err
				}
			}
			return g.dev.submit(enc, true)
		}
		if err := pass(false); err != nil {
			return err
		}
		start := time.Now()
		if err := pass(timed); err != nil {
			return err
		}
		took = time.Since(start)
		if timed {
			if d, err := g.readStamps(); err == nil && d > 0 && d <= took {
				took, clock = d, "gpu"
			}
		}
		return nil
	})
	return took, bytes, clock, err
}

// ensureStamps creates the two-entry timestamp query set and the buffer it
// resolves into. The caller holds the device mutex.
func (g *Index) ensureStamps() error {
	if g.stamps != nil {
		return nil
	}
	dev := g.device()
	qs, err := dev.TryCreateQuerySet(&wgpu.QuerySetDescriptor{Label: "umbra kernel time", Type: wgpu.QueryTypeTimestamp, Count: 2})
	if err != nil {
		return err
	}
	buf, err := dev.TryCreateBuffer(&wgpu.BufferDescriptor{
		Label: "umbra kernel time",
		Size:  16,
		Usage: wgpu.BufferUsageQueryResolve | wgpu.BufferUsageCopySrc,
	})
	if err != nil {
		qs.Release()
		return err
	}
	g.stamps, g.resolved = qs, buf
	return nil
}

// readStamps reads the two resolved timestamps back through the staging
// buffer and returns the time between them on the GPU's clock.
func (g *Index) readStamps() (time.Duration, error) {
	if _, err := g.staging.ensure(g.device(), 16); err != nil {
		return 0, err
	}
	enc, err := g.device().TryCreateCommandEncoder(nil)
	if err != nil {
		return 0, err
	}
	defer enc.Release()
	if err := enc.TryCopyBufferToBuffer(g.resolved, 0, g.staging.buf, 0, 16); err != nil {
		return 0, err
	}
	if err := g.dev.submit(enc, false); err != nil {
		return 0, err
	}
	raw, err := g.readback(16, nil)
	if err != nil {
		return 0, err
	}
	t0, t1 := binary.LittleEndian.Uint64(raw), binary.LittleEndian.Uint64(raw[8:])
	if t1 < t0 {
		return 0, fmt.Errorf("%w: timestamps went backwards", ErrFailed)
	}
	return time.Duration(float64(t1-t0) * timestampPeriod(g.queue())), nil
}
