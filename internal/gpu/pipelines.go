//go:build cgo && !nogpu

package gpu

import (
	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/shaders"
)

// pipelineCache holds a device's compiled pipelines and their explicit bind
// group layouts. Layouts are explicit, not derived from each pipeline, so one
// bind group serves every scores variant (WebGPU's derived layouts are never
// compatible between pipelines).
type pipelineCache struct {
	scoresBGL *wgpu.BindGroupLayout
	selectBGL *wgpu.BindGroupLayout
	fusedBGL  *wgpu.BindGroupLayout // topk.wgsl's scan
	mergeBGL  *wgpu.BindGroupLayout // topk.wgsl's merge
	scores    map[shaders.ScoresLayout]*wgpu.ComputePipeline
	selects   map[bool]*selectPipes // by L2, as the shaders know the metric
	fused     map[shaders.TopKLayout]*wgpu.ComputePipeline
	merges    map[bool]*wgpu.ComputePipeline
}

// selectPipes are the entry points of select.wgsl for one metric.
type selectPipes struct {
	hist, scan, compact, sort *wgpu.ComputePipeline
}

// layoutEntries turns a shader's bindings (package shaders, shared with
// the browser backend) into wgpu's layout entries.
func layoutEntries(bs []shaders.Binding) []wgpu.BindGroupLayoutEntry {
	out := make([]wgpu.BindGroupLayoutEntry, len(bs))
	for i, b := range bs {
		t := wgpu.BufferBindingTypeStorage
		switch b.Kind {
		case shaders.ReadOnlyStorage:
			t = wgpu.BufferBindingTypeReadOnlyStorage
		case shaders.Uniform:
			t = wgpu.BufferBindingTypeUniform
		}
		out[i] = wgpu.BindGroupLayoutEntry{Binding: b.Binding, Visibility: wgpu.ShaderStageCompute, Buffer: wgpu.BufferBindingLayout{Type: t}}
	}
	return out
}

// layouts creates the bind group layouts once. The caller holds d.mu.
func (d *Device) layouts() error {
	if d.pipelines.scoresBGL != nil {
		return nil
	}
	return gpuCall("create bind group layouts", func() error {
		var made []*wgpu.BindGroupLayout
		for _, l := range []struct {
			label string
			bs    []shaders.Binding
		}{{"umbra scores", shaders.ScoresBindings}, {"umbra select", shaders.SelectBindings},
			{"umbra fused scan", shaders.FusedBindings}, {"umbra merge", shaders.MergeBindings}} {
			bgl, err := d.device.TryCreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: l.label, Entries: layoutEntries(l.bs)})
			if err != nil {
				for _, m := range made {
					m.Release()
				}
				return err
			}
			made = append(made, bgl)
		}
		d.pipelines.scoresBGL, d.pipelines.selectBGL = made[0], made[1]
		d.pipelines.fusedBGL, d.pipelines.mergeBGL = made[2], made[3]
		d.pipelines.scores = map[shaders.ScoresLayout]*wgpu.ComputePipeline{}
		d.pipelines.selects = map[bool]*selectPipes{}
		d.pipelines.fused = map[shaders.TopKLayout]*wgpu.ComputePipeline{}
		d.pipelines.merges = map[bool]*wgpu.ComputePipeline{}
		return nil
	})
}

