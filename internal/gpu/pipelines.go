package gpu

import (
	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/shaders"
)

// pipelineCache holds the pipelines the device's indexes use, by what
// they compute. The API builds each once; the layouts are explicit and
// named per kind of shader (gpuplan.PipeSpec.Layout), so one bind group
// serves every variant of a kind.
type pipelineCache struct {
	scores  map[shaders.ScoresLayout]gpuplan.Pipeline
	selects map[bool]*selectPipes // by L2, as the shaders know the metric
	fused   map[shaders.TopKLayout]gpuplan.Pipeline
	merges  map[bool]gpuplan.Pipeline
	qbounds map[qboundsKey]*qboundsPipes
	read    gpuplan.Pipeline // read.wgsl, compiled on first Floor
	gather  map[shaders.ScoresLayout]gpuplan.Pipeline
}

// selectPipes are the entry points of select.wgsl for one metric.
type selectPipes struct {
	hist, scan, compact, sort gpuplan.Pipeline
}

// qboundsPipes are qbounds.wgsl's entry points for one precision and
// metric.
type qboundsPipes struct {
	bounds, compact, count gpuplan.Pipeline
}

type qboundsKey struct {
	prec core.Precision
	l2   bool
}

// Layout names of the shaders' bind groups.
const (
	layoutScores  = "scores"
	layoutSelect  = "select"
	layoutFused   = "fused scan"
	layoutMerge   = "merge"
	layoutQBounds = "qbounds"
	layoutRead    = "read"
	layoutGather  = "gather"
)

// scoresSpec is scores.wgsl's (or gemm.wgsl's, or quant.wgsl's) pipeline
// for l.
func (d *Device) scoresSpec(l shaders.ScoresLayout) (gpuplan.PipeSpec, error) {
	src, err := shaders.Scores(l)
	if err != nil {
		return gpuplan.PipeSpec{}, err
	}
	label := "scores.wgsl"
	switch {
	case l.Prec != core.F32:
		label = "quant.wgsl"
	case l.RM != 0:
		label = "gemm.wgsl"
	}
	if d.editScores != nil && l.Prec == core.F32 {
		src = d.editScores(src)
	}
	return gpuplan.PipeSpec{Label: label, Source: src, Entry: shaders.ScoresEntry, Layout: layoutScores,
		Bindings: shaders.ScoresBindings, Subgroups: l.Subgroups}, nil
}

// selectSpecs are select.wgsl's entry points for the L2 metric (l2) or
// the dot product.
func selectSpecs(l2 bool) ([]gpuplan.PipeSpec, error) {
	src, err := shaders.Select(metricOf(l2))
	if err != nil {
		return nil, err
	}
	out := make([]gpuplan.PipeSpec, len(shaders.SelectEntries))
	for i, e := range shaders.SelectEntries {
		out[i] = gpuplan.PipeSpec{Label: "select.wgsl", Source: src, Entry: e, Layout: layoutSelect, Bindings: shaders.SelectBindings}
	}
	return out, nil
}

// fusedSpec is topk.wgsl's scan for l.
func fusedSpec(l shaders.TopKLayout) (gpuplan.PipeSpec, error) {
	src, err := shaders.TopK(l)
	if err != nil {
		return gpuplan.PipeSpec{}, err
	}
	return gpuplan.PipeSpec{Label: "topk.wgsl", Source: src, Entry: shaders.FusedEntry, Layout: layoutFused,
		Bindings: shaders.FusedBindings}, nil
}

// mergeSpec is topk.wgsl's merge for the L2 metric (l2) or the dot
// product.
func mergeSpec(l2 bool) (gpuplan.PipeSpec, error) {
	src, err := shaders.MergeTopK(metricOf(l2))
	if err != nil {
		return gpuplan.PipeSpec{}, err
	}
	return gpuplan.PipeSpec{Label: "topk.wgsl merge", Source: src, Entry: shaders.MergeEntry, Layout: layoutMerge,
		Bindings: shaders.MergeBindings}, nil
}

// qboundsSpecs are qbounds.wgsl's entry points for prec and metric.
func qboundsSpecs(prec core.Precision, metric core.Metric) ([]gpuplan.PipeSpec, error) {
	src, err := shaders.QBounds(prec, metric)
	if err != nil {
		return nil, err
	}
	out := make([]gpuplan.PipeSpec, len(shaders.QBoundsEntries))
	for i, e := range shaders.QBoundsEntries {
		out[i] = gpuplan.PipeSpec{Label: "qbounds.wgsl", Source: src, Entry: e, Layout: layoutQBounds, Bindings: shaders.QBoundsBindings}
	}
	return out, nil
}

// readSpec is read.wgsl's, the bandwidth floor.
func readSpec() gpuplan.PipeSpec {
	return gpuplan.PipeSpec{Label: "read.wgsl", Source: shaders.Read, Entry: "main", Layout: layoutRead, Bindings: shaders.ReadBindings}
}

// gatherSpec is gather.wgsl's pipeline for the float32 scores layout l
// (shaders.GatherLayout).
func gatherSpec(l shaders.ScoresLayout) (gpuplan.PipeSpec, error) {
	src, err := shaders.Gather(l)
	if err != nil {
		return gpuplan.PipeSpec{}, err
	}
	return gpuplan.PipeSpec{Label: "gather.wgsl", Source: src, Entry: shaders.ScoresEntry, Layout: layoutGather,
		Bindings: shaders.GatherBindings}, nil
}

