//go:build cgo && !nogpu

package main

import (
	"encoding/binary"
	"fmt"
	"image"
	"math"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/engine/ondevice"
)

// targetFormat is the scene's render target. Colours are written to it as
// sRGB-encoded values, so its bytes are the picture (a PNG as they are).
const (
	targetFormat = wgpu.TextureFormatRGBA8Unorm
	depthFormat  = wgpu.TextureFormatDepth32Float
	frameBytes   = 48 // the Frame uniform of draw.wgsl
	boundsAt     = 40 // offset of lo_key, hi_key in Frame
)

// scene owns the demo's device resources: the layout positions, the
// pipelines and the render target, and bind groups over the umbra index's
// resident rows (the projection reads them there; the demo keeps no copy)
// and over the index's per-frame scores (Index.ScoreInto).
type scene struct {
	s           *session
	set         *memorySet
	stride      int
	dim4        int
	maxRings    int
	blocks      int // weighted-sum blocks of all chunks
	blockRows   int
	width       int
	height      int
	pos         []float32 // layout positions read back after the projection, 2 per row
	chunks      []sceneChunk
	basis       *wgpu.Buffer
	posBuf      *wgpu.Buffer
	partial     *wgpu.Buffer
	bounds      *wgpu.Buffer
	boundParams *wgpu.Buffer
	frame       *wgpu.Buffer
	rings       *wgpu.Buffer
	projectPipe *wgpu.ComputePipeline
	weightPipe  *wgpu.ComputePipeline
	boundPipe   *wgpu.ComputePipeline
	boundBind   *wgpu.BindGroup
	boundFor    *wgpu.Buffer // the scores buffer boundBind names
	pointPipe   *wgpu.RenderPipeline
	ringPipe    *wgpu.RenderPipeline
	markerPipe  *wgpu.RenderPipeline
	drawBind    *wgpu.BindGroup
	target      *wgpu.Texture
	targetView  *wgpu.TextureView
	depth       *wgpu.Texture
	depthView   *wgpu.TextureView
}

// sceneChunk is the projection's view of one resident chunk of the index:
// its rows, where they start in the set and in the weighted-sum blocks,
// and the chunk's own params and bind groups.
type sceneChunk struct {
	ondevice.Chunk
	firstBlock  int
	blocks      int
	params      *wgpu.Buffer
	projectBind *wgpu.BindGroup
	weightBind  *wgpu.BindGroup
}

// projParamsBytes is the Params uniform of project.wgsl.
const projParamsBytes = 48

