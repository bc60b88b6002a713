package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/probe"
)

// Options say what a run measures and how.
type Options struct {
	K      int // results per search, 1..N
	Repeat int // timed calls per group; the group keeps the minimum
	Runs   int // independent groups
	Warmup int // untimed calls per tier before the first group
	Tiers  []Tier

	Metric  umbra.Metric
	Device  engine.Device // Auto: GPU tiers run on a hardware adapter only; GPU: any adapter; CPU: none
	Adapter engine.AdapterSelect
	Workers int // fallback goroutines; 0 is GOMAXPROCS

	Breakdown bool
	Reps      int // traced calls the breakdown takes medians over

	// Paths, when not empty, times SearchBatch of each of these many
	// queries on the resident GPU index, Reps calls each, on the fused
	// selection and with the radix select forced, and records what each
	// issued (Report.Paths).
	Paths []int

	// Peers runs chromem-go and FAISS on the same data and queries, and
	// times umbra's SearchBatch, chromem-go and FAISS on a batch of Batch
	// queries (none when 0) in groups of BatchRepeat calls, BatchRuns
	// groups. Peers needs the fallback tier: ratios are to it.
	Peers       bool
	Batch       int
	BatchRepeat int
	BatchRuns   int
	// Pythons are the interpreters tried for FAISS
	// (peers.DefaultPythons when empty).
	Pythons []string

	// CFloor also times the independent C read loop (cfloor.go) beside
	// the fallback tier and its floor, and states both as multiples of it.
	CFloor bool

	// Threshold, when positive, replaces the computed consistency
	// threshold (see Reference.Threshold).
	Threshold float64

	// Progress, when set, receives a short line for each step that may
	// take more than a moment.
	Progress func(msg string)
}

func (o *Options) validate(w *Workload) error {
	switch {
	case w.Dim < 1 || len(w.Data) == 0 || len(w.Data)%w.Dim != 0:
		return fmt.Errorf("workload has %d values of dimension %d", len(w.Data), w.Dim)
	case len(w.Queries) == 0:
		return errors.New("workload has no queries")
	case o.K < 1 || o.K > w.N():
		return fmt.Errorf("k=%d out of range 1..%d", o.K, w.N())
	case o.Repeat < 1 || o.Runs < 1 || o.Warmup < 0:
		return fmt.Errorf("repeat %d and runs %d must be at least 1, warmup %d at least 0", o.Repeat, o.Runs, o.Warmup)
	case o.Threshold < 0 || math.IsNaN(o.Threshold) || math.IsInf(o.Threshold, 0):
		return fmt.Errorf("threshold %g must be a finite number, 0 for the computed one", o.Threshold)
	case (o.Breakdown || len(o.Paths) > 0) && o.Reps < 1:
		return fmt.Errorf("reps %d must be at least 1", o.Reps)
	case len(o.Tiers) == 0:
		return errors.New("no tiers")
	case o.Peers && !slices.Contains(o.Tiers, TierFallback):
		return errors.New("peers are compared with the fallback tier: include it in the tiers")
	case o.Peers && o.Batch < 0:
		return fmt.Errorf("batch %d must be at least 0", o.Batch)
	case o.Peers && o.Batch > 0 && (o.BatchRepeat < 1 || o.BatchRuns < 1):
		return fmt.Errorf("batch repeat %d and batch runs %d must be at least 1", o.BatchRepeat, o.BatchRuns)
	}
	return nil
}

// InputError reports a vector of the workload that the engine refuses, in
// the engine's words: What is "data" or "queries"; Err wraps the engine's
// sentinel (ErrNonFinite, ErrZeroVector, ErrDimMismatch).
type InputError struct {
	What string
	Err  error
}

func (e *InputError) Error() string { return "the " + e.What + ": " + e.Err.Error() }

func (e *InputError) Unwrap() error { return e.Err }

// harness is the state of one run.
type harness struct {
	w   *Workload
	opt Options
	rep *Report

	gpu     *engine.Config // pinned to the adapter the run uses; nil when no GPU
	cpuIx   *engine.Index  // the fallback's resident index
	gpuIx   *engine.Index  // the kernel and resident tiers' index
	runners map[Tier]runner
	result  map[Tier]*TierResult
	ref     *Reference

	peers peerState
	cloop *cLoop // the C read loop of Options.CFloor, while it runs
}

