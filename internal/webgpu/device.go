//go:build js && wasm

package webgpu

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/shaders"
)

// Device is one WebGPU device and the variant its probe chose: the team
// width, staged batches, the subgroup reduction and the fused top-k, each
// used only after it passed the self-test on this device.
type Device struct {
	mu       sync.Mutex // one device operation (and its error scopes) at a time
	adapter  js.Value
	device   js.Value
	queue    js.Value
	info     core.AdapterInfo
	lim      gpu.Limits
	features []string
	// hasSubgroups: the device was created with the "subgroups" feature,
	// so shaders may use subgroup shuffles (after `enable subgroups;`).
	hasSubgroups bool
	// The variant searches use.
	team      uint32
	staged    bool
	subgroups bool
	fused     bool
	lost      js.Value // the device.lost promise's reason once it settled, else undefined
	layouts   map[string]js.Value
	pipes     map[string]js.Value
	// Calibrate's measurements, once.
	routeOnce   sync.Once
	latency     time.Duration
	bytesPerSec float64
	routeErr    error
	// scope is what the probe's self-test covers (ProbeFor); report,
	// while its Verify runs, is told its stages.
	scope  ProbeScope
	report func(stage, detail string)
}

// testDims are the dimensions the self-test checks.
func (d *Device) testDims() []int {
	if len(d.scope.Dims) > 0 {
		return d.scope.Dims
	}
	return selfTestDims
}

// testMetrics are the metrics the self-test checks: Dot (Cosine's
// shaders too) and L2, or those of the probe's scope.
func (d *Device) testMetrics() []core.Metric {
	if len(d.scope.Metrics) == 0 {
		return []core.Metric{core.Dot, core.L2}
	}
	var ms []core.Metric
	for _, m := range d.scope.Metrics {
		if m = shaderMetric(m); !slices.Contains(ms, m) {
			ms = append(ms, m)
		}
	}
	return ms
}

// scopeText describes what the self-test checks: "dimensions 7 and 768,
// metrics dot and l2".
func (d *Device) scopeText() string {
	dims := d.testDims()
	ds := make([]string, len(dims))
	for i, n := range dims {
		ds[i] = fmt.Sprint(n)
	}
	ms := d.testMetrics()
	mn := make([]string, len(ms))
	for i, m := range ms {
		mn[i] = m.String()
	}
	and := func(words []string, one, many string) string {
		if len(words) == 1 {
			return one + " " + words[0]
		}
		return many + " " + strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
	}
	return and(ds, "dimension", "dimensions") + ", " + and(mn, "metric", "metrics")
}

// shaderMetric is the metric whose shaders m runs: Cosine runs Dot's.
func shaderMetric(m core.Metric) core.Metric {
	if m == core.Cosine {
		return core.Dot
	}
	return m
}

// checkScope refuses an index of a metric the probe's self-test did not
// cover.
func (d *Device) checkScope(m core.Metric) error {
	if len(d.scope.Metrics) == 0 || slices.Contains(d.testMetrics(), shaderMetric(m)) {
		return nil
	}
	return fmt.Errorf("%w: this page's WebGPU probe self-tested %s only (webgpu.ProbeFor); a %v index would run untested", gpu.ErrFailed, d.scopeText(), m)
}

// Supported reports whether the page's navigator has WebGPU at all.
func Supported() bool {
	nav := js.Global().Get("navigator")
	return nav.Truthy() && nav.Get("gpu").Truthy()
}

var (
	probeOnce   sync.Once
	probeDev    *Device
	probeReport gpu.Report
)

// Probe opens the browser's preferred adapter, once per page, and returns
// its device with the variant that passed the self-test (nil when none
// did, or WebGPU is missing) and what the probe found. The self-test
// covers every metric at dimensions 7 and 768 (ProbeFor can narrow it).
func Probe(ctx context.Context) (*Device, gpu.Report) { return ProbeFor(ctx, ProbeScope{}, nil) }