// newScene builds the pipelines for a width×height target over the rows
// of set as ix holds them on s's device. ix must not be added to while the
// scene lives: the scene binds its buffers.
func newScene(s *session, set *memorySet, ix *ondevice.Index, width, height, maxRings int) (*scene, error) {
	if err := checkSceneSize(s, set); err != nil {
		return nil, err
	}
	chunks, err := ix.Resident()
	if err != nil {
		return nil, fmt.Errorf("the index's resident rows: %w", err)
	}
	if len(chunks) == 0 {
		return nil, fmt.Errorf("the index holds no rows on the device")
	}
	// The scene reads the rows at the index's own row stride.
	sc := &scene{s: s, set: set, stride: chunks[0].Stride, maxRings: maxRings}
	sc.dim4 = sc.stride / 4
	if err := sc.planChunks(chunks); err != nil {
		return nil, err
	}
	// The rings are drawn at the hits' IDs, so row r must hold ID r: the
	// index was filled by Add alone and nothing was deleted.
	ids, live, err := ix.RowIDs()
	if err != nil {
		return nil, fmt.Errorf("the index's rows: %w", err)
	}
	for r, id := range ids {
		if id != uint64(r) || !live[r] {
			return nil, fmt.Errorf("the index's row %d holds ID %d (live: %v); the demo draws row r as ID r", r, id, live[r])
		}
	}
	err = guard("create demo buffers", func() error {
		const st = wgpu.BufferUsageStorage
		var err error
		mk := func(dst **wgpu.Buffer, label string, size uint64, usage wgpu.BufferUsage) {
			if err == nil {
				*dst, err = s.buffer(label, size, usage)
			}
		}
		mk(&sc.basis, "demo basis", uint64(2*sc.stride)*4, st|wgpu.BufferUsageCopyDst)
		mk(&sc.posBuf, "demo positions", uint64(set.rows)*8, st|wgpu.BufferUsageVertex|wgpu.BufferUsageCopySrc)
		mk(&sc.partial, "demo partial sums", uint64(sc.blocks*sc.dim4)*32, st|wgpu.BufferUsageCopySrc)
		mk(&sc.bounds, "demo score bounds", 8, st|wgpu.BufferUsageCopySrc|wgpu.BufferUsageCopyDst)
		mk(&sc.boundParams, "demo bounds params", 16, wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst)
		mk(&sc.frame, "demo frame", frameBytes, wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst|wgpu.BufferUsageCopySrc)
		mk(&sc.rings, "demo rings", uint64(maxRings)*8, wgpu.BufferUsageVertex|wgpu.BufferUsageCopyDst)
		for i := range sc.chunks {
			mk(&sc.chunks[i].params, fmt.Sprintf("demo projection params %d", i), projParamsBytes, wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst)
		}
		return err
	})
	if err != nil {
		sc.release()
		return nil, err
	}
	if err := guard("build compute pipelines", sc.buildCompute); err != nil {
		sc.release()
		return nil, err
	}
	if err := guard("build render pipelines", sc.buildRender); err != nil {
		sc.release()
		return nil, err
	}
	if err := sc.resize(width, height); err != nil {
		sc.release()
		return nil, err
	}
	return sc, nil
}

// planChunks checks that the index's chunks hold exactly the set's rows,
// in order, at the demo's stride, and places each chunk's weighted-sum
// blocks: blocks never straddle chunks.
func (sc *scene) planChunks(chunks []ondevice.Chunk) error {
	// Blocks of rows for the weighted-sum pass: enough to fill a GPU, few
	// enough that reading back their partial sums stays small.
	sc.blockRows = max(128, (sc.set.rows+511)/512)
	next := 0
	for i, c := range chunks {
		if c.First != next || c.Stride != sc.stride {
			return fmt.Errorf("the index's chunk %d holds rows from %d at stride %d; the demo expects row %d at stride %d", i, c.First, c.Stride, next, sc.stride)
		}
		blocks := (c.Rows + sc.blockRows - 1) / sc.blockRows
		sc.chunks = append(sc.chunks, sceneChunk{Chunk: c, firstBlock: sc.blocks, blocks: blocks})
		sc.blocks += blocks
		next += c.Rows
	}
	if next != sc.set.rows {
		return fmt.Errorf("the index holds %d rows on the device, the demo draws %d", next, sc.set.rows)
	}
	return nil
}

// checkSceneSize says whether the scene's own buffers fit the device: the
// layout positions are bound whole (the rows stay in the index's chunks,
// which have no such cap).
func checkSceneSize(s *session, set *memorySet) error {
	lim := min(s.limits.MaxStorageBufferBindingSize, s.limits.MaxBufferSize)
	if need := uint64(set.rows) * 8; need > lim {
		return fmt.Errorf("the layout positions of %d rows take %d MiB, more than one buffer binding of this device holds (%d MiB); use --n %d or fewer",
			set.rows, need>>20, lim>>20, lim/8)
	}
	return nil
}