func (h *harness) progress(format string, args ...any) {
	if h.opt.Progress != nil {
		h.opt.Progress(fmt.Sprintf(format, args...))
	}
}

// Run measures the tiers in opt over w and returns the report. An error
// means the options or the workload were unusable; a tier that cannot run
// or fails is recorded in the report, whose Pass is then false for a
// failure and unaffected by a skip.
func Run(ctx context.Context, w *Workload, opt Options) (*Report, error) {
	if err := opt.validate(w); err != nil {
		return nil, err
	}
	h := &harness{w: w, opt: opt, runners: map[Tier]runner{}, result: map[Tier]*TierResult{}}
	h.rep = &Report{
		UmbraVersion: Version,
		GoVersion:    runtime.Version(),
		OS:           runtime.GOOS,
		Arch:         runtime.GOARCH,
		CPU:          hostCPU(),
		Date:         time.Now().UTC().Format(time.RFC3339),
		N:            w.N(),
		Dim:          w.Dim,
		K:            opt.K,
		Metric:       opt.Metric.String(),
		Repeat:       opt.Repeat,
		Runs:         opt.Runs,
		Warmup:       opt.Warmup,
		Queries:      len(w.Queries),
		Device:       opt.Device.String(),
	}
	for _, t := range opt.Tiers {
		h.result[t] = &TierResult{Name: string(t), Premise: t.Premise()}
	}
	defer h.close()

	if err := h.admit(ctx); err != nil {
		return nil, err
	}
	h.progress("computing the float64 reference")
	h.ref = NewReference(w.Data, w.Dim, w.Queries[0], opt.Metric)
	if opt.Threshold > 0 {
		h.ref.Threshold = opt.Threshold
	}
	h.rep.Threshold = h.ref.Threshold

	if err := h.open(ctx); err != nil {
		return nil, err
	}
	h.check(ctx)
	if opt.Peers {
		h.openPeers(ctx)
	}
	if err := h.time(ctx); err != nil {
		return nil, err
	}
	if opt.Peers {
		if err := h.runPeers(ctx); err != nil {
			return nil, err
		}
	}
	h.efficiency()
	h.pairVsC()
	if opt.Breakdown {
		if err := h.breakdown(ctx); err != nil {
			return nil, err
		}
	}
	if len(opt.Paths) > 0 {
		if err := h.paths(ctx); err != nil {
			return nil, err
		}
	}
	for _, t := range opt.Tiers {
		h.rep.Tiers = append(h.rep.Tiers, *h.result[t])
	}
	h.rep.Peers = h.peers.results()
	h.rep.Pass, h.rep.Verdict = verdict(h.rep)
	return h.rep, nil
}

func (h *harness) close() {
	if h.cloop != nil {
		h.cloop.close()
	}
	for _, r := range h.runners {
		r.close()
	}
	if h.cpuIx != nil {
		h.cpuIx.Close()
	}
	if h.gpuIx != nil {
		h.gpuIx.Close()
	}
}

// adapterFor is the Adapters of an index on device d that the run's
// adapter selection a applies to: none on the CPU, which refuses one.
func adapterFor(d engine.Device, a engine.AdapterSelect) []engine.AdapterSelect {
	if d == engine.CPU {
		return nil
	}
	return []engine.AdapterSelect{a}
}

// config is the index configuration for device d with the run's metric.
func (h *harness) config(d engine.Device) engine.Config {
	return engine.Config{Dim: h.w.Dim, Metric: h.opt.Metric, Device: d, Adapters: adapterFor(d, h.opt.Adapter),
		Workers: h.opt.Workers}
}

