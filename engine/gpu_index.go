//go:build cgo && !nogpu

package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/shaders"
)

// writePiece bounds one queue write so the driver's staging copy of a large
// upload stays small.
const writePiece = 16 << 20

// gpuChunk is one resident run of rows: a storage buffer of at most
// plan.RowsPerChunk rows, the scores it produces and its bind group.
type gpuChunk struct {
	capRows int
	rows    int // rows resident and valid
	data    *wgpu.Buffer
	scores  *wgpu.Buffer
	params  *wgpu.Buffer
	bind    *wgpu.BindGroup
}

// wgpuIndex is the device side of one Index.
type wgpuIndex struct {
	dev     *gpuDevice
	layout  shaders.ScoresLayout
	pipe    *wgpu.ComputePipeline
	plan    host.ChunkPlan
	chunks  []*gpuChunk
	query   *wgpu.Buffer
	staging *wgpu.Buffer
	stageN  int // rows the staging buffer holds
}

func newGPUIndex(dev *gpuDevice, stride int, metric uint32, maxChunkRows int) (*wgpuIndex, error) {
	plan, err := host.PlanChunks(stride, host.Limits{
		MaxStorageBindingBytes: dev.lim.MaxStorageBindingBytes,
		MaxBufferBytes:         dev.lim.MaxBufferBytes,
		MaxWorkgroupsPerDim:    dev.lim.MaxWorkgroupsPerDim,
		MaxChunkRows:           maxChunkRows,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	layout, err := shaders.PlanScores(stride, metric, dev.lim.MaxInvocations)
	if err != nil {
		return nil, err
	}
	g := &wgpuIndex{dev: dev, layout: layout, plan: plan}
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if g.pipe, err = dev.pipeline(layout); err != nil {
		return nil, err
	}
	err = gpuCall("create query buffer", func() error {
		g.query, err = dev.device.TryCreateBuffer(&wgpu.BufferDescriptor{
			Label: "umbra query",
			Size:  uint64(stride) * 4,
			Usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopyDst,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (g *wgpuIndex) adapter() AdapterInfo { return g.dev.info }
func (g *wgpuIndex) limits() DeviceLimits { return g.dev.lim }
func (g *wgpuIndex) chunkRows() int       { return g.plan.RowsPerChunk }
func (g *wgpuIndex) rowBytes() uint64     { return uint64(g.plan.Stride) * 4 }
func (g *wgpuIndex) device() *wgpu.Device { return g.dev.device }
func (g *wgpuIndex) queueOf() *wgpu.Queue { return g.dev.queue }

// grow gives chunk c room for need rows. A grown chunk gets new buffers; the
// rows already resident are copied device to device, never re-sent from the
// host. Capacity doubles so a run of small Adds costs amortised O(1) copies.
func (g *wgpuIndex) grow(c, need int) error {
	for len(g.chunks) <= c {
		g.chunks = append(g.chunks, &gpuChunk{})
	}
	ch := g.chunks[c]
	if need <= ch.capRows {
		return nil
	}
	capRows := max(need, 2*ch.capRows, 256)
	capRows = min(capRows, g.plan.RowsPerChunk)
	dev := g.device()
	return gpuCall("grow device buffers", func() error {
		data, err := dev.TryCreateBuffer(&wgpu.BufferDescriptor{
			Label: fmt.Sprintf("umbra rows %d", c),
			Size:  uint64(capRows) * g.rowBytes(),
			Usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopyDst | wgpu.BufferUsageCopySrc,
		})
		if err != nil {
			return err
		}
		scores, err := dev.TryCreateBuffer(&wgpu.BufferDescriptor{
			Label: fmt.Sprintf("umbra scores %d", c),
			Size:  uint64(capRows) * 4,
			Usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopySrc,
		})
		if err != nil {
			data.Release()
			return err
		}
		params := ch.params
		if params == nil {
			if params, err = dev.TryCreateBuffer(&wgpu.BufferDescriptor{
				Label: fmt.Sprintf("umbra params %d", c),
				Size:  16,
				Usage: wgpu.BufferUsageUniform | wgpu.BufferUsageCopyDst,
			}); err != nil {
				data.Release()
				scores.Release()
				return err
			}
		}
		bind, err := dev.TryCreateBindGroup(&wgpu.BindGroupDescriptor{
			Label:  fmt.Sprintf("umbra bind %d", c),
			Layout: g.pipe.GetBindGroupLayout(0),
			Entries: []wgpu.BindGroupEntry{
				{Binding: 0, Buffer: data, Size: wgpu.WholeSize},
				{Binding: 1, Buffer: g.query, Size: wgpu.WholeSize},
				{Binding: 2, Buffer: scores, Size: wgpu.WholeSize},
				{Binding: 3, Buffer: params, Size: wgpu.WholeSize},
			},
		})
		if err != nil {
			data.Release()
			scores.Release()
			return err
		}
		if ch.rows > 0 {
			enc, err := dev.TryCreateCommandEncoder(nil)
			if err != nil {
				return err
			}
			defer enc.Release()
			if err := enc.TryCopyBufferToBuffer(ch.data, 0, data, 0, uint64(ch.rows)*g.rowBytes()); err != nil {
				return err
			}
			cmd, err := enc.TryFinish(nil)
			if err != nil {
				return err
			}
			g.queueOf().Submit(cmd)
			cmd.Release()
		}
		ch.data.Release()
		ch.scores.Release()
		ch.bind.Release()
		ch.data, ch.scores, ch.params, ch.bind, ch.capRows = data, scores, params, bind, capRows
		return nil
	})
}

// upload makes rows [from, s.Rows) resident, sending only those rows.
func (g *wgpuIndex) upload(ctx context.Context, s *host.Slab, from int) error {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if from >= s.Rows {
		return nil
	}
	first, last := from/g.plan.RowsPerChunk, (s.Rows-1)/g.plan.RowsPerChunk
	type done struct{ c, rows int }
	var commit []done
	for c := first; c <= last; c++ {
		start, n := g.plan.Span(c, s.Rows)
		if err := g.grow(c, n); err != nil {
			return err
		}
		lo := max(from, start)
		bytes := s.Data[lo*s.Stride : (start+n)*s.Stride]
		off := uint64(lo-start) * g.rowBytes()
		err := gpuCall("upload rows", func() error {
			for len(bytes) > 0 {
				piece := bytes[:min(len(bytes), writePiece/4)]
				if err := g.queueOf().TryWriteBuffer(g.chunks[c].data, off, wgpu.ToBytes(piece)); err != nil {
					return err
				}
				off += uint64(len(piece)) * 4
				bytes = bytes[len(piece):]
			}
			return nil
		})
		if err != nil {
			return err
		}
		commit = append(commit, done{c, n})
	}
	// Wait for the writes so a failure surfaces here, not in a search.
	if err := gpuCall("finish upload", func() error { g.queueOf().Submit(); g.device().Poll(true, nil); return nil }); err != nil {
		return err
	}
	for _, d := range commit {
		g.chunks[d.c].rows = d.rows
	}
	if t := traceFrom(ctx); t != nil {
		t.UploadBytes += int64(s.Rows-from) * int64(g.rowBytes())
	}
	return nil
}

// grid returns the 2-D dispatch for a chunk of rows rows.
func (g *wgpuIndex) grid(rows int) (x, y uint32) {
	groups := (uint64(rows) + uint64(g.layout.Rows) - 1) / uint64(g.layout.Rows)
	maxX := uint64(g.dev.lim.MaxWorkgroupsPerDim)
	if maxX == 0 {
		maxX = 65535
	}
	gx := min(groups, maxX)
	gy := (groups + gx - 1) / gx
	return uint32(gx), uint32(gy)
}

// scores writes the query, scores every resident chunk in one submission,
// copies the scores into one staging buffer and reads it back.
func (g *wgpuIndex) scores(ctx context.Context, q []float32, rows int) ([]float32, error) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]float32, rows)
	if rows == 0 {
		return out, nil
	}
	dev, queue := g.device(), g.queueOf()
	t := traceFrom(ctx)
	start := time.Now()
	// wait submits what is queued and blocks until the device is idle; a
	// traced search calls it between stages so each stage is timed alone.
	wait := func(enc **wgpu.CommandEncoder) error {
		if *enc != nil {
			cmd, err := (*enc).TryFinish(nil)
			(*enc).Release()
			*enc = nil
			if err != nil {
				return err
			}
			queue.Submit(cmd)
			cmd.Release()
		} else {
			queue.Submit()
		}
		dev.Poll(true, nil)
		return nil
	}
	err := gpuCall("search", func() error {
		if rows > g.stageN {
			if g.staging != nil {
				g.staging.Release()
				g.staging, g.stageN = nil, 0
			}
			n := max(rows, 2*g.stageN)
			st, err := dev.TryCreateBuffer(&wgpu.BufferDescriptor{
				Label: "umbra readback",
				Size:  uint64(n) * 4,
				Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst,
			})
			if err != nil {
				return err
			}
			g.staging, g.stageN = st, n
		}
		if err := queue.TryWriteBuffer(g.query, 0, wgpu.ToBytes(q)); err != nil {
			return err
		}
		var params [16]byte
		for _, ch := range g.chunks {
			x, _ := g.grid(ch.rows)
			binary.LittleEndian.PutUint32(params[0:], uint32(ch.rows))
			binary.LittleEndian.PutUint32(params[4:], x)
			if err := queue.TryWriteBuffer(ch.params, 0, params[:]); err != nil {
				return err
			}
		}
		if t != nil {
			if err := wait(new(*wgpu.CommandEncoder)); err != nil {
				return err
			}
			start = stage(t, &t.Upload, start)
			t.UploadBytes += int64(len(q)) * 4
		}
		enc, err := dev.TryCreateCommandEncoder(nil)
		if err != nil {
			return err
		}
		defer func() { enc.Release() }()
		pass := enc.BeginComputePass(nil)
		pass.SetPipeline(g.pipe)
		for _, ch := range g.chunks {
			if ch.rows == 0 {
				continue
			}
			x, y := g.grid(ch.rows)
			pass.SetBindGroup(0, ch.bind, nil)
			pass.DispatchWorkgroups(x, y, 1)
		}
		err = pass.TryEnd()
		pass.Release()
		if err != nil {
			return err
		}
		if t != nil {
			if err := wait(&enc); err != nil {
				return err
			}
			start = stage(t, &t.Kernel, start)
			t.KernelClock = "wall"
			if enc, err = dev.TryCreateCommandEncoder(nil); err != nil {
				return err
			}
		}
		for c, ch := range g.chunks {
			if ch.rows == 0 {
				continue
			}
			start := uint64(c*g.plan.RowsPerChunk) * 4
			if err := enc.TryCopyBufferToBuffer(ch.scores, 0, g.staging, start, uint64(ch.rows)*4); err != nil {
				return err
			}
		}
		cmd, err := enc.TryFinish(nil)
		if err != nil {
			return err
		}
		queue.Submit(cmd)
		cmd.Release()
		if err := g.readback(out); err != nil {
			return err
		}
		if t != nil {
			stage(t, &t.Readback, start)
			t.ReadbackBytes += int64(rows) * 4
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readback maps the staging buffer, copies len(out) scores and unmaps it.
func (g *wgpuIndex) readback(out []float32) error {
	size := uint64(len(out)) * 4
	status := wgpu.MapAsyncStatus(0)
	if err := g.staging.TryMapAsync(wgpu.MapModeRead, 0, size, func(s wgpu.MapAsyncStatus) { status = s }); err != nil {
		return err
	}
	g.device().Poll(true, nil)
	if status != wgpu.MapAsyncStatusSuccess {
		return fmt.Errorf("%w: mapping the readback buffer failed: %v", ErrGPU, status)
	}
	copy(out, wgpu.FromBytes[float32](g.staging.GetMappedRange(0, uint(size))))
	return g.staging.TryUnmap()
}

func (g *wgpuIndex) release() {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	_ = gpuCall("release", func() error {
		for _, ch := range g.chunks {
			ch.bind.Release()
			ch.data.Release()
			ch.scores.Release()
			ch.params.Release()
		}
		g.chunks = nil
		g.query.Release()
		g.staging.Release()
		return nil
	})
}