func (sc *scene) buildCompute() error {
	d := sc.s.device
	proj, err := sc.s.module("project.wgsl", projectWGSL)
	if err != nil {
		return err
	}
	defer proj.Release()
	bnd, err := sc.s.module("bounds.wgsl", boundsWGSL)
	if err != nil {
		return err
	}
	defer bnd.Release()
	pipe := func(m *wgpu.ShaderModule, entry string) (*wgpu.ComputePipeline, error) {
		return d.TryCreateComputePipeline(&wgpu.ComputePipelineDescriptor{Label: entry, Compute: wgpu.ProgrammableStageDescriptor{Module: m, EntryPoint: entry}})
	}
	if sc.projectPipe, err = pipe(proj, "project"); err != nil {
		return err
	}
	if sc.weightPipe, err = pipe(proj, "weighted"); err != nil {
		return err
	}
	if sc.boundPipe, err = pipe(bnd, "main"); err != nil {
		return err
	}
	whole := func(b uint32, buf *wgpu.Buffer) wgpu.BindGroupEntry {
		return wgpu.BindGroupEntry{Binding: b, Buffer: buf, Size: wgpu.WholeSize}
	}
	for i := range sc.chunks {
		c := &sc.chunks[i]
		if c.projectBind, err = d.TryCreateBindGroup(&wgpu.BindGroupDescriptor{Label: "project", Layout: sc.projectPipe.GetBindGroupLayout(0),
			Entries: []wgpu.BindGroupEntry{whole(0, c.Buffer), whole(1, sc.basis), whole(2, sc.posBuf), whole(4, c.params)}}); err != nil {
			return err
		}
		if c.weightBind, err = d.TryCreateBindGroup(&wgpu.BindGroupDescriptor{Label: "weighted", Layout: sc.weightPipe.GetBindGroupLayout(0),
			Entries: []wgpu.BindGroupEntry{whole(0, c.Buffer), whole(2, sc.posBuf), whole(3, sc.partial), whole(4, c.params)}}); err != nil {
			return err
		}
	}
	return nil
}

// bindScores points the bounds pass at the index's scores buffer, once
// per buffer: ScoreInto keeps one until the index grows.
func (sc *scene) bindScores(scores *wgpu.Buffer) error {
	if sc.boundBind != nil && sc.boundFor == scores {
		return nil
	}
	bg, err := sc.s.device.TryCreateBindGroup(&wgpu.BindGroupDescriptor{Label: "bounds", Layout: sc.boundPipe.GetBindGroupLayout(0),
		Entries: []wgpu.BindGroupEntry{
			{Binding: 0, Buffer: scores, Size: wgpu.WholeSize},
			{Binding: 1, Buffer: sc.bounds, Size: wgpu.WholeSize},
			{Binding: 2, Buffer: sc.boundParams, Size: wgpu.WholeSize},
		}})
	if err != nil {
		return err
	}
	if sc.boundBind != nil {
		sc.boundBind.Release()
	}
	sc.boundBind, sc.boundFor = bg, scores
	return nil
}