// ProbeScope narrows the probe's self-test to what a page will use. On a
// software adapter every pipeline costs seconds to build (most of a
// page's start-up), and the self-test builds them for each dimension and
// metric it checks.
type ProbeScope struct {
	// Dims are the dimensions the self-test checks. Empty: 7 (a short
	// row) and 768 (the common width), whose pipelines stand for every
	// dimension's. A page whose indexes all have one dimension can give
	// just it: the self-test then builds and checks exactly the
	// pipelines those indexes run.
	Dims []int
	// Metrics are those the self-test checks (Cosine counts as Dot,
	// whose shaders it runs). Empty: every metric. The device refuses an
	// index of a metric it did not check (gpu.ErrFailed), so that none
	// runs on a variant not self-tested for it.
	Metrics []core.Metric
}

// ProbeFor is Probe with the self-test narrowed to scope, telling report
// (when not nil) each stage as it starts, for a page that shows its
// progress: "adapter" (requesting the adapter and device; reported again
// with the adapter's name once open), then for each variant tried
// "compile" (building the self-test's pipelines, their count in the
// detail) and "self-test". Only the first call of a page probes: a later
// one, Probe's included, returns the first's device and report, with its
// scope, and reports nothing.
func ProbeFor(ctx context.Context, scope ProbeScope, report func(stage, detail string)) (*Device, gpu.Report) {
	if report == nil {
		report = func(string, string) {}
	}
	probeOnce.Do(func() {
		start := time.Now()
		report("adapter", "requesting a WebGPU adapter and device")
		d, err := Open(ctx)
		if err == nil {
			report("adapter", d.Info().String())
			d.scope = scope
			d.report = report
			err = d.Verify()
			d.report = nil
		}
		probeReport.Elapsed = time.Since(start)
		if d != nil {
			probeReport.Limits, probeReport.Features = d.Limits(), d.features
		}
		if err != nil {
			probeReport.Error = err.Error()
			return
		}
		probeReport.Works, probeDev = true, d
	})
	return probeDev, probeReport
}

