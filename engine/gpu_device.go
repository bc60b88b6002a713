//go:build cgo && !nogpu

package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/fallback"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/shaders"
)

const gpuBuilt = true

// gpuCall runs f and turns a panic from the binding into an error, so no
// wgpu validation failure crosses the engine's API.
func gpuCall(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: %v", ErrGPU, what, r)
			flushErrorPool()
		}
	}()
	if err = f(); err != nil {
		flushErrorPool()
		var wrapped error = err
		if !errors.Is(err, ErrGPU) {
			wrapped = fmt.Errorf("%w: %s: %v", ErrGPU, what, err)
		}
		return wrapped
	}
	return nil
}

// flushErrorPool empties the binding's pool of error-capture objects. The
// binding does not clear a captured error when it recycles the object, so
// after one failed Try* call a later successful call could report the old
// error. A sync.Pool drops its contents over two garbage collections; this
// runs only after a failure.
func flushErrorPool() {
	runtime.GC()
	runtime.GC()
}

// process-wide wgpu state: one instance, the adapters per backend mask, and
// the probe verdict per adapter, each computed once.
var (
	instMu    sync.Mutex
	inst      *wgpu.Instance
	adapters  = map[wgpu.InstanceBackend][]*wgpu.Adapter{}
	verdicts  = map[string]*verdict{}
	verdictMu sync.Mutex
)

// verdict is the cached probe result for one adapter.
type verdict struct {
	done   chan struct{}
	dev    *gpuDevice
	report AdapterReport
}

func backendMask(name string) wgpu.InstanceBackend {
	switch strings.ToLower(name) {
	case "vulkan":
		return 1
	case "gl":
		return 2
	case "metal":
		return 4
	case "dx12":
		return 8
	}
	return wgpu.InstanceBackendAll
}

func apiName(b wgpu.BackendType) string {
	switch b {
	case wgpu.BackendTypeVulkan:
		return "vulkan"
	case wgpu.BackendTypeMetal:
		return "metal"
	case wgpu.BackendTypeD3D12:
		return "dx12"
	case wgpu.BackendTypeD3D11:
		return "dx11"
	case wgpu.BackendTypeOpenGL, wgpu.BackendTypeOpenGLES:
		return "gl"
	}
	return strings.ToLower(b.String())
}

func typeName(t wgpu.AdapterType) string {
	switch t {
	case wgpu.AdapterTypeDiscreteGPU:
		return "discrete"
	case wgpu.AdapterTypeIntegratedGPU:
		return "integrated"
	case wgpu.AdapterTypeCPU:
		return "cpu"
	}
	return "unknown"
}

func describeAdapter(a *wgpu.Adapter) AdapterInfo {
	i := a.GetInfo()
	return AdapterInfo{
		Name:     i.Device,
		Vendor:   i.Vendor,
		VendorID: i.VendorId,
		DeviceID: i.DeviceId,
		API:      apiName(i.BackendType),
		Type:     typeName(i.AdapterType),
		Driver:   i.Description,
	}
}

func (a AdapterInfo) key() string {
	return fmt.Sprintf("%s|%s|%x|%x|%s", a.API, a.Name, a.VendorID, a.DeviceID, a.Driver)
}

// listAdapters returns the adapters of the backends in mask, enumerated once
// per process.
func listAdapters(mask wgpu.InstanceBackend) (list []*wgpu.Adapter, err error) {
	instMu.Lock()
	defer instMu.Unlock()
	if l, ok := adapters[mask]; ok {
		return l, nil
	}
	err = gpuCall("enumerate adapters", func() error {
		if inst == nil {
			inst = wgpu.CreateInstance(nil)
		}
		list = inst.EnumerateAdapters(&wgpu.InstanceEnumerateAdapterOptons{Backends: mask})
		return nil
	})
	if err != nil {
		return nil, err
	}
	adapters[mask] = list
	return list, nil
}