// openGPU decides whether the GPU tiers can run, as the engine decides for
// the requested device, and pins every later GPU index to the adapter
// chosen, so that no tier can silently land on another adapter or on the
// CPU.
func (h *harness) openGPU(ctx context.Context) {
	if h.opt.Device == engine.CPU {
		h.rep.GPUReason = "not used with --device cpu"
		return
	}
	h.progress("probing GPU adapters")
	ix, err := engine.New(ctx, h.config(h.opt.Device))
	if err != nil {
		h.rep.GPUReason = err.Error()
		return
	}
	info := ix.Info()
	ix.Close()
	// Under Auto on a hardware adapter the engine calibrated both paths;
	// the GPU tiers below are pinned to the GPU whatever it decided.
	h.rep.Route = info.Routing
	if info.Device != engine.GPU {
		h.rep.GPUReason, h.rep.GPUHint = info.Reason, info.Hint.String()
		if h.rep.GPUReason == "" {
			h.rep.GPUReason = "the engine chose the CPU path"
		}
		return
	}
	cfg := h.config(engine.GPU)
	cfg.Adapters = []engine.AdapterSelect{{Name: info.Adapter.Name, Backend: info.Adapter.API}}
	h.gpu = &cfg
	a := info.Adapter
	h.rep.Adapter = &Adapter{Name: a.Name, Vendor: a.Vendor, API: a.API, Type: a.Type, Driver: a.Driver}
	// The adapter's limits, from its probe (done once per process: the
	// engine's own probe of it is reused).
	for _, p := range probe.Run(ctx, probe.Select{Name: a.Name, Backend: a.API}, probe.DefaultTimeout).Adapters {
		if l := p.Limits; p.Adapter == a {
			h.rep.Limits = &Limits{MaxStorageBindingBytes: l.MaxStorageBindingBytes, MaxBufferBytes: l.MaxBufferBytes,
				MaxWorkgroupsPerDim: l.MaxWorkgroupsPerDim, MaxInvocations: l.MaxInvocations}
			break
		}
	}
}

// admit gives the workload to the engine on the CPU before anything uses
// it: SearchBatch on the still empty index checks every query and Add
// every vector, by the engine's own rules, so a run never times data the
// library would refuse and the rules live in one place. The index is the
// fallback tier's.
func (h *harness) admit(ctx context.Context) error {
	ix, err := engine.New(ctx, h.config(engine.CPU))
	if err != nil {
		return err
	}
	h.cpuIx = ix
	h.rep.CPU.FallbackKernel = ix.Info().CPUKernel
	if _, err := ix.SearchBatch(ctx, h.w.Queries, 1); err != nil {
		return refused("queries", err)
	}
	h.progress("packing %d×%d into the fallback's slab", h.w.N(), h.w.Dim)
	if _, err := ix.Add(ctx, umbra.Flat(h.w.Data, ix.Dim())); err != nil {
		return refused("data", err)
	}
	return nil
}

// refused wraps err in an InputError when the engine refused a vector of
// what, and returns any other error (cancellation, too many rows) as is.
func refused(what string, err error) error {
	for _, e := range []error{umbra.ErrNonFinite, umbra.ErrZeroVector, umbra.ErrDimMismatch} {
		if errors.Is(err, e) {
			return &InputError{What: what, Err: err}
		}
	}
	return fmt.Errorf("loading the %s: %w", what, err)
}

// open builds the resident indexes and the runners of the requested tiers.
func (h *harness) open(ctx context.Context) error {
	needGPU := h.opt.Breakdown || slices.ContainsFunc(h.opt.Tiers, Tier.GPU)
	if needGPU {
		h.openGPU(ctx)
	}
	// The fallback's index also serves the breakdown of the resident
	// path when there is no GPU; otherwise it only admitted the data.
	if !slices.Contains(h.opt.Tiers, TierFallback) && !(h.opt.Breakdown && h.gpu == nil) {
		h.cpuIx.Close()
		h.cpuIx = nil
	}
	if r := h.result[TierFallback]; r != nil {
		h.runners[TierFallback] = &residentRunner{ix: h.cpuIx}
	}

	for _, t := range h.opt.Tiers {
		if !t.GPU() {
			continue
		}
		res := h.result[t]
		if h.gpu == nil {
			res.Skipped, res.SkipReason = true, h.rep.GPUReason
			continue
		}
		switch t {
		case TierKernel, TierResident:
			if h.gpuIx == nil {
				if err := h.openResident(ctx); err != nil {
					res.Error = err.Error()
					continue
				}
			}
			h.runners[t] = &residentRunner{ix: h.gpuIx, kernelOnly: t == TierKernel}
		case TierContiguous, TierList:
			if t == TierList {
				h.progress("copying every row into its own allocation for the list tier")
				h.w.Rows()
			}
			h.runners[t] = &rebuildRunner{cfg: *h.gpu, w: h.w, flat: t == TierContiguous}
		}
	}
	if h.gpu != nil && h.rep.Chunks == 0 {
		// Plan the chunks of N rows as the tiers' indexes do.
		ix, err := engine.New(ctx, *h.gpu)
		if err == nil {
			info := ix.Info()
			ix.Close()
			h.rep.ChunkRows = info.ChunkRows
			h.rep.Chunks = (h.w.N() + info.ChunkRows - 1) / info.ChunkRows
		}
	}
	return nil
}