// build asks the API for the pipelines of specs, all at once. The caller
// holds d.mu.
func (d *Device) build(specs ...gpuplan.PipeSpec) ([]gpuplan.Pipeline, error) {
	if d.pipes.scores == nil {
		d.pipes = pipelineCache{
			scores:  map[shaders.ScoresLayout]gpuplan.Pipeline{},
			selects: map[bool]*selectPipes{},
			fused:   map[shaders.TopKLayout]gpuplan.Pipeline{},
			merges:  map[bool]gpuplan.Pipeline{},
			qbounds: map[qboundsKey]*qboundsPipes{},
			gather:  map[shaders.ScoresLayout]gpuplan.Pipeline{},
		}
	}
	var ps []gpuplan.Pipeline
	err := d.scoped("compile shaders", func() error {
		var err error
		ps, err = d.api.Pipelines(specs...)
		return err
	})
	if err != nil {
		return nil, err
	}
	if d.built == nil {
		d.built = map[string]bool{}
	}
	for _, sp := range specs {
		d.built[sp.Key()] = true
	}
	return ps, nil
}

// scoresPipeline returns the scores pipeline for l, compiling it on first
// use. The caller holds d.mu.
func (d *Device) scoresPipeline(l shaders.ScoresLayout) (gpuplan.Pipeline, error) {
	if p, ok := d.pipes.scores[l]; ok {
		return p, nil
	}
	sp, err := d.scoresSpec(l)
	if err != nil {
		return nil, err
	}
	ps, err := d.build(sp)
	if err != nil {
		return nil, err
	}
	d.pipes.scores[l] = ps[0]
	return ps[0], nil
}

// selectPipeline returns the select pipelines for the L2 metric (l2) or
// the dot product (Cosine, Dot), compiling them on first use. The caller
// holds d.mu.
func (d *Device) selectPipeline(l2 bool) (*selectPipes, error) {
	if p, ok := d.pipes.selects[l2]; ok {
		return p, nil
	}
	specs, err := selectSpecs(l2)
	if err != nil {
		return nil, err
	}
	ps, err := d.build(specs...)
	if err != nil {
		return nil, err
	}
	sp := &selectPipes{hist: ps[0], scan: ps[1], compact: ps[2], sort: ps[3]}
	d.pipes.selects[l2] = sp
	return sp, nil
}

// fusedPipeline returns the fused scan pipeline for l, compiling it on
// first use. The caller holds d.mu.
func (d *Device) fusedPipeline(l shaders.TopKLayout) (gpuplan.Pipeline, error) {
	if p, ok := d.pipes.fused[l]; ok {
		return p, nil
	}
	sp, err := fusedSpec(l)
	if err != nil {
		return nil, err
	}
	ps, err := d.build(sp)
	if err != nil {
		return nil, err
	}
	d.pipes.fused[l] = ps[0]
	return ps[0], nil
}

// mergePipeline returns the fused path's merge pipeline for the L2 metric
// (l2) or the dot product, compiling it on first use. The caller holds
// d.mu.
func (d *Device) mergePipeline(l2 bool) (gpuplan.Pipeline, error) {
	if p, ok := d.pipes.merges[l2]; ok {
		return p, nil
	}
	sp, err := mergeSpec(l2)
	if err != nil {
		return nil, err
	}
	ps, err := d.build(sp)
	if err != nil {
		return nil, err
	}
	d.pipes.merges[l2] = ps[0]
	return ps[0], nil
}

// qboundsPipeline returns qbounds.wgsl's pipelines for prec and metric,
// compiling them on first use. The caller holds d.mu.
func (d *Device) qboundsPipeline(prec core.Precision, metric core.Metric) (*qboundsPipes, error) {
	k := qboundsKey{prec, metric == core.L2}
	if d.pipes.qbounds != nil {
		if p, ok := d.pipes.qbounds[k]; ok {
			return p, nil
		}
	}
	specs, err := qboundsSpecs(prec, metric)
	if err != nil {
		return nil, err
	}
	ps, err := d.build(specs...)
	if err != nil {
		return nil, err
	}
	p := &qboundsPipes{bounds: ps[0], compact: ps[1], count: ps[2]}
	d.pipes.qbounds[k] = p
	return p, nil
}

// gatherPipeline returns gather.wgsl's pipeline for l, compiling it on
// first use. The caller holds d.mu.
func (d *Device) gatherPipeline(l shaders.ScoresLayout) (gpuplan.Pipeline, error) {
	if p, ok := d.pipes.gather[l]; ok {
		return p, nil
	}
	sp, err := gatherSpec(l)
	if err != nil {
		return nil, err
	}
	ps, err := d.build(sp)
	if err != nil {
		return nil, err
	}
	d.pipes.gather[l] = ps[0]
	return ps[0], nil
}

// readPipeline returns read.wgsl's pipeline, compiling it on first use.
// The caller holds d.mu.
func (d *Device) readPipeline() (gpuplan.Pipeline, error) {
	if d.pipes.read != nil {
		return d.pipes.read, nil
	}
	ps, err := d.build(readSpec())
	if err != nil {
		return nil, err
	}
	d.pipes.read = ps[0]
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