// gpuDevice is one wgpu device with its queue, shared by every index on that
// adapter. Its mutex serialises all wgpu calls on the device: error scopes
// are per device, so concurrent Try* calls could see each other's errors.
type gpuDevice struct {
	mu        sync.Mutex
	adapter   *wgpu.Adapter
	device    *wgpu.Device
	queue     *wgpu.Queue
	info      AdapterInfo
	lim       DeviceLimits
	pipelines pipelineCache
	readPipe  *wgpu.ComputePipeline // read.wgsl, compiled on first ReadFloor
	// subgroups is set when the device has wgpu's native subgroup feature
	// and the shuffle-reduction variant of scores.wgsl passed the self-test.
	subgroups bool
	// timestamps is set when the device can write timestamps inside a
	// compute pass.
	timestamps bool
	// team is the widest team (invocations per row) scores.wgsl uses on
	// this device, measured by tuneTeam; 0 until then (64).
	team uint32
	// staged is set when batches score faster with their queries staged
	// in workgroup memory, also measured by tuneTeam.
	staged bool
	// editScores, set by tests only, rewrites scores.wgsl before it is
	// compiled (to reach a branch no software adapter takes).
	editScores func(string) string
	routeOnce  sync.Once
	routing    *Routing // measured on first Auto use
	routeErr   error
}

func limitsOf(l wgpu.Limits) DeviceLimits {
	return DeviceLimits{
		MaxStorageBindingBytes: l.MaxStorageBufferBindingSize,
		MaxBufferBytes:         l.MaxBufferSize,
		MaxWorkgroupsPerDim:    l.MaxComputeWorkgroupsPerDimension,
		MaxInvocations:         l.MaxComputeInvocationsPerWorkgroup,
		MaxWorkgroupBytes:      l.MaxComputeWorkgroupStorageSize,
	}
}