// compile builds one pipeline per entry point of src with layout bgl.
func (d *Device) compile(label, src string, bgl *wgpu.BindGroupLayout, entries ...string) ([]*wgpu.ComputePipeline, error) {
	var out []*wgpu.ComputePipeline
	err := gpuCall("compile "+label, func() error {
		mod, err := d.device.TryCreateShaderModule(&wgpu.ShaderModuleDescriptor{
			Label:      label,
			WGSLSource: &wgpu.ShaderSourceWGSL{Code: src},
		})
		if err != nil {
			return err
		}
		defer mod.Release()
		// A nil bgl asks for the layout derived from the shader.
		var pl *wgpu.PipelineLayout
		if bgl != nil {
			pl, err = d.device.TryCreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{
				Label:            label,
				BindGroupLayouts: []*wgpu.BindGroupLayout{bgl},
			})
			if err != nil {
				return err
			}
			defer pl.Release()
		}
		for _, e := range entries {
			p, err := d.device.TryCreateComputePipeline(&wgpu.ComputePipelineDescriptor{
				Label:   label + ":" + e,
				Layout:  pl,
				Compute: wgpu.ProgrammableStageDescriptor{Module: mod, EntryPoint: e},
			})
			if err != nil {
				return err
			}
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// scoresPipeline returns the scores pipeline for l, compiling it on first
// use. The caller holds d.mu.
func (d *Device) scoresPipeline(l shaders.ScoresLayout) (*wgpu.ComputePipeline, error) {
	if err := d.layouts(); err != nil {
		return nil, err
	}
	if p, ok := d.pipelines.scores[l]; ok {
		return p, nil
	}
	src, err := shaders.Scores(l)
	if err != nil {
		return nil, err
	}
	if d.editScores != nil {
		src = d.editScores(src)
	}
	ps, err := d.compile("scores.wgsl", src, d.pipelines.scoresBGL, shaders.ScoresEntry)
	if err != nil {
		return nil, err
	}
	d.pipelines.scores[l] = ps[0]
	return ps[0], nil
}

// selectPipeline returns the select pipelines for the L2 metric (l2) or
// the dot product (Cosine, Dot), compiling them on first use. The caller
// holds d.mu.
func (d *Device) selectPipeline(l2 bool) (*selectPipes, error) {
	if err := d.layouts(); err != nil {
		return nil, err
	}
	if p, ok := d.pipelines.selects[l2]; ok {
		return p, nil
	}
	src, err := shaders.Select(metricOf(l2))
	if err != nil {
		return nil, err
	}
	ps, err := d.compile("select.wgsl", src, d.pipelines.selectBGL, shaders.SelectEntries...)
	if err != nil {
		return nil, err
	}
	sp := &selectPipes{hist: ps[0], scan: ps[1], compact: ps[2], sort: ps[3]}
	d.pipelines.selects[l2] = sp
	return sp, nil
}

// fusedPipeline returns the fused scan pipeline for l, compiling it on
// first use. The caller holds d.mu.
func (d *Device) fusedPipeline(l shaders.TopKLayout) (*wgpu.ComputePipeline, error) {
	if err := d.layouts(); err != nil {
		return nil, err
	}
	if p, ok := d.pipelines.fused[l]; ok {
		return p, nil
	}
	src, err := shaders.TopK(l)
	if err != nil {
		return nil, err
	}
	ps, err := d.compile("topk.wgsl", src, d.pipelines.fusedBGL, shaders.FusedEntry)
	if err != nil {
		return nil, err
	}
	d.pipelines.fused[l] = ps[0]
	return ps[0], nil
}

// mergePipeline returns the fused path's merge pipeline for the L2 metric
// (l2) or the dot product, compiling it on first use. The caller holds
// d.mu.
func (d *Device) mergePipeline(l2 bool) (*wgpu.ComputePipeline, error) {
	if err := d.layouts(); err != nil {
		return nil, err
	}
	if p, ok := d.pipelines.merges[l2]; ok {
		return p, nil
	}
	src, err := shaders.MergeTopK(metricOf(l2))
	if err != nil {
		return nil, err
	}
	ps, err := d.compile("topk.wgsl merge", src, d.pipelines.mergeBGL, shaders.MergeEntry)
	if err != nil {
		return nil, err
	}
	d.pipelines.merges[l2] = ps[0]
	return ps[0], nil
}

// metricOf is the metric the shaders compile for an L2 key of the cache:
// Cosine and Dot are one shader.
func metricOf(l2 bool) core.Metric {
	if l2 {
		return core.L2
	}
	return core.Dot
}