// openResident uploads the data once for the kernel and resident tiers.
func (h *harness) openResident(ctx context.Context) error {
	h.progress("uploading %d×%d to the device", h.w.N(), h.w.Dim)
	ix, err := engine.New(ctx, *h.gpu)
	if err != nil {
		return err
	}
	if _, err := ix.Add(ctx, umbra.Flat(h.w.Data, ix.Dim())); err != nil {
		ix.Close()
		return fmt.Errorf("uploading the data: %w", err)
	}
	h.gpuIx = ix
	info := ix.Info()
	h.rep.Chunks, h.rep.ChunkRows = info.Chunks, info.ChunkRows
	return nil
}

// active returns the tiers that have a runner and no error, in report
// order.
func (h *harness) active() []Tier {
	var ts []Tier
	for _, t := range h.opt.Tiers {
		if h.runners[t] != nil && h.result[t].Error == "" {
			ts = append(ts, t)
		}
	}
	return ts
}

// check compares every tier's answers for query 0 with the float64
// reference: its scores of all N rows and its top-k.
func (h *harness) check(ctx context.Context) {
	q := h.w.Queries[0]
	for _, t := range h.active() {
		h.progress("checking %s against the float64 reference", t)
		res := h.result[t]
		top, all, err := h.runners[t].check(ctx, q, h.opt.K)
		if err == nil {
			var d float64
			if d, err = h.ref.MaxAbsDiff(all); err == nil {
				// The top-k search may take another path on the device
				// (selection there); its scores must agree too.
				d = max(d, h.ref.HitsDiff(top))
				res.MaxAbsDiff = ptr(d)
				if !finiteOK(d) {
					res.MaxAbsDiff = nil
				}
				tk := h.ref.CompareTopK(top, h.opt.K)
				res.TopKMatch, res.TopKExact = ptr(tk.Match), ptr(tk.Exact)
				res.Pass = ptr(d <= h.ref.Threshold && tk.Match)
				switch {
				case d > h.ref.Threshold:
					res.CheckDetail = fmt.Sprintf("max_abs_diff %.3g > threshold %.3g", d, h.ref.Threshold)
				case !tk.Match:
					res.CheckDetail = fmt.Sprintf("top-%d differs from the float64 reference from rank %d on", h.opt.K, tk.Rank)
				}
			}
		}
		if err != nil {
			res.Error = "consistency check: " + err.Error()
			res.Pass = ptr(false)
		}
	}
}

func finiteOK(x float64) bool { return finite(x) != nil }

// timed is one thing the groups time: a tier, a floor or a peer.
type timed struct {
	name string
	// call runs it once for the query of slot and returns the time it is
	// charged.
	call func(ctx context.Context, slot int) (time.Duration, error)
	fail func(err error)
	// done receives the group values when every group was timed.
	done   func(groups []float64)
	failed bool
	groups []float64
}

// query is the query of a slot: the run's queries in turn.
func (h *harness) query(slot int) []float32 { return h.w.Queries[slot%len(h.w.Queries)] }