// openDevice creates a device on a with the adapter's own limits: the
// defaults would cap maxBufferSize at 256 MiB. (Device.GetLimits is not
// called: in this binding it can abort the process.)
func openDevice(a *wgpu.Adapter) (*gpuDevice, error) {
	d := &gpuDevice{adapter: a, info: describeAdapter(a)}
	err := gpuCall("request device", func() error {
		lim := a.GetLimits()
		d.lim = limitsOf(lim)
		var features []wgpu.FeatureName
		if a.HasFeature(nativeFeatureSubgroup) {
			features = append(features, nativeFeatureSubgroup)
			d.subgroups = true
		}
		if a.HasFeature(wgpu.FeatureNameTimestampQuery) && a.HasFeature(nativeFeatureTimestampInsidePasses) {
			features = append(features, wgpu.FeatureNameTimestampQuery, nativeFeatureTimestampInsidePasses)
			d.timestamps = true
		}
		dev, err := a.RequestDevice(&wgpu.DeviceDescriptor{Label: "umbra", RequiredLimits: &lim, RequiredFeatures: features})
		if err != nil {
			return err
		}
		d.device = dev
		d.queue = dev.GetQueue()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// submit finishes enc (nil submits only the queued writes) and submits it;
// with wait it blocks until the device is idle. The caller holds d.mu and
// still releases enc.
func (d *gpuDevice) submit(enc *wgpu.CommandEncoder, wait bool) error {
	if enc != nil {
		cmd, err := enc.TryFinish(nil)
		if err != nil {
			return err
		}
		d.queue.Submit(cmd)
		cmd.Release()
	} else {
		d.queue.Submit()
	}
	if wait {
		d.device.Poll(true, nil)
	}
	return nil
}

// nativeFeatureSubgroup is wgpu-native's WGPUNativeFeature_Subgroup, which
// this binding does not name: it enables the subgroup built-ins without an
// `enable` directive in the shader.
const nativeFeatureSubgroup wgpu.FeatureName = 0x00030021

// nativeFeatureTimestampInsidePasses is WGPUNativeFeature_
// TimestampQueryInsidePasses: timestamps written between dispatches of one
// compute pass, which is how a traced search times its kernels on the GPU's
// own clock.
const nativeFeatureTimestampInsidePasses wgpu.FeatureName = 0x00030025

// verify self-tests every scoring variant the device may use and tunes
// among those that pass: first with the subgroup reduction where the device
// offers it, then, if no variant of that passes, with the workgroup-memory
// tree. A variant is never timed, let alone used, before it has given the
// right answers.
func (d *gpuDevice) verify() error {
	reductions := []bool{false}
	if d.subgroups {
		reductions = []bool{true, false}
	}
	var firstErr error
	for _, sub := range reductions {
		d.subgroups = sub
		var passed []variant
		for _, v := range tuneVariants() {
			d.team, d.staged = v.team, v.staged
			if err := d.selfTest(); err != nil {
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			passed = append(passed, v)
		}
		if len(passed) > 0 {
			d.tune(passed)
			return nil
		}
	}
	return firstErr
}

// selfTestDims are the dimensions the self-test checks: a short row (a team
// of 2 lanes, one vec4 each) and the common embedding width, where a row
// is split into parts over every team width the tuning may choose.
var selfTestDims = []int{7, 768}

// selfTest checks the device's current variant (team, reduction, staged
// batches) through the same code an index uses, for every metric, single
// queries and batches, top-k selected on the device and on the host: every
// score against float64, every ranking against a float64 ranking. It is
// what makes the probe prove the GPU works rather than that it exists.
func (d *gpuDevice) selfTest() error {
	for _, dim := range selfTestDims {
		for _, metric := range []uint32{shaders.MetricDot, shaders.MetricL2} {
			if err := d.checkVariant(dim, metric); err != nil {
				return fmt.Errorf("self-test at dimension %d, metric %d, team %d, subgroups %v, staged %v: %w",
					dim, metric, d.team, d.subgroups, d.staged, err)
			}
		}
	}
	return nil
}

func (d *gpuDevice) checkVariant(dim int, metric uint32) error {
	// 300 rows span several workgroups and, at 128 rows a chunk, three
	// chunks; 8 queries fill one batch tile.
	const rows, k, nq = 300, 5, batchQT
	data := syntheticSlab(rows+nq, dim)
	slab := packed.NewSlab(dim)
	flat := make([]float32, 0, rows*dim)
	for i := 0; i < rows; i++ {
		flat = append(flat, data.Row(i)...)
	}
	slab.AppendFlat(flat, false)
	qs := make([][]float32, nq)
	for i := range qs {
		qs[i] = data.PaddedRow(rows + i)
	}
	g, err := newGPUIndex(d, slab.Stride, metric, 128)
	if err != nil {
		return err
	}
	defer g.release()
	ctx := context.Background()
	if err := g.upload(ctx, slab, 0); err != nil {
		return err
	}
	exact := func(q []float32, row int) float64 {
		var s float64
		for j, x := range slab.Row(row) {
			if metric == shaders.MetricL2 {
				s += (float64(x) - float64(q[j])) * (float64(x) - float64(q[j]))
			} else {
				s += float64(x) * float64(q[j])
			}
		}
		return s
	}
	tol := func(w float64) float64 { return 1e-4 * math.Max(1, math.Abs(w)) }
	got, err := g.scores(ctx, qs[0], rows)
	if err != nil {
		return err
	}
	for i, s := range got {
		if w := exact(qs[0], i); math.Abs(float64(s)-w) > tol(w) {
			return fmt.Errorf("%w: test dispatch gave score %g for row %d, want %g", ErrGPU, s, i, w)
		}
	}
	// Top k selected on the device (one query, then a batch), and every row
	// ranked on the host from read-back scores (k = rows).
	for _, c := range []struct {
		qs [][]float32
		k  int
	}{{qs[:1], k}, {qs, k}, {qs[:2], rows}} {
		hits, err := g.search(ctx, c.qs, c.k, rows)
		if err != nil {
			return err
		}
		if len(hits) != len(c.qs) {
			return fmt.Errorf("%w: test search returned %d lists for %d queries", ErrGPU, len(hits), len(c.qs))
		}
		for qi, q := range c.qs {
			ranked := make([]float64, rows)
			for i := range ranked {
				ranked[i] = exact(q, i)
			}
			slices.Sort(ranked)
			if metric != shaders.MetricL2 {
				slices.Reverse(ranked)
			}
			if err := checkRanking(hits[qi], c.k, ranked, func(row int) float64 { return exact(q, row) }, tol); err != nil {
				return fmt.Errorf("%w: test top-%d of query %d of %d: %v", ErrGPU, c.k, qi, len(c.qs), err)
			}
		}
	}
	return nil
}

// checkRanking checks that hits are k distinct rows whose exact scores are,
// rank by rank, the k best of ranked (the exact scores best first), each
// reported within tolerance: a correct answer up to near-ties.
func checkRanking(hits []fallback.Hit, k int, ranked []float64, exact func(int) float64, tol func(float64) float64) error {
	if len(hits) != k {
		return fmt.Errorf("%d hits, want %d", len(hits), k)
	}
	seen := make(map[int]bool, k)
	for i, h := range hits {
		if h.Row < 0 || h.Row >= len(ranked) || seen[h.Row] {
			return fmt.Errorf("rank %d: row %d is out of range or repeated", i, h.Row)
		}
		seen[h.Row] = true
		w := exact(h.Row)
		if math.Abs(float64(h.Score)-w) > tol(w) {
			return fmt.Errorf("rank %d: row %d scored %g, want %g", i, h.Row, h.Score, w)
		}
		if math.Abs(w-ranked[i]) > 2*tol(w) {
			return fmt.Errorf("rank %d: row %d has score %g, the rank's exact score is %g", i, h.Row, w, ranked[i])
		}
	}
	return nil
}

// probeAdapter opens a device on a and self-tests it, at most once per
// process per adapter; later calls wait for and reuse the first verdict. A
// probe that outlives timeout is reported as failed (the goroutine is left
// to finish on its own: a wgpu call cannot be interrupted).
func probeAdapter(ctx context.Context, a *wgpu.Adapter, info AdapterInfo, timeout time.Duration) (*gpuDevice, AdapterReport) {
	verdictMu.Lock()
	v, ok := verdicts[info.key()]
	if !ok {
		v = &verdict{done: make(chan struct{})}
		verdicts[info.key()] = v
		go func() {
			defer close(v.done)
			start := time.Now()
			r := AdapterReport{Adapter: info}
			var dev *gpuDevice
			err := gpuCall("probe", func() error {
				r.Limits = limitsOf(a.GetLimits())
				for _, f := range a.GetFeatures() {
					r.Features = append(r.Features, f.String())
				}
				var err error
				if dev, err = openDevice(a); err != nil {
					return err
				}
				return dev.verify()
			})
			r.Elapsed = time.Since(start)
			if err != nil {
				r.Error = err.Error()
			} else {
				r.Works = true
				r.Eligible = !info.Software()
				v.dev = dev
			}
			v.report = r
		}()
	}
	verdictMu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-v.done:
		return v.dev, v.report
	case <-timer.C:
		return nil, AdapterReport{Adapter: info, Error: fmt.Sprintf("probe did not finish within %v", timeout)}
	case <-ctx.Done():
		return nil, AdapterReport{Adapter: info, Error: "probe cancelled: " + ctx.Err().Error()}
	}
}

// candidates lists the adapters matching sel, best first.
func candidates(sel AdapterSelect) ([]*wgpu.Adapter, []AdapterInfo, error) {
	list, err := listAdapters(backendMask(sel.Backend))
	if err != nil {
		return nil, nil, err
	}
	var keep []*wgpu.Adapter
	var infos []AdapterInfo
	for _, a := range list {
		var info AdapterInfo
		if err := gpuCall("adapter info", func() error { info = describeAdapter(a); return nil }); err != nil {
			continue
		}
		keep = append(keep, a)
		infos = append(infos, info)
	}
	order := rankAdapters(infos, sel)
	outA := make([]*wgpu.Adapter, len(order))
	outI := make([]AdapterInfo, len(order))
	for i, j := range order {
		outA[i], outI[i] = keep[j], infos[j]
	}
	return outA, outI, nil
}

// probe is Probe in builds with the wgpu backend.
func probe(ctx context.Context, sel AdapterSelect) ProbeReport {
	rep := ProbeReport{Auto: -1}
	if err := sel.validate(); err != nil {
		rep.Reason, rep.Hint = err.Error(), hintNoMatch
		return rep
	}
	as, infos, err := candidates(sel)
	if err != nil {
		rep.Reason, rep.Hint = err.Error(), hintNoAdapter
		return rep
	}
	for i, a := range as {
		_, r := probeAdapter(ctx, a, infos[i], defaultProbeTimeout)
		rep.Adapters = append(rep.Adapters, r)
		if rep.Auto < 0 && r.Eligible {
			rep.Auto = i
		}
	}
	if rep.Auto < 0 {
		// Auto never probes a software adapter, so explain the choice
		// the way Auto would.
		view := make([]AdapterReport, len(rep.Adapters))
		for i, r := range rep.Adapters {
			view[i] = r
			if r.Adapter.Software() {
				view[i].Works, view[i].Error = true, ""
			}
		}
		rep.Reason, rep.Hint = fallbackReason(sel, view, false)
	}
	return rep
}

// fallbackReason explains, from the probe reports, why no adapter was
// chosen.
func fallbackReason(sel AdapterSelect, reports []AdapterReport, allowSoftware bool) (string, string) {
	if len(reports) == 0 {
		if sel.Backend != "" && sel.Name == "" {
			return fmt.Sprintf("no %s adapter found (no %s driver answered)", sel.Backend, sel.Backend), hintNoAdapter
		}
		if sel.Name != "" || sel.Backend != "" {
			all, _, _ := candidates(AdapterSelect{})
			if len(all) > 0 {
				return fmt.Sprintf("no adapter matches %s", sel.describe()), hintNoMatch
			}
		}
		return "no GPU adapter found (no Vulkan, Metal, DX12 or GL driver answered)", hintNoAdapter
	}
	var failed, soft []string
	for _, r := range reports {
		name := r.Adapter.String()
		switch {
		case !r.Works:
			failed = append(failed, name+": "+r.Error)
		case r.Adapter.Software() && !allowSoftware:
			soft = append(soft, name)
		}
	}
	if len(failed) > 0 && len(soft) == 0 {
		return "every adapter failed its probe: " + strings.Join(failed, "; "), hintProbeFailed
	}
	if len(failed) > 0 {
		return "only software adapters work (" + strings.Join(soft, ", ") + "); failed: " + strings.Join(failed, "; "), hintSoftwareOnly
	}
	return "only software adapters found: " + strings.Join(soft, ", "), hintSoftwareOnly
}

// openGPU finds the best working adapter for cfg and returns an index's
// device side on it. allowSoftware admits CPU-type adapters (Device GPU).
func openGPU(ctx context.Context, cfg Config, opt options, allowSoftware bool) (gpuIndex, string, string, error) {
	timeout := cfg.ProbeTimeout
	if timeout == 0 {
		timeout = defaultProbeTimeout
	}
	as, infos, err := candidates(cfg.Adapter)
	if err != nil {
		return nil, err.Error(), hintNoAdapter, &AdapterError{Reason: err.Error(), Hint: hintNoAdapter, kind: ErrNoAdapter}
	}
	var reports []AdapterReport
	for i, a := range as {
		if infos[i].Software() && !allowSoftware {
			reports = append(reports, AdapterReport{Adapter: infos[i], Works: true})
			continue
		}
		dev, r := probeAdapter(ctx, a, infos[i], timeout)
		if err := ctx.Err(); err != nil {
			return nil, "", "", fmt.Errorf("umbra: probing %s: %w", infos[i], err)
		}
		reports = append(reports, r)
		if dev == nil {
			continue
		}
		g, err := newGPUIndex(dev, packed.StrideFor(cfg.Dim), cfg.Metric.shaderCode(), opt.maxChunkRows)
		if err != nil {
			return nil, err.Error(), hintProbeFailed, err
		}
		return g, "", "", nil
	}
	reason, hint := fallbackReason(cfg.Adapter, reports, allowSoftware)
	return nil, reason, hint, &AdapterError{Reason: reason, Hint: hint, kind: ErrNoAdapter}
}