func (sc *scene) buildRender() error {
	d := sc.s.device
	mod, err := sc.s.module("draw.wgsl", drawWGSL)
	if err != nil {
		return err
	}
	defer mod.Release()
	vec2 := func(loc uint32) wgpu.VertexBufferLayout {
		return wgpu.VertexBufferLayout{ArrayStride: 8, StepMode: wgpu.VertexStepModeInstance,
			Attributes: []wgpu.VertexAttribute{{Format: wgpu.VertexFormatFloat32x2, ShaderLocation: loc}}}
	}
	// One explicit layout: pipelines with automatic layouts cannot share
	// a bind group.
	bgl, err := d.TryCreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: "draw", Entries: []wgpu.BindGroupLayoutEntry{{
		Binding: 0, Visibility: wgpu.ShaderStageVertex | wgpu.ShaderStageFragment,
		Buffer: wgpu.BufferBindingLayout{Type: wgpu.BufferBindingTypeUniform, MinBindingSize: frameBytes}}}})
	if err != nil {
		return err
	}
	defer bgl.Release()
	layout, err := d.TryCreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{Label: "draw", BindGroupLayouts: []*wgpu.BindGroupLayout{bgl}})
	if err != nil {
		return err
	}
	defer layout.Release()
	pipe := func(label, vs, fs string, buffers []wgpu.VertexBufferLayout, depthWrite bool) (*wgpu.RenderPipeline, error) {
		ds := &wgpu.DepthStencilState{Format: depthFormat, DepthWriteEnabled: wgpu.OptionalBoolFalse, DepthCompare: wgpu.CompareFunctionAlways,
			StencilFront: wgpu.StencilFaceState{Compare: wgpu.CompareFunctionAlways}, StencilBack: wgpu.StencilFaceState{Compare: wgpu.CompareFunctionAlways}}
		if depthWrite {
			ds.DepthWriteEnabled, ds.DepthCompare = wgpu.OptionalBoolTrue, wgpu.CompareFunctionLess
		}
		return d.TryCreateRenderPipeline(&wgpu.RenderPipelineDescriptor{
			Label:        label,
			Layout:       layout,
			Vertex:       wgpu.VertexState{Module: mod, EntryPoint: vs, Buffers: buffers},
			Primitive:    wgpu.PrimitiveState{Topology: wgpu.PrimitiveTopologyTriangleList, FrontFace: wgpu.FrontFaceCCW, CullMode: wgpu.CullModeNone},
			DepthStencil: ds,
			Multisample:  wgpu.MultisampleState{Count: 1, Mask: 0xFFFFFFFF},
			Fragment: &wgpu.FragmentState{Module: mod, EntryPoint: fs,
				Targets: []wgpu.ColorTargetState{{Format: targetFormat, Blend: &wgpu.BlendStateReplace, WriteMask: wgpu.ColorWriteMaskAll}}},
		})
	}
	score := wgpu.VertexBufferLayout{ArrayStride: 4, StepMode: wgpu.VertexStepModeInstance,
		Attributes: []wgpu.VertexAttribute{{Format: wgpu.VertexFormatFloat32, ShaderLocation: 1}}}
	if sc.pointPipe, err = pipe("points", "vs_point", "fs_point", []wgpu.VertexBufferLayout{vec2(0), score}, true); err != nil {
		return err
	}
	if sc.ringPipe, err = pipe("rings", "vs_ring", "fs_ring", []wgpu.VertexBufferLayout{vec2(0)}, false); err != nil {
		return err
	}
	if sc.markerPipe, err = pipe("marker", "vs_marker", "fs_marker", nil, false); err != nil {
		return err
	}
	sc.drawBind, err = d.TryCreateBindGroup(&wgpu.BindGroupDescriptor{Label: "draw", Layout: bgl,
		Entries: []wgpu.BindGroupEntry{{Binding: 0, Buffer: sc.frame, Size: wgpu.WholeSize}}})
	return err
}

// resize (re)creates the render target and depth buffer.
func (sc *scene) resize(width, height int) error {
	if width == sc.width && height == sc.height && sc.target != nil {
		return nil
	}
	sc.releaseTarget()
	return guard("create render target", func() error {
		d := sc.s.device
		size := wgpu.Extent3D{Width: uint32(width), Height: uint32(height), DepthOrArrayLayers: 1}
		var err error
		sc.target, err = d.TryCreateTexture(&wgpu.TextureDescriptor{Label: "demo frame", Size: size, MipLevelCount: 1, SampleCount: 1,
			Dimension: wgpu.TextureDimension2D, Format: targetFormat,
			Usage: wgpu.TextureUsageRenderAttachment | wgpu.TextureUsageCopySrc | wgpu.TextureUsageTextureBinding})
		if err != nil {
			return err
		}
		if sc.targetView, err = sc.target.TryCreateView(nil); err != nil {
			return err
		}
		sc.depth, err = d.TryCreateTexture(&wgpu.TextureDescriptor{Label: "demo depth", Size: size, MipLevelCount: 1, SampleCount: 1,
			Dimension: wgpu.TextureDimension2D, Format: depthFormat, Usage: wgpu.TextureUsageRenderAttachment})
		if err != nil {
			return err
		}
		if sc.depthView, err = sc.depth.TryCreateView(nil); err != nil {
			return err
		}
		sc.width, sc.height = width, height
		return nil
	})
}