// rotate runs warmup untimed calls of every item, then runs groups of
// repeat calls each. Inside a group every repeat calls every item once,
// the order rotating from call to call, so drift of the machine touches
// every item alike. An item that fails stops being called; the others go
// on.
func (h *harness) rotate(ctx context.Context, what string, items []*timed, repeat, runs, warmup int) error {
	call := func(it *timed, slot int) (time.Duration, bool) {
		d, err := it.call(ctx, slot)
		if err != nil {
			it.failed = true
			it.fail(err)
			return 0, false
		}
		return d, true
	}
	for i := 0; i < warmup; i++ {
		for _, it := range items {
			if !it.failed {
				h.progress("%swarm-up %d/%d: %s", what, i+1, warmup, it.name)
				call(it, i)
			}
		}
	}
	slot := 0
	for g := 0; g < runs; g++ {
		h.progress("%sgroup %d/%d", what, g+1, runs)
		reps := make([][]float64, len(items))
		for r := 0; r < repeat; r++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			for i := range items {
				j := (i + slot) % len(items)
				if it := items[j]; !it.failed {
					if d, ok := call(it, slot); ok {
						reps[j] = append(reps[j], float64(d)/float64(time.Millisecond))
					}
				}
			}
			slot++
		}
		for j, it := range items {
			if !it.failed {
				it.groups = append(it.groups, GroupMin(reps[j]))
			}
		}
	}
	for _, it := range items {
		if !it.failed && len(it.groups) == runs && it.done != nil {
			it.done(it.groups)
		}
	}
	return nil
}

// time runs the warm-up and the groups of the tiers, with the read floors
// of their devices and the in-process peers interleaved among them.
func (h *harness) time(ctx context.Context) error {
	tiers := h.active()
	if len(tiers) == 0 {
		return nil
	}
	fail := func(t Tier, err error) {
		h.result[t].Error = err.Error()
		h.result[t].Pass = ptr(false)
	}
	k := h.opt.K
	// One traced call per GPU tier says what it moves; the premise states
	// it, so a reader sees the traffic behind each figure.
	for _, t := range tiers {
		if t == TierKernel || !t.GPU() {
			continue
		}
		var tr diag.Trace
		if _, _, err := h.runners[t].call(diag.WithTrace(ctx, &tr), h.w.Queries[0], k); err != nil {
			fail(t, err)
			continue
		}
		h.result[t].Premise += fmt.Sprintf(" [measured: %s up, %s back per call]",
			bytesHuman(uint64(tr.BytesUp)), bytesHuman(uint64(tr.BytesDown)))
	}
	groups := map[Tier][]float64{}
	var items []*timed
	for _, t := range tiers {
		if h.result[t].Error != "" {
			continue
		}
		r := h.runners[t]
		items = append(items, &timed{
			name: string(t),
			call: func(ctx context.Context, slot int) (time.Duration, error) {
				d, _, err := r.call(ctx, h.query(slot), k)
				return d, err
			},
			fail: func(err error) { fail(t, err) },
			done: func(g []float64) { groups[t] = g },
		})
	}
	items = append(items, h.floorItems(ctx, tiers)...)
	if h.opt.CFloor && slices.Contains(tiers, TierFallback) {
		if c := h.cFloorItem(ctx); c != nil {
			items = append(items, c)
		}
	}
	items = append(items, h.peerItems()...)
	if err := h.rotate(ctx, "", items, h.opt.Repeat, h.opt.Runs, h.opt.Warmup); err != nil {
		return err
	}
	for _, t := range tiers {
		res := h.result[t]
		g, ok := groups[t]
		if res.Error != "" || !ok {
			continue
		}
		s := Summarize(g)
		res.GroupsMS = g
		res.MedianMS, res.MinMS, res.MaxMS, res.Jitter = finite(s.Median), finite(s.Min), finite(s.Max), finite(s.Jitter)
		if rr, ok := h.runners[t].(*residentRunner); ok && rr.kernelOnly {
			h.rep.KernelClock = rr.clock
			if rr.clock != "wall" {
				res.Premise += fmt.Sprintf(" [kernel clock: %s]", orDash(rr.clock))
			}
		}
	}
	// A GPU index under Auto could have moved to the CPU after a failure;
	// its figures would then not be the GPU's.
	if h.gpuIx != nil && h.gpuIx.Info().Device != engine.GPU {
		for _, t := range []Tier{TierKernel, TierResident} {
			if res := h.result[t]; res != nil {
				res.Error = "the index left the GPU during the run: " + h.gpuIx.Info().Reason
			}
		}
	}
	base, ok := groups[TierFallback]
	if !ok || h.result[TierFallback].Error != "" {
		return nil
	}
	for _, t := range tiers {
		res := h.result[t]
		if t == TierFallback || !res.Ran() {
			continue
		}
		s := Summarize(PairedRatios(base, groups[t]))
		if finiteOK(s.Median) && finiteOK(s.Min) && finiteOK(s.Max) {
			res.SpeedupVsFallback = &Range{Median: s.Median, Min: s.Min, Max: s.Max}
		}
	}
	return nil
}

