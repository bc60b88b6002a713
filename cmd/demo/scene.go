//go:build cgo && !nogpu

package main

import (
	"encoding/binary"
	"fmt"
	"image"
	"math"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/internal/packed"
)

// targetFormat is the scene's render target. Colours are written to it as
// sRGB-encoded values, so its bytes are the picture (a PNG as they are).
const (
	targetFormat = wgpu.TextureFormatRGBA8Unorm
	depthFormat  = wgpu.TextureFormatDepth32Float
	frameBytes   = 48 // the Frame uniform of draw.wgsl
	boundsAt     = 40 // offset of lo_key, hi_key in Frame
)

// scene owns the demo's device resources: its own resident copy of the rows
// (the projection and the colouring read them; the index keeps another),
// the layout positions, the scores, the pipelines and the render target.
type scene struct {
	s           *session
	set         *memorySet
	stride      int
	dim4        int
	maxRings    int
	blocks      int
	blockRows   int
	width       int
	height      int
	pos         []float32 // layout positions read back after the projection, 2 per row
	rows        *wgpu.Buffer
	basis       *wgpu.Buffer
	posBuf      *wgpu.Buffer
	partial     *wgpu.Buffer
	projParams  *wgpu.Buffer
	query       *wgpu.Buffer
	scores      *wgpu.Buffer
	bounds      *wgpu.Buffer
	simParams   *wgpu.Buffer
	frame       *wgpu.Buffer
	rings       *wgpu.Buffer
	projectPipe *wgpu.ComputePipeline
	weightPipe  *wgpu.ComputePipeline
	simPipe     *wgpu.ComputePipeline
	projectBind *wgpu.BindGroup
	weightBind  *wgpu.BindGroup
	simBind     *wgpu.BindGroup
	pointPipe   *wgpu.RenderPipeline
	ringPipe    *wgpu.RenderPipeline
	markerPipe  *wgpu.RenderPipeline
	drawBind    *wgpu.BindGroup
	target      *wgpu.Texture
	targetView  *wgpu.TextureView
	depth       *wgpu.Texture
	depthView   *wgpu.TextureView
}