// project and weightedSum make the scene the projector of fitProjection.
// Each runs its pass once per chunk of the index, in one submission.
func (sc *scene) project(basis [2][]float64, offset [2]float64) error {
	return guard("projection pass", func() error {
		b := make([]float32, 2*sc.stride)
		for a := 0; a < 2; a++ {
			for j, x := range basis[a] {
				b[a*sc.stride+j] = float32(x)
			}
		}
		if err := sc.s.queue.TryWriteBuffer(sc.basis, 0, wgpu.ToBytes(b)); err != nil {
			return err
		}
		var runs []dispatchRun
		for i := range sc.chunks {
			c := &sc.chunks[i]
			gx, gy := grid((c.Rows+63)/64, sc.s.limits.MaxComputeWorkgroupsPerDimension)
			if err := sc.writeProjParams(c, 0, gx, offset); err != nil {
				return err
			}
			runs = append(runs, dispatchRun{c.projectBind, gx, gy})
		}
		return sc.dispatch(sc.projectPipe, runs)
	})
}

func (sc *scene) weightedSum(ones bool) (out [2][]float64, err error) {
	err = guard("weighted-sum pass", func() error {
		mode := uint32(1)
		if ones {
			mode = 0
		}
		var runs []dispatchRun
		for i := range sc.chunks {
			c := &sc.chunks[i]
			if err := sc.writeProjParams(c, mode, 0, [2]float64{}); err != nil {
				return err
			}
			runs = append(runs, dispatchRun{c.weightBind, uint32((sc.dim4 + 63) / 64), uint32(c.blocks)})
		}
		if err := sc.dispatch(sc.weightPipe, runs); err != nil {
			return err
		}
		raw, err := sc.s.readBuffer(sc.partial, uint64(sc.blocks*sc.dim4)*32)
		if err != nil {
			return err
		}
		part := wgpu.FromBytes[float32](raw)
		out = [2][]float64{make([]float64, sc.set.dim), make([]float64, sc.set.dim)}
		for b := 0; b < sc.blocks; b++ {
			for j4 := 0; j4 < sc.dim4; j4++ {
				o := (b*sc.dim4 + j4) * 8
				for c := 0; c < 4; c++ {
					if j := j4*4 + c; j < sc.set.dim {
						out[0][j] += float64(part[o+c])
						out[1][j] += float64(part[o+4+c])
					}
				}
			}
		}
		return nil
	})
	return out, err
}

func (sc *scene) writeProjParams(c *sceneChunk, mode, gridX uint32, offset [2]float64) error {
	var p [projParamsBytes]byte
	putU32(p[:], 0, uint32(c.Rows))
	putU32(p[:], 4, uint32(sc.dim4))
	putU32(p[:], 8, mode)
	putU32(p[:], 12, gridX)
	putF32(p[:], 16, float32(offset[0]))
	putF32(p[:], 20, float32(offset[1]))
	putU32(p[:], 24, uint32(sc.blockRows))
	putU32(p[:], 28, uint32(c.First))
	putU32(p[:], 32, uint32(c.firstBlock))
	return sc.s.queue.TryWriteBuffer(c.params, 0, p[:])
}

// dispatchRun is one dispatch of a pass: its bind group and grid.
type dispatchRun struct {
	bind *wgpu.BindGroup
	x, y uint32
}

func (sc *scene) dispatch(p *wgpu.ComputePipeline, runs []dispatchRun) error {
	enc, err := sc.s.device.TryCreateCommandEncoder(nil)
	if err != nil {
		return err
	}
	defer enc.Release()
	pass := enc.BeginComputePass(nil)
	pass.SetPipeline(p)
	for _, r := range runs {
		pass.SetBindGroup(0, r.bind, nil)
		pass.DispatchWorkgroups(r.x, r.y, 1)
	}
	err = pass.TryEnd()
	pass.Release()
	if err != nil {
		return err
	}
	return sc.s.submit(enc)
}

// readPositions copies the layout positions to the host, for picking the
// rows under the cursor and framing the view.
func (sc *scene) readPositions() error {
	return guard("read layout positions", func() error {
		raw, err := sc.s.readBuffer(sc.posBuf, uint64(sc.set.rows)*8)
		if err != nil {
			return err
		}
		sc.pos = wgpu.FromBytes[float32](raw)
		for i, x := range sc.pos {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("layout position %d of row %d is %v", i%2, i/2, x)
			}
		}
		return nil
	})
}

// frameInput is what one frame draws.
type frameInput struct {
	scores ondevice.Scores // every row's score for the query: the index's ScoreInto
	rings  []int           // rows to ring: the index's top k
	view   view            // layout → pixels
	cursor [2]float32      // pixel position of the query marker
}