// Open requests the adapter and a device with its largest limits and the
// subgroups feature where offered; the variant is the default (team 32,
// the tree reduction, no fused top-k) until Verify or SetVariant.
func Open(ctx context.Context) (d *Device, err error) {
	if !Supported() {
		return nil, fmt.Errorf("%w: this browser has no WebGPU (navigator.gpu is missing)", gpu.ErrNotBuilt)
	}
	err = try("open WebGPU", func() error {
		a, err := await(js.Global().Get("navigator").Get("gpu").Call("requestAdapter", obj("powerPreference", "high-performance")))
		if err != nil {
			return err
		}
		if !a.Truthy() {
			return fmt.Errorf("no WebGPU adapter (requestAdapter returned null)")
		}
		d = &Device{adapter: a, team: 32, layouts: map[string]js.Value{}, pipes: map[string]js.Value{}, lost: js.Undefined()}
		d.info = describe(a)
		limits := a.Get("limits")
		want := obj()
		for _, name := range []string{"maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupsPerDimension",
			"maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupStorageSize", "maxComputeWorkgroupSizeX"} {
			want.Set(name, limits.Get(name))
		}
		feats := arr()
		a.Get("features").Call("forEach", js.FuncOf(func(_ js.Value, args []js.Value) any {
			d.features = append(d.features, args[0].String())
			return nil
		}))
		for _, f := range d.features {
			if f == "subgroups" {
				feats.Call("push", f)
				d.hasSubgroups = true
			}
		}
		dev, err := await(a.Call("requestDevice", obj("requiredLimits", want, "requiredFeatures", feats, "label", "umbra")))
		if err != nil {
			return err
		}
		d.device, d.queue = dev, dev.Get("queue")
		l := dev.Get("limits")
		d.lim = gpu.Limits{
			MaxStorageBindingBytes: uint64(l.Get("maxStorageBufferBindingSize").Float()),
			MaxBufferBytes:         uint64(l.Get("maxBufferSize").Float()),
			MaxWorkgroupsPerDim:    uint32(l.Get("maxComputeWorkgroupsPerDimension").Int()),
			MaxInvocations:         uint32(l.Get("maxComputeInvocationsPerWorkgroup").Int()),
			MaxWorkgroupBytes:      uint32(l.Get("maxComputeWorkgroupStorageSize").Int()),
		}
		var onLost js.Func
		onLost = js.FuncOf(func(_ js.Value, args []js.Value) any {
			d.lost = args[0]
			onLost.Release()
			return nil
		})
		dev.Get("lost").Call("then", onLost)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// describe reads GPUAdapterInfo into the neutral description. WebGPU
// names no API or device type: the API is "webgpu", and an adapter that
// says it is the fallback or is SwiftShader counts as a CPU ("cpu").
func describe(a js.Value) core.AdapterInfo {
	info := a.Get("info")
	str := func(name string) string {
		if !info.Truthy() {
			return ""
		}
		if v := info.Get(name); v.Type() == js.TypeString {
			return v.String()
		}
		return ""
	}
	name := strings.TrimSpace(str("vendor") + " " + str("architecture"))
	if d := str("device"); d != "" {
		name = d
	}
	if desc := str("description"); desc != "" {
		name = desc
	}
	if name == "" {
		name = "WebGPU adapter"
	}
	typ := "unknown"
	fallbackAdapter := info.Truthy() && info.Get("isFallbackAdapter").Truthy() || a.Get("isFallbackAdapter").Truthy()
	if fallbackAdapter || strings.Contains(strings.ToLower(str("architecture")+" "+name), "swiftshader") {
		typ = "cpu"
	}
	return core.AdapterInfo{Name: name, Vendor: str("vendor"), API: "webgpu", Type: typ,
		Driver: strings.TrimSpace(str("architecture") + " " + str("description"))}
}

// Info describes the adapter.
func (d *Device) Info() core.AdapterInfo { return d.info }

// Features lists the adapter's WebGPU features.
func (d *Device) Features() []string { return d.features }

// HasSubgroups reports whether the device may run the subgroup reduction.
func (d *Device) HasSubgroups() bool { return d.hasSubgroups }

// Limits are the device's limits with the variant in use.
func (d *Device) Limits() gpu.Limits {
	l := d.lim
	l.Subgroups, l.Team, l.StagedQueries = d.subgroups, d.team, d.staged
	return l
}

// Variant is what SetVariant chooses: a scoring variant, the reduction,
// and whether top-k may take the fused scan-and-select.
type Variant struct {
	shaders.Variant
	Subgroups bool
	Fused     bool
}

func (v Variant) String() string {
	return fmt.Sprintf("team %d, staged %v, subgroups %v, fused %v", v.Team, v.Staged, v.Subgroups, v.Fused)
}

// brief describes v for a person: "team 32, subgroup reduction, direct
// batches".
func (v Variant) brief() string {
	red, batches := "tree reduction", "direct batches"
	if v.Subgroups {
		red = "subgroup reduction"
	}
	if v.Staged {
		batches = "staged batches"
	}
	return fmt.Sprintf("team %d, %s, %s", v.Team, red, batches)
}

// SetVariant makes later indexes use v, untested: the second-judge test
// runs every variant this way. Subgroups need HasSubgroups.
func (d *Device) SetVariant(v Variant) error {
	if v.Subgroups && !d.hasSubgroups {
		return fmt.Errorf("%w: the device has no subgroups feature", gpu.ErrFailed)
	}
	d.team, d.staged, d.subgroups, d.fused = v.Team, v.Staged, v.Subgroups, v.Fused
	return nil
}

// Variant is the variant in use.
func (d *Device) Variant() Variant {
	return Variant{shaders.Variant{Team: d.team, Staged: d.staged}, d.subgroups, d.fused}
}

// Verify chooses the variant searches use, self-testing each before it
// is used: the subgroup reduction where the device has it, else the tree;
// the first team of probeTeams that passes, direct batches (staging is
// used only where the direct variant fails, as nothing is timed here);
// then the fused top-k, enabled only if its self-test passes.
func (d *Device) Verify() error {
	reductions := []bool{false}
	if d.hasSubgroups {
		reductions = []bool{true, false}
	}
	var first error
	for _, sub := range reductions {
		for _, team := range probeTeams {
			for _, staged := range []bool{false, true} {
				v := Variant{shaders.Variant{Team: team, Staged: staged}, sub, false}
				// The self-tests' pipelines, fused ones included, are
				// built at once; one that fails to compile fails its
				// self-test below, with the compiler's messages.
				fv := v
				fv.Fused = true
				var prep []Prepared
				for _, dim := range d.testDims() {
					for _, m := range d.testMetrics() {
						prep = append(prep, Prepared{v, (dim + 3) &^ 3, m, core.F32}, Prepared{fv, (dim + 3) &^ 3, m, core.F32})
					}
				}
				if d.report != nil {
					d.report("compile", fmt.Sprintf("%d pipelines, %s", d.countNew(prep), v.brief()))
				}
				_ = d.Precompile(prep)
				if err := d.SetVariant(v); err != nil {
					return err
				}
				if d.report != nil {
					d.report("self-test", fmt.Sprintf("%s, %s", v.brief(), d.scopeText()))
				}
				if err := d.SelfTest(); err != nil {
					if first == nil {
						first = fmt.Errorf("self-test of %v: %w", v, err)
					}
					continue
				}
				d.fused = true
				fusedOn := "fused top-k on"
				if err := d.SelfTestFused(); err != nil {
					d.fused = false
					fusedOn = "fused top-k off (its self-test failed)"
				}
				if d.report != nil {
					d.report("self-test", fmt.Sprintf("%s, %s: passed, %s", v.brief(), d.scopeText(), fusedOn))
				}
				return nil
			}
		}
	}
	return first
}

// probeTeams is the order Verify tries the teams in (all of
// shaders.TeamCandidates): 32, a subgroup on most desktop GPUs, first.
var probeTeams = []uint32{32, 64, 16, 8}

// lostErr reports a lost device.
func (d *Device) lostErr() error {
	if d.lost.IsUndefined() {
		return nil
	}
	return fmt.Errorf("%w: the WebGPU device was lost: %s", gpu.ErrFailed, jsString(d.lost.Get("message")))
}

// scoped runs f inside validation and out-of-memory error scopes and
// returns the first error f or a scope reports. The caller holds d.mu.
func (d *Device) scoped(what string, f func() error) error {
	if err := d.lostErr(); err != nil {
		return err
	}
	var ferr error
	err := try(what, func() error {
		d.device.Call("pushErrorScope", "out-of-memory")
		d.device.Call("pushErrorScope", "validation")
		ferr = try(what, f)
		var scopeErr error
		for i := 0; i < 2; i++ {
			v, err := await(d.device.Call("popErrorScope"))
			if err != nil && scopeErr == nil {
				scopeErr = err
			}
			if err == nil && v.Truthy() && scopeErr == nil {
				scopeErr = fmt.Errorf("%s", jsString(v))
				if i == 1 {
					scopeErr = fmt.Errorf("%w: %s: out of memory: %v", gpu.ErrTooLarge, what, scopeErr)
				}
			}
		}
		return scopeErr
	})
	if ferr != nil {
		return ferr
	}
	if err == nil {
		err = d.lostErr()
	}
	return err
}

// layout returns the bind group layout for bindings (package shaders).
func (d *Device) layout(name string, bs []shaders.Binding) js.Value {
	if l, ok := d.layouts[name]; ok {
		return l
	}
	entries := arr()
	for _, b := range bs {
		t := "storage"
		switch b.Kind {
		case shaders.ReadOnlyStorage:
			t = "read-only-storage"
		case shaders.Uniform:
			t = "uniform"
		}
		entries.Call("push", obj("binding", b.Binding, "visibility", 4 /* GPUShaderStage.COMPUTE */, "buffer", obj("type", t)))
	}
	l := d.device.Call("createBindGroupLayout", obj("label", "umbra "+name, "entries", entries))
	d.layouts[name] = l
	return l
}

// pipeSpec is one compute pipeline: a WGSL source's entry point with the
// bind group layout of its bindings (package shaders).
type pipeSpec struct {
	label, src, entry, layoutName string
	bs                            []shaders.Binding
}

func (sp pipeSpec) key() string { return sp.entry + "\x00" + sp.src }

// pipeline returns sp's pipeline, compiling it the first time. The
// caller holds d.mu.
func (d *Device) pipeline(sp pipeSpec) (js.Value, error) {
	if err := d.compile([]pipeSpec{sp}); err != nil {
		return js.Value{}, err
	}
	return d.pipes[sp.key()], nil
}

// compile compiles every pipeline of specs not compiled yet, once per
// source and entry point, all at once: each shader module and
// createComputePipelineAsync is issued before any is awaited, so the
// browser may build them in parallel (on SwiftShader a pipeline takes
// from a quarter of a second to several seconds of CPU). A compile error
// (WGSL the browser's compiler rejects) comes back with the compiler's
// messages; the pipelines that did compile are kept. The caller holds
// d.mu.
func (d *Device) compile(specs []pipeSpec) error {
	type pending struct {
		sp         pipeSpec
		info, pipe js.Value
	}
	var todo []pending
	seen := map[string]bool{}
	start := time.Now()
	err := try("compile shaders", func() error {
		for _, sp := range specs {
			key := sp.key()
			if _, ok := d.pipes[key]; ok || seen[key] {
				continue
			}
			seen[key] = true
			mod := d.device.Call("createShaderModule", obj("label", sp.label, "code", sp.src))
			pl := d.device.Call("createPipelineLayout", obj("bindGroupLayouts", arr(d.layout(sp.layoutName, sp.bs))))
			pipe := d.device.Call("createComputePipelineAsync", obj("label", sp.label+":"+sp.entry, "layout", pl,
				"compute", obj("module", mod, "entryPoint", sp.entry)))
			todo = append(todo, pending{sp, mod.Call("getCompilationInfo"), pipe})
		}
		return nil
	})
	// Every promise issued is awaited, even after a failure, so none
	// settles unobserved.
	for _, p := range todo {
		perr := try("compile "+p.sp.label, func() error {
			info, err := await(p.info)
			if err != nil {
				return err
			}
			var msgs []string
			each := js.FuncOf(func(_ js.Value, args []js.Value) any {
				m := args[0]
				if m.Get("type").String() == "error" {
					msgs = append(msgs, fmt.Sprintf("%d:%d: %s", m.Get("lineNum").Int(), m.Get("linePos").Int(), m.Get("message").String()))
				}
				return nil
			})
			info.Get("messages").Call("forEach", each)
			each.Release()
			pipe, perr := await(p.pipe)
			if len(msgs) > 0 {
				return fmt.Errorf("WGSL rejected: %s", strings.Join(msgs, "; "))
			}
			if perr != nil {
				return perr
			}
			d.pipes[p.sp.key()] = pipe
			return nil
		})
		if err == nil {
			err = perr
		}
	}
	Stats.Compiles += len(todo)
	Stats.Compile += time.Since(start)
	return err
}

// Stats counts pipeline compiles and the time spent in them and in
// awaiting promises (tests; one goroutine).
var Stats struct {
	Compiles       int
	Compile, Await time.Duration
}

// Prepared is one kind of index Precompile builds the pipelines of: the
// variant, the row stride (float32 values, a multiple of 4, or code words
// for F16 and Int8), the metric and the precision.
type Prepared struct {
	Variant
	Stride int
	Metric core.Metric
	Prec   core.Precision
}

// Precompile compiles the pipelines every index of each of ps would use,
// all at once (see compile), so that later NewIndex calls find them
// built. The variant in use does not change. It returns the first
// compile error; the pipelines that compiled are kept either way.
func (d *Device) Precompile(ps []Prepared) error {
	keep := d.Variant()
	defer d.SetVariant(keep)
	var specs []pipeSpec
	for _, p := range ps {
		if err := d.SetVariant(p.Variant); err != nil {
			return err
		}
		g, err := d.planIndex(p.Stride, p.Metric, p.Prec, 128)
		if err != nil {
			return err
		}
		sp, err := g.pipeSpecs()
		if err != nil {
			return err
		}
		specs = append(specs, sp...)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.compile(specs)
}

// countNew counts the pipelines of ps that Precompile would build: those
// not built yet, each once.
func (d *Device) countNew(ps []Prepared) int {
	keep := d.Variant()
	defer d.SetVariant(keep)
	var specs []pipeSpec
	for _, p := range ps {
		if d.SetVariant(p.Variant) != nil {
			continue
		}
		g, err := d.planIndex(p.Stride, p.Metric, p.Prec, 128)
		if err != nil {
			continue
		}
		sp, err := g.pipeSpecs()
		if err == nil {
			specs = append(specs, sp...)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[string]bool{}
	for _, sp := range specs {
		if _, ok := d.pipes[sp.key()]; !ok {
			seen[sp.key()] = true
		}
	}
	return len(seen)
}

// subgroupSource is src with the directive WebGPU requires before a
// shader uses subgroup built-ins (naga needs none; WGSL's enable must
// precede every declaration).
func subgroupSource(src string) string { return "enable subgroups;\n" + src }

// buffer creates a buffer of size bytes (at least minBindingLen).
func (d *Device) buffer(label string, size uint64, usage int) js.Value {
	size = (max(size, minBindingLen) + 3) &^ 3
	return d.device.Call("createBuffer", obj("label", label, "size", float64(size), "usage", usage))
}

// write queues b into buf at byte offset off, at most writePiece bytes a
// call (b's length is a multiple of 4).
func (d *Device) write(buf js.Value, off uint64, b []byte) {
	for len(b) > 0 {
		n := min(len(b), writePiece)
		a := js.Global().Get("Uint8Array").New(n)
		js.CopyBytesToJS(a, b[:n])
		d.queue.Call("writeBuffer", buf, float64(off), a)
		b, off = b[n:], off+uint64(n)
	}
}

// done waits until the queue has finished the work submitted so far.
func (d *Device) done() error {
	_, err := await(d.queue.Call("onSubmittedWorkDone"))
	return err
}

// read copies size bytes of src (at offset 0) through a mappable buffer
// after the commands in enc, submits them and returns the bytes.
func (d *Device) read(enc, src js.Value, size uint64) ([]byte, error) {
	size = (size + 3) &^ 3
	staging := d.buffer("umbra readback", size, usageMapRead|usageCopyDst)
	defer staging.Call("destroy")
	enc.Call("copyBufferToBuffer", src, 0, staging, 0, float64(size))
	d.queue.Call("submit", arr(enc.Call("finish")))
	if _, err := await(staging.Call("mapAsync", mapModeRead, 0, float64(size))); err != nil {
		return nil, fmt.Errorf("mapping the readback buffer: %w", err)
	}
	out := make([]byte, size)
	js.CopyBytesToGo(out, js.Global().Get("Uint8Array").New(staging.Call("getMappedRange", 0, float64(size))))
	staging.Call("unmap")
	return out, nil
}