// breakdownTier is the path the breakdown traces: the most expensive
// requested tier, whose host-side stages have the most to show.
func (h *harness) breakdownTier() Tier {
	for _, t := range []Tier{TierList, TierContiguous, TierResident, TierKernel, TierFallback} {
		if slices.Contains(h.opt.Tiers, t) {
			return t
		}
	}
	return TierList
}

// breakdown traces Reps calls of one tier's path and takes each stage's
// median. Without a GPU the same path runs on the CPU backend.
func (h *harness) breakdown(ctx context.Context) error {
	t := h.breakdownTier()
	bd := &Breakdown{Tier: string(t), Backend: "gpu", Reps: h.opt.Reps}
	cfg := h.gpu
	if cfg == nil || !t.GPU() {
		bd.Backend = "cpu"
		c := h.config(engine.CPU)
		cfg = &c
	}
	var r runner
	switch t {
	case TierList, TierContiguous:
		r = &rebuildRunner{cfg: *cfg, w: h.w, flat: t == TierContiguous}
	default:
		ix := h.gpuIx
		if bd.Backend == "cpu" {
			ix = h.cpuIx
		}
		if ix == nil {
			return fmt.Errorf("breakdown of %s: no index", t)
		}
		r = &residentRunner{ix: ix}
	}
	var marshal, upload, kernel, readback, sel, total []float64
	msOf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for i := -1; i < h.opt.Reps; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var tr diag.Trace
		q := h.w.Queries[max(i, 0)%len(h.w.Queries)]
		if i < 0 {
			h.progress("breakdown: warm-up")
		} else {
			h.progress("breakdown: traced call %d/%d of the %s path", i+1, h.opt.Reps, t)
		}
		d, _, err := r.call(diag.WithTrace(ctx, &tr), q, h.opt.K)
		if err != nil {
			return fmt.Errorf("breakdown of %s: %w", t, err)
		}
		if i < 0 {
			continue // warm-up
		}
		marshal = append(marshal, msOf(tr.Marshal))
		upload = append(upload, msOf(tr.Upload))
		kernel = append(kernel, msOf(tr.Kernel))
		readback = append(readback, msOf(tr.Readback))
		sel = append(sel, msOf(tr.Select))
		total = append(total, msOf(d))
		bd.UploadBytes, bd.ReadbackBytes, bd.KernelClock = tr.BytesUp, tr.BytesDown, tr.KernelClock
	}
	if bd.Backend == "gpu" && h.gpuIx != nil {
		// What one search issues, on the resident index whatever tier was
		// traced (a rebuilding tier's trace holds its Add too).
		var tr diag.Trace
		if _, err := h.gpuIx.Search(diag.WithTrace(ctx, &tr), h.w.Queries[0], h.opt.K); err != nil {
			return fmt.Errorf("breakdown counts: %w", err)
		}
		bd.Counts = countsOf(&tr)
	}
	bd.MarshalMS, bd.UploadMS, bd.KernelMS = Median(marshal), Median(upload), Median(kernel)
	bd.ReadbackMS, bd.SelectMS, bd.TotalMS = Median(readback), Median(sel), Median(total)
	// Other is what the stage medians leave of the median total, so that
	// the rows of the table add up to the end-to-end figure.
	bd.OtherMS = max(0, bd.TotalMS-bd.MarshalMS-bd.UploadMS-bd.KernelMS-bd.ReadbackMS-bd.SelectMS)
	bd.Percent = map[string]float64{}
	for _, s := range bd.stages() {
		bd.Percent[s.Name] = 100 * s.MS / bd.TotalMS
	}
	h.rep.Breakdown = bd
	return nil
}