// encode records one frame into enc: the range of the frame's scores, then
// the points (coloured by those scores), rings and marker into the render
// target. Queue writes for the frame are made here too, so they land
// before the encoder is submitted.
func (sc *scene) encode(enc *wgpu.CommandEncoder, in frameInput) error {
	if in.scores.Buffer == nil || in.scores.Rows != sc.set.rows {
		return fmt.Errorf("the frame has scores for %d rows, the scene draws %d", in.scores.Rows, sc.set.rows)
	}
	if err := sc.bindScores(in.scores.Buffer); err != nil {
		return err
	}
	var bounds [8]byte
	binary.LittleEndian.PutUint32(bounds[0:], math.MaxInt32)
	binary.LittleEndian.PutUint32(bounds[4:], 1<<31) // math.MinInt32
	if err := sc.s.queue.TryWriteBuffer(sc.bounds, 0, bounds[:]); err != nil {
		return err
	}
	groups := (sc.set.rows + 63) / 64
	gx, gy := grid(groups, sc.s.limits.MaxComputeWorkgroupsPerDimension)
	var bp [16]byte
	putU32(bp[:], 0, uint32(sc.set.rows))
	putU32(bp[:], 4, gx)
	if err := sc.s.queue.TryWriteBuffer(sc.boundParams, 0, bp[:]); err != nil {
		return err
	}
	var f [frameBytes]byte
	v := in.view
	putF32(f[:], 0, float32(sc.width))
	putF32(f[:], 4, float32(sc.height))
	putF32(f[:], 8, v.center[0])
	putF32(f[:], 12, v.center[1])
	putF32(f[:], 16, v.scale)
	putF32(f[:], 20, pointRadius(sc.set.rows, sc.width, sc.height))
	putF32(f[:], 24, 8)
	putF32(f[:], 32, in.cursor[0])
	putF32(f[:], 36, in.cursor[1])
	if err := sc.s.queue.TryWriteBuffer(sc.frame, 0, f[:]); err != nil {
		return err
	}
	rings := in.rings[:min(len(in.rings), sc.maxRings)]
	if len(rings) > 0 {
		rp := make([]float32, 0, 2*len(rings))
		for _, r := range rings {
			rp = append(rp, sc.pos[2*r], sc.pos[2*r+1])
		}
		if err := sc.s.queue.TryWriteBuffer(sc.rings, 0, wgpu.ToBytes(rp)); err != nil {
			return err
		}
	}

	pass := enc.BeginComputePass(nil)
	pass.SetPipeline(sc.boundPipe)
	pass.SetBindGroup(0, sc.boundBind, nil)
	pass.DispatchWorkgroups(gx, gy, 1)
	err := pass.TryEnd()
	pass.Release()
	if err != nil {
		return err
	}
	if err := enc.TryCopyBufferToBuffer(sc.bounds, 0, sc.frame, boundsAt, 8); err != nil {
		return err
	}
	rp := enc.BeginRenderPass(&wgpu.RenderPassDescriptor{
		Label: "demo frame",
		ColorAttachments: []wgpu.RenderPassColorAttachment{{View: sc.targetView, LoadOp: wgpu.LoadOpClear, StoreOp: wgpu.StoreOpStore,
			ClearValue: wgpu.Color{R: 0.035, G: 0.039, B: 0.059, A: 1}}},
		DepthStencilAttachment: &wgpu.RenderPassDepthStencilAttachment{View: sc.depthView, DepthLoadOp: wgpu.LoadOpClear,
			DepthStoreOp: wgpu.StoreOpDiscard, DepthClearValue: 1},
	})
	rp.SetBindGroup(0, sc.drawBind, nil)
	rp.SetPipeline(sc.pointPipe)
	rp.SetVertexBuffer(0, sc.posBuf, 0, wgpu.WholeSize)
	rp.SetVertexBuffer(1, in.scores.Buffer, 0, wgpu.WholeSize)
	rp.Draw(6, uint32(sc.set.rows), 0, 0)
	if len(rings) > 0 {
		rp.SetPipeline(sc.ringPipe)
		rp.SetVertexBuffer(0, sc.rings, 0, wgpu.WholeSize)
		rp.Draw(6, uint32(len(rings)), 0, 0)
	}
	rp.SetPipeline(sc.markerPipe)
	rp.Draw(6, 1, 0, 0)
	err = rp.TryEnd()
	rp.Release()
	return err
}