// newScene uploads set and builds the pipelines for a width×height target.
func newScene(s *session, set *memorySet, width, height, maxRings int) (*scene, error) {
	sc := &scene{s: s, set: set, stride: packed.StrideFor(set.dim), maxRings: maxRings}
	sc.dim4 = sc.stride / 4
	rowBytes := uint64(set.rows) * uint64(sc.stride) * 4
	if err := checkSceneSize(s, set); err != nil {
		return nil, err
	}
	// Blocks of rows for the weighted-sum pass: enough to fill a GPU, few
	// enough that reading back their partial sums stays small.
	sc.blockRows = max(128, (set.rows+511)/512)
	sc.blocks = (set.rows + sc.blockRows - 1) / sc.blockRows
	err := guard("create demo buffers", func() error {
		slab := packed.NewSlab(set.dim)
		slab.AppendFlat(set.data, false)
		const st = wgpu.BufferUsageStorage
		var err error
		mk := func(dst **wgpu.Buffer, label string, size uint64, usage wgpu.BufferUsage) {
			if err == nil {
				*dst, err = s.buffer(label, size, usage)
			}
		}
		mk(&sc.rows, "demo rows", rowBytes, st|wgpu.BufferUsageCopyDst)
		mk(&sc.basis, "demo basis", uint64(2*sc.stride)*4, st|wgpu.BufferUsageCopyDst)
		mk(&sc.posBuf, "demo positions", uint64(set.rows)*8, st|wgpu.BufferUsageVertex|wgpu.BufferUsageCopySrc)
		mk(&sc.partial, "demo partial sums", uint64(sc.blocks*sc.dim4)*32, st|wgpu.BufferUsageCopySrc)
		mk(&sc.projParams, "demo projection params", 32, wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst)
		mk(&sc.query, "demo query", uint64(sc.stride)*4, st|wgpu.BufferUsageCopyDst)
		mk(&sc.scores, "demo scores", uint64(set.rows)*4, st|wgpu.BufferUsageVertex|wgpu.BufferUsageCopySrc)
		mk(&sc.bounds, "demo score bounds", 8, st|wgpu.BufferUsageCopySrc|wgpu.BufferUsageCopyDst)
		mk(&sc.simParams, "demo similarity params", 16, wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst)
		mk(&sc.frame, "demo frame", frameBytes, wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst|wgpu.BufferUsageCopySrc)
		mk(&sc.rings, "demo rings", uint64(maxRings)*8, wgpu.BufferUsageVertex|wgpu.BufferUsageCopyDst)
		if err != nil {
			return err
		}
		data := slab.Data[:set.rows*sc.stride]
		for len(data) > 0 { // bounded pieces keep the driver's staging copy small
			piece := data[:min(len(data), 4<<20)]
			off := uint64(len(slab.Data[:set.rows*sc.stride])-len(data)) * 4
			if err := s.queue.TryWriteBuffer(sc.rows, off, wgpu.ToBytes(piece)); err != nil {
				return err
			}
			data = data[len(piece):]
		}
		return nil
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

// checkSceneSize says whether the scene's copy of the rows fits in one
// storage binding of the device (the demo's shaders bind it whole).
func checkSceneSize(s *session, set *memorySet) error {
	stride := uint64(packed.StrideFor(set.dim)) * 4
	lim := min(s.limits.MaxStorageBufferBindingSize, s.limits.MaxBufferSize)
	if need := uint64(set.rows) * stride; need > lim {
		return fmt.Errorf("%d rows of dimension %d take %d MiB, more than one buffer binding of this device holds (%d MiB); use --n %d or fewer",
			set.rows, set.dim, need>>20, lim>>20, lim/stride)
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
	sim, err := sc.s.module("similarity.wgsl", similarityWGSL)
	if err != nil {
		return err
	}
	defer sim.Release()
	pipe := func(m *wgpu.ShaderModule, entry string) (*wgpu.ComputePipeline, error) {
		return d.TryCreateComputePipeline(&wgpu.ComputePipelineDescriptor{Label: entry, Compute: wgpu.ProgrammableStageDescriptor{Module: m, EntryPoint: entry}})
	}
	if sc.projectPipe, err = pipe(proj, "project"); err != nil {
		return err
	}
	if sc.weightPipe, err = pipe(proj, "weighted"); err != nil {
		return err
	}
	if sc.simPipe, err = pipe(sim, "main"); err != nil {
		return err
	}
	whole := func(b uint32, buf *wgpu.Buffer) wgpu.BindGroupEntry {
		return wgpu.BindGroupEntry{Binding: b, Buffer: buf, Size: wgpu.WholeSize}
	}
	if sc.projectBind, err = d.TryCreateBindGroup(&wgpu.BindGroupDescriptor{Label: "project", Layout: sc.projectPipe.GetBindGroupLayout(0),
		Entries: []wgpu.BindGroupEntry{whole(0, sc.rows), whole(1, sc.basis), whole(2, sc.posBuf), whole(4, sc.projParams)}}); err != nil {
		return err
	}
	if sc.weightBind, err = d.TryCreateBindGroup(&wgpu.BindGroupDescriptor{Label: "weighted", Layout: sc.weightPipe.GetBindGroupLayout(0),
		Entries: []wgpu.BindGroupEntry{whole(0, sc.rows), whole(2, sc.posBuf), whole(3, sc.partial), whole(4, sc.projParams)}}); err != nil {
		return err
	}
	sc.simBind, err = d.TryCreateBindGroup(&wgpu.BindGroupDescriptor{Label: "similarity", Layout: sc.simPipe.GetBindGroupLayout(0),
		Entries: []wgpu.BindGroupEntry{whole(0, sc.rows), whole(1, sc.query), whole(2, sc.scores), whole(3, sc.bounds), whole(4, sc.simParams)}})
	return err
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
		gx, gy := grid((sc.set.rows+63)/64, sc.s.limits.MaxComputeWorkgroupsPerDimension)
		if err := sc.writeProjParams(0, gx, offset); err != nil {
			return err
		}
		return sc.dispatch(sc.projectPipe, sc.projectBind, gx, gy)
	})
}

func (sc *scene) weightedSum(ones bool) (out [2][]float64, err error) {
	err = guard("weighted-sum pass", func() error {
		mode := uint32(1)
		if ones {
			mode = 0
		}
		if err := sc.writeProjParams(mode, 0, [2]float64{}); err != nil {
			return err
		}
		if err := sc.dispatch(sc.weightPipe, sc.weightBind, uint32((sc.dim4+63)/64), uint32(sc.blocks)); err != nil {
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

func (sc *scene) writeProjParams(mode, gridX uint32, offset [2]float64) error {
	var p [32]byte
	putU32(p[:], 0, uint32(sc.set.rows))
	putU32(p[:], 4, uint32(sc.dim4))
	putU32(p[:], 8, mode)
	putU32(p[:], 12, gridX)
	putF32(p[:], 16, float32(offset[0]))
	putF32(p[:], 20, float32(offset[1]))
	putU32(p[:], 24, uint32(sc.blockRows))
	return sc.s.queue.TryWriteBuffer(sc.projParams, 0, p[:])
}

func (sc *scene) dispatch(p *wgpu.ComputePipeline, b *wgpu.BindGroup, x, y uint32) error {
	enc, err := sc.s.device.TryCreateCommandEncoder(nil)
	if err != nil {
		return err
	}
	defer enc.Release()
	pass := enc.BeginComputePass(nil)
	pass.SetPipeline(p)
	pass.SetBindGroup(0, b, nil)
	pass.DispatchWorkgroups(x, y, 1)
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
	query  []float32  // unit query, dim components
	rings  []int      // rows to ring: the index's top k
	view   view       // layout → pixels
	cursor [2]float32 // pixel position of the query marker
}

// encode records one frame into enc: the similarity pass, then the points,
// rings and marker into the render target. Queue writes for the frame are
// made here too, so they land before the encoder is submitted.
func (sc *scene) encode(enc *wgpu.CommandEncoder, in frameInput) error {
	q := make([]float32, sc.stride)
	copy(q, in.query)
	if err := sc.s.queue.TryWriteBuffer(sc.query, 0, wgpu.ToBytes(q)); err != nil {
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
	var sp [16]byte
	putU32(sp[:], 0, uint32(sc.set.rows))
	putU32(sp[:], 4, uint32(sc.dim4))
	putU32(sp[:], 8, gx)
	if err := sc.s.queue.TryWriteBuffer(sc.simParams, 0, sp[:]); err != nil {
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
	pass.SetPipeline(sc.simPipe)
	pass.SetBindGroup(0, sc.simBind, nil)
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
	rp.SetVertexBuffer(1, sc.scores, 0, wgpu.WholeSize)
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

// release frees the scene's device objects. The session stays open.
func (sc *scene) release() {
	sc.releaseTarget()
	_ = guard("release scene", func() error {
		for _, b := range []*wgpu.BindGroup{sc.projectBind, sc.weightBind, sc.simBind, sc.drawBind} {
			if b != nil {
				b.Release()
			}
		}
		for _, p := range []*wgpu.ComputePipeline{sc.projectPipe, sc.weightPipe, sc.simPipe} {
			if p != nil {
				p.Release()
			}
		}
		for _, p := range []*wgpu.RenderPipeline{sc.pointPipe, sc.ringPipe, sc.markerPipe} {
			if p != nil {
				p.Release()
			}
		}
		for _, b := range []*wgpu.Buffer{sc.rows, sc.basis, sc.posBuf, sc.partial, sc.projParams, sc.query, sc.scores, sc.bounds, sc.simParams, sc.frame, sc.rings} {
			if b != nil {
				b.Release()
			}
		}
		return nil
	})
}