// verdict sums a report up in one line.
func verdict(r *Report) (bool, string) {
	var failed []string
	// fails records a result that errored or disagreed with the reference.
	fails := func(label, errText string, pass *bool, detail string) bool {
		switch {
		case errText != "":
			failed = append(failed, label+": "+errText)
		case pass != nil && !*pass:
			failed = append(failed, label+": "+detail)
		default:
			return false
		}
		return true
	}
	var ran []*TierResult
	byName := map[string]*TierResult{}
	for i := range r.Tiers {
		t := &r.Tiers[i]
		byName[t.Name] = t
		if !fails(t.Name, t.Error, t.Pass, t.CheckDetail) && t.Ran() {
			ran = append(ran, t)
		}
	}
	if b := r.Batch; b != nil {
		for _, t := range b.Tiers {
			fails("batch "+t.Name, t.Error, t.Pass, t.CheckDetail)
		}
	}
	for _, p := range r.Peers {
		fails("peer "+p.Name, p.Error, p.Pass, p.CheckDetail)
	}
	if len(failed) > 0 {
		return false, "FAIL · " + strings.Join(failed, " · ")
	}
	if len(ran) == 0 {
		v := "no tier ran · " + orDash(firstClause(r.GPUReason))
		if bd := r.Breakdown; bd != nil {
			v += fmt.Sprintf(" · %s path on the %s: marshal %.0f%%, upload %.0f%%, kernel %.0f%% of end to end",
				bd.Tier, bd.Backend, bd.Percent["marshal"], bd.Percent["upload"], bd.Percent["kernel"])
		}
		return true, v
	}
	parts := []string{fmt.Sprintf("PASS · %d tier(s) agree with the float64 reference over %d×%d", len(ran), r.N, r.Dim)}
	fb := byName[string(TierFallback)]
	if fb != nil && fb.Ran() {
		s := fmt.Sprintf("fallback %s ms per search", ms(*fb.MedianMS))
		if fb.XFloor != nil {
			s += fmt.Sprintf(" (%s× the CPU read floor)", ratio(*fb.XFloor))
		}
		parts = append(parts, s)
	}
	for _, name := range []Tier{TierResident, TierKernel, TierContiguous, TierList} {
		t := byName[string(name)]
		if t == nil || !t.Ran() {
			continue
		}
		if s := t.SpeedupVsFallback; s != nil {
			parts = append(parts, fmt.Sprintf("%s speed-up vs fallback %s× (%s–%s×)", name, ratio(s.Median), ratio(s.Min), ratio(s.Max)))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s ms", name, ms(*t.MedianMS)))
		}
		break
	}
	if s := peersVerdict(r); s != "" {
		parts = append(parts, s)
	}
	if r.Adapter != nil {
		where := "on " + r.Adapter.Name
		if r.Adapter.Type == "cpu" {
			where += " (software adapter: correctness, not speed)"
		}
		parts = append(parts, where)
	} else if r.GPUReason != "" {
		parts = append(parts, "GPU tiers skipped: "+firstClause(r.GPUReason))
	}
	if bd := r.Breakdown; bd != nil {
		parts = append(parts, fmt.Sprintf("%s path: marshal %.0f%%, upload %.0f%%, kernel %.0f%% of end to end",
			bd.Tier, bd.Percent["marshal"], bd.Percent["upload"], bd.Percent["kernel"]))
	}
	return true, strings.Join(parts, " · ")
}