// pointRadius sizes points so that a uniform spread of rows would cover
// about a quarter of the image, within 1.5–6 pixels.
func pointRadius(rows, width, height int) float32 {
	r := 0.3 * math.Sqrt(float64(width*height)/float64(rows))
	return float32(min(max(r, 1.5), 6))
}

// readTarget copies the render target to the host as an image.
func (sc *scene) readTarget() (img *image.NRGBA, err error) {
	err = guard("read back the frame", func() error {
		row := uint64(sc.width) * 4
		padded := (row + wgpu.CopyBytesPerRowAlignment - 1) / wgpu.CopyBytesPerRowAlignment * wgpu.CopyBytesPerRowAlignment
		size := padded * uint64(sc.height)
		staging, err := sc.s.buffer("demo frame readback", size, wgpu.BufferUsageMapRead|wgpu.BufferUsageCopyDst)
		if err != nil {
			return err
		}
		defer staging.Release()
		enc, err := sc.s.device.TryCreateCommandEncoder(nil)
		if err != nil {
			return err
		}
		defer enc.Release()
		extent := wgpu.Extent3D{Width: uint32(sc.width), Height: uint32(sc.height), DepthOrArrayLayers: 1}
		if err := enc.TryCopyTextureToBuffer(sc.target.AsImageCopy(), &wgpu.TexelCopyBufferInfo{Buffer: staging,
			Layout: wgpu.TexelCopyBufferLayout{BytesPerRow: uint32(padded), RowsPerImage: uint32(sc.height)}}, &extent); err != nil {
			return err
		}
		if err := sc.s.submit(enc); err != nil {
			return err
		}
		raw, err := sc.s.mapRead(staging, size)
		if err != nil {
			return err
		}
		img = image.NewNRGBA(image.Rect(0, 0, sc.width, sc.height))
		for y := 0; y < sc.height; y++ {
			copy(img.Pix[y*img.Stride:y*img.Stride+int(row)], raw[uint64(y)*padded:])
		}
		return nil
	})
	return img, err
}

func (sc *scene) releaseTarget() {
	_ = guard("release render target", func() error {
		for _, v := range []*wgpu.TextureView{sc.targetView, sc.depthView} {
			if v != nil {
				v.Release()
			}
		}
		for _, t := range []*wgpu.Texture{sc.target, sc.depth} {
			if t != nil {
				t.Release()
			}
		}
		sc.targetView, sc.depthView, sc.target, sc.depth = nil, nil, nil, nil
		return nil
	})
}

// release frees the scene's device objects. The session stays open, and
// so do the index's buffers the scene bound.
func (sc *scene) release() {
	sc.releaseTarget()
	_ = guard("release scene", func() error {
		binds := []*wgpu.BindGroup{sc.boundBind, sc.drawBind}
		bufs := []*wgpu.Buffer{sc.basis, sc.posBuf, sc.partial, sc.bounds, sc.boundParams, sc.frame, sc.rings}
		for _, c := range sc.chunks {
			binds = append(binds, c.projectBind, c.weightBind)
			bufs = append(bufs, c.params)
		}
		for _, b := range binds {
			if b != nil {
				b.Release()
			}
		}
		for _, p := range []*wgpu.ComputePipeline{sc.projectPipe, sc.weightPipe, sc.boundPipe} {
			if p != nil {
				p.Release()
			}
		}
		for _, p := range []*wgpu.RenderPipeline{sc.pointPipe, sc.ringPipe, sc.markerPipe} {
			if p != nil {
				p.Release()
			}
		}
		for _, b := range bufs {
			if b != nil {
				b.Release()
			}
		}
		sc.chunks = nil
		return nil
	})
}