// peersVerdict says how much slower (or faster) than the fallback each
// peer that ran was, with one query and with the batch.
func peersVerdict(r *Report) string {
	var one, batch []string
	for _, p := range r.Peers {
		if p.RatioVsUmbra != nil {
			one = append(one, fmt.Sprintf("%s %s×", p.Name, ratio(*p.RatioVsUmbra)))
		}
		if p.BatchRatioVsUmbra != nil {
			batch = append(batch, fmt.Sprintf("%s %s×", p.Name, ratio(*p.BatchRatioVsUmbra)))
		}
	}
	if len(one) == 0 && len(batch) == 0 {
		return ""
	}
	s := "peer time / fallback time:"
	if len(one) > 0 {
		s += " one query " + strings.Join(one, ", ")
	}
	if len(batch) > 0 && r.Batch != nil {
		if len(one) > 0 {
			s += ";"
		}
		s += fmt.Sprintf(" %d queries %s", r.Batch.Queries, strings.Join(batch, ", "))
	}
	return s
}

// firstClause shortens a reason to its first sentence.
func firstClause(s string) string {
	if i := strings.IndexAny(s, ";\n"); i > 0 {
		return s[:i]
	}
	return s
}

// paths times each batch size of Options.Paths on the resident GPU index
// with the engine's own selection ("auto": fused for k within its limit),
// with the radix select forced (gpu.WithSelectPath, for these calls only)
// and, for batches, with each batch kernel forced ("tiles": scores.wgsl's
// tiles of 8 or the fused scan; "gemm": gemm.wgsl and the radix select;
// gpu.WithBatchKernel), in one run: after one traced call per
// path (its counts, and a warm-up), the timed calls alternate between the
// paths, so both see the same machine state (this machine is shared).
func (h *harness) paths(ctx context.Context) error {
	if h.gpuIx == nil {
		return nil // no GPU: nothing to compare
	}
	type path struct {
		name string
		with func(context.Context) context.Context
	}
	for _, nq := range h.opt.Paths {
		qs := make([][]float32, nq)
		for i := range qs {
			qs[i] = h.w.Queries[i%len(h.w.Queries)]
		}
		paths := []path{{"auto", func(c context.Context) context.Context { return c }},
			{"radix", func(c context.Context) context.Context { return gpu.WithSelectPath(c, gpu.SelectRadix) }}}
		if nq > 1 {
			paths = append(paths,
				path{"tiles", func(c context.Context) context.Context { return gpu.WithBatchKernel(c, gpu.BatchTile) }},
				path{"gemm", func(c context.Context) context.Context { return gpu.WithBatchKernel(c, gpu.BatchGemm) }})
		}
		rs := make([]PathResult, len(paths))
		times := make([][]float64, len(paths))
		for p, path := range paths {
			rs[p] = PathResult{Queries: nq, Path: path.name}
			var tr diag.Trace
			if _, err := h.gpuIx.SearchBatch(diag.WithTrace(path.with(ctx), &tr), qs, h.opt.K); err != nil {
				rs[p].Error = err.Error()
				continue
			}
			rs[p].Counts = countsOf(&tr)
		}
		for i := 0; i < h.opt.Reps; i++ {
			h.progress("paths: %d quer%s, call %d/%d on each path", nq, plural(nq, "y", "ies"), i+1, h.opt.Reps)
			for p, path := range paths {
				if err := ctx.Err(); err != nil {
					return err
				}
				if rs[p].Error != "" {
					continue
				}
				pctx := path.with(ctx)
				start := time.Now()
				if _, err := h.gpuIx.SearchBatch(pctx, qs, h.opt.K); err != nil {
					rs[p].Error = err.Error()
					continue
				}
				times[p] = append(times[p], float64(time.Since(start))/float64(time.Millisecond))
			}
		}
		for p := range rs {
			if rs[p].Error == "" {
				rs[p].MedianMS = Median(times[p])
				rs[p].PerQueryMS = rs[p].MedianMS / float64(nq)
			}
		}
		h.rep.Paths = append(h.rep.Paths, rs...)
	}
	return nil
}

func countsOf(tr *diag.Trace) Counts {
	return Counts{Dispatches: tr.Dispatches, Submissions: tr.Submissions, Maps: tr.Maps,
		BytesUp: tr.BytesUp, BytesDown: tr.BytesDown, BytesRead: tr.BytesRead, SelectPath: tr.SelectPath}
}
