package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// Report is everything a run measured, with the context needed to read
// it. Its JSON form is documented in SCHEMA.md.
type Report struct {
	UmbraVersion string  `json:"umbra_version"`
	GoVersion    string  `json:"go_version"`
	OS           string  `json:"os"`
	Arch         string  `json:"arch"`
	CPU          CPUInfo `json:"cpu"`
	Date         string  `json:"date"` // RFC 3339, UTC

	N       int    `json:"n"`
	Dim     int    `json:"dim"`
	K       int    `json:"k"`
	Metric  string `json:"metric"`
	Repeat  int    `json:"repeat"`
	Runs    int    `json:"runs"`
	Warmup  int    `json:"warmup"`
	Queries int    `json:"queries"`
	// Data and QueriesFrom say where the vectors came from: a file path,
	// or "random" with Seed.
	Data        string  `json:"data"`
	QueriesFrom string  `json:"queries_from"`
	Seed        *uint64 `json:"seed,omitempty"`

	Device string `json:"device"` // as asked: auto, gpu or cpu
	// Adapter is the one the GPU tiers ran on; null when none did, and
	// GPUReason (with GPUHint) says why.
	Adapter   *Adapter `json:"adapter"`
	GPUReason string   `json:"gpu_reason,omitempty"`
	GPUHint   string   `json:"gpu_hint,omitempty"`
	Limits    *Limits  `json:"limits,omitempty"`
	Chunks    int      `json:"chunks,omitempty"`     // device buffers holding the N rows
	ChunkRows int      `json:"chunk_rows,omitempty"` // rows per device buffer
	// KernelClock says how the kernel tier was timed: "gpu" (device
	// timestamps around the dispatches) or "wall" (submit to done on the
	// host clock).
	KernelClock string `json:"kernel_clock,omitempty"`
	// Route is Auto's per-process calibration in words (engine
	// Info.Route): when one query goes to the GPU rather than the CPU.
	// Absent unless the engine calibrated one (Device Auto on a hardware
	// adapter).
	Route string `json:"route,omitempty"`
	// Floors are the plain read passes over the resident slab, on each
	// device a tier ran on, timed in the same groups as the tiers.
	Floors *Floors `json:"floors,omitempty"`

	// Threshold is the largest |score − float64 reference| accepted.
	Threshold float64      `json:"threshold"`
	Tiers     []TierResult `json:"tiers"`
	Breakdown *Breakdown   `json:"breakdown,omitempty"`
	// Batch and Peers are set with --peers: umbra's SearchBatch, and the
	// other libraries run on the same data and queries.
	Batch *BatchResult `json:"batch,omitempty"`
	Peers []PeerResult `json:"peers,omitempty"`
	// Paths are set with --paths: each batch size on the fused and the
	// radix selection of the resident GPU index, side by side.
	Paths   []PathResult `json:"paths,omitempty"`
	Pass    bool         `json:"pass"`
	Verdict string       `json:"verdict"`
}

// Adapter describes the GPU adapter the GPU tiers used.
type Adapter struct {
	Name   string `json:"name"`
	Vendor string `json:"vendor"`
	API    string `json:"api"`  // vulkan, metal, dx12, gl
	Type   string `json:"type"` // discrete, integrated, cpu, unknown
	Driver string `json:"driver"`
}

// Limits are the device limits the slab was split against.
type Limits struct {
	MaxStorageBindingBytes uint64 `json:"max_storage_binding_bytes"`
	MaxBufferBytes         uint64 `json:"max_buffer_bytes"`
	MaxWorkgroupsPerDim    uint32 `json:"max_workgroups_per_dim"`
	MaxInvocations         uint32 `json:"max_invocations_per_workgroup"`
}

// Range is the median and extremes of per-group speed-ups.
type Range struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// TierResult is one tier's timings and consistency check. Timing fields
// are absent for a tier that was skipped or failed.
type TierResult struct {
	Name    string `json:"name"`
	Premise string `json:"premise"`
	// Skipped is true when the machine cannot run the tier (no usable
	// adapter, --device cpu); SkipReason says why, in the engine's words.
	Skipped    bool   `json:"skipped,omitempty"`
	SkipReason string `json:"skip_reason,omitempty"`
	// Error is set when the tier could run but failed.
	Error string `json:"error,omitempty"`

	MedianMS *float64  `json:"median_ms,omitempty"`
	MinMS    *float64  `json:"min_ms,omitempty"`
	MaxMS    *float64  `json:"max_ms,omitempty"`
	Jitter   *float64  `json:"jitter,omitempty"`
	GroupsMS []float64 `json:"groups_ms,omitempty"` // one per group: the minimum of its repeats
	// SpeedupVsFallback is fallback time / tier time, group by group.
	// Absent for the fallback itself and when the fallback did not run.
	SpeedupVsFallback *Range `json:"speedup_vs_fallback,omitempty"`
	// FloorMS is the median read floor of the device the tier ran on
	// (the CPU's for the fallback, the GPU's for the others); XFloor is
	// the tier's median as a multiple of it, and GBPerS the slab bytes
	// over the tier's median. Absent when that floor was not measured.
	FloorMS *float64 `json:"floor_ms,omitempty"`
	XFloor  *float64 `json:"x_floor,omitempty"`
	GBPerS  *float64 `json:"gb_per_s,omitempty"`

	MaxAbsDiff *float64 `json:"max_abs_diff,omitempty"`
	TopKMatch  *bool    `json:"topk_match,omitempty"`
	TopKExact  *bool    `json:"topk_exact,omitempty"`
	Pass       *bool    `json:"pass,omitempty"`
	// CheckDetail says why Pass is false.
	CheckDetail string `json:"check_detail,omitempty"`
}

// Ran reports whether the tier has timings.
func (t *TierResult) Ran() bool { return t.MedianMS != nil }

// Breakdown is where the time of one tier's end-to-end call goes, stage by
// stage, from diag.Trace: each stage's median over Reps traced calls.
type Breakdown struct {
	Tier    string `json:"tier"`
	Backend string `json:"backend"` // gpu or cpu
	Reps    int    `json:"reps"`

	MarshalMS  float64 `json:"marshal_ms"`  // host: validate and pack rows into the slab (normalised under cosine)
	UploadMS   float64 `json:"upload_ms"`   // host to device: the rows (Add) and the query (Search)
	KernelMS   float64 `json:"kernel_ms"`   // the scoring and top-k dispatches (GPU) or the scan (CPU)
	ReadbackMS float64 `json:"readback_ms"` // device to host: k (score, row) pairs per query, selected on the device
	SelectMS   float64 `json:"select_ms"`   // host: sorting the k hits read back
	OtherMS    float64 `json:"other_ms"`    // the rest: index creation, Close, query preparation
	TotalMS    float64 `json:"total_ms"`    // median end to end of a traced call
	// Percent is each stage's median as a percentage of TotalMS.
	Percent       map[string]float64 `json:"percent"`
	UploadBytes   int64              `json:"upload_bytes"`
	ReadbackBytes int64              `json:"readback_bytes"`
	KernelClock   string             `json:"kernel_clock"`
	// What one search issues: from a traced Search of k on the resident
	// index (GPU only; zero on the CPU), counted where the wgpu calls are
	// made. See Counts.
	Counts
}

// Counts are what one GPU search issued (diag.Trace's counts).
type Counts struct {
	Dispatches  int64 `json:"dispatches"`
	Submissions int64 `json:"submissions"`
	Maps        int64 `json:"maps"`
	BytesUp     int64 `json:"bytes_up"`
	BytesDown   int64 `json:"bytes_down"`
	// BytesRead is the row bytes the device's scan read (diag.Trace's).
	BytesRead int64 `json:"bytes_read"`
	// SelectPath is how the search selected: fused, radix, host or scores
	// (empty on the CPU).
	SelectPath string `json:"select_path,omitempty"`
}

// PathResult is one batch size on one selection path of the GPU (with
// --paths): the fused scan-and-select beside the radix select it replaces
// for small k.
type PathResult struct {
	Queries int    `json:"queries"`
	Path    string `json:"path"` // auto (the engine's choice), radix, tiles or gemm (forced); SelectPath says which select ran
	// MedianMS is the median wall time of one SearchBatch call over the
	// Reps untimed-trace calls; PerQueryMS that over Queries.
	MedianMS   float64 `json:"median_ms"`
	PerQueryMS float64 `json:"per_query_ms"`
	Counts
	Error string `json:"error,omitempty"`
}

// stages lists the breakdown's stages with their medians, in path order.
func (b *Breakdown) stages() []struct {
	Name string
	MS   float64
} {
	return []struct {
		Name string
		MS   float64
	}{
		{"marshal", b.MarshalMS}, {"upload", b.UploadMS}, {"kernel", b.KernelMS},
		{"readback", b.ReadbackMS}, {"select", b.SelectMS}, {"other", b.OtherMS},
	}
}

func ptr[T any](v T) *T { return &v }

// finite returns a pointer to x, or nil when x cannot be written as JSON.
func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// WriteText writes the report as a table for people: context, the tiers
// with their premises, the breakdown, the consistency check and the
// verdict.
func (r *Report) WriteText(out io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "umbra bench %s · %s %s/%s · %s\n", r.UmbraVersion, r.GoVersion, r.OS, r.Arch, r.Date)
	kern := r.CPU.FallbackKernel
	if kern == "" {
		kern = "?"
	}
	fmt.Fprintf(&b, "cpu      %s · %d logical cores, GOMAXPROCS %d · fallback kernel %s\n", r.CPU.Model, r.CPU.Cores, r.CPU.GOMAXPROCS, kern)
	if a := r.Adapter; a != nil {
		fmt.Fprintf(&b, "adapter  %s · vendor %s · %s, type %s · driver %s\n", a.Name, orDash(a.Vendor), a.API, a.Type, orDash(a.Driver))
		if l := r.Limits; l != nil {
			fmt.Fprintf(&b, "limits   storage binding %s, buffer %s, %d workgroups per dim · %d chunk(s) of up to %d rows\n",
				bytesHuman(l.MaxStorageBindingBytes), bytesHuman(l.MaxBufferBytes), l.MaxWorkgroupsPerDim, r.Chunks, r.ChunkRows)
		}
		if a.Type == "cpu" {
			b.WriteString("         (a software adapter running on the CPU: its figures check correctness, not GPU speed)\n")
		}
	} else {
		fmt.Fprintf(&b, "adapter  none used: %s\n", orDash(r.GPUReason))
		if r.GPUHint != "" {
			fmt.Fprintf(&b, "         fix: %s\n", r.GPUHint)
		}
		if r.Device == "auto" {
			b.WriteString("         (--device gpu runs the GPU tiers on any working adapter, software ones included)\n")
		}
	}
	if r.Route != "" {
		fmt.Fprintf(&b, "route    Auto's calibration: %s (the GPU tiers below are pinned to the GPU)\n", r.Route)
	}
	data := r.Data
	if r.Seed != nil && data == "random" {
		data = fmt.Sprintf("random uniform [-1,1), seed %d", *r.Seed)
	}
	fmt.Fprintf(&b, "data     %d × %d (%s) · %d quer%s (%s) · %s · k=%d\n",
		r.N, r.Dim, data, r.Queries, plural(r.Queries, "y", "ies"), r.QueriesFrom, r.Metric, r.K)
	fmt.Fprintf(&b, "method   %d groups × %d repeats, each group's minimum kept; median, range, jitter=(max−min)/median over groups;\n"+
		"         tiers interleaved inside each group, speed-up = fallback/tier paired per group; %d warm-up call(s) per tier\n\n",
		r.Runs, r.Repeat, r.Warmup)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tier      \tmedian ms\tmin ms\tmax ms\tjitter\t× floor\tGB/s\tvs fallback (range)\tmax_abs_diff\ttop-k\tcheck\t")
	for i := range r.Tiers {
		t := &r.Tiers[i]
		switch {
		case t.Skipped:
			fmt.Fprintf(tw, "%s\t—\t—\t—\t—\t—\t—\t—\t—\t—\tskipped\t\n", fmt.Sprintf("%-10s", t.Name))
			continue
		case !t.Ran() && t.Error != "":
			fmt.Fprintf(tw, "%s\t—\t—\t—\t—\t—\t—\t—\t%s\t%s\tERROR\t\n", fmt.Sprintf("%-10s", t.Name), diffText(t), topkText(t, r.K))
			continue
		}
		sp := "—"
		if s := t.SpeedupVsFallback; s != nil {
			sp = fmt.Sprintf("%s× (%s–%s)", ratio(s.Median), ratio(s.Min), ratio(s.Max))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t%s\t%s\t%s\t%s\t\n", fmt.Sprintf("%-10s", t.Name), ms(*t.MedianMS), ms(*t.MinMS), ms(*t.MaxMS),
			100**t.Jitter, xText(t.XFloor), gbText(t.GBPerS), sp, diffText(t), topkText(t, r.K), checkText(t))
	}
	for _, f := range r.floorList() {
		name := fmt.Sprintf("%-10s", f.Backend+" floor")
		if !f.Ran() {
			fmt.Fprintf(tw, "%s\t—\t—\t—\t—\t—\t—\t—\t—\t—\tERROR\t\n", name)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f%%\t1\t%s\t—\t—\t—\t—\t\n", name, ms(*f.MedianMS), ms(*f.MinMS), ms(*f.MaxMS),
			100**f.Jitter, gbText(f.GBPerS))
	}
	tw.Flush()

	b.WriteString("\npremises\n")
	for _, t := range r.Tiers {
		fmt.Fprintf(&b, "  %-10s  %s\n", t.Name, t.Premise)
	}
	for _, f := range r.floorList() {
		fmt.Fprintf(&b, "  %-10s  %s (%s per pass)\n", f.Backend+" floor", f.Premise, bytesHuman(uint64(f.Bytes)))
	}
	if r.Floors != nil && len(r.Floors.VsC) > 0 {
		b.WriteString("  against the C read loop (each group's time / the C loop's in the same group; median, range):")
		for i, v := range r.Floors.VsC {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s %s %.2f× (%.2f–%.2f)", sep, v.Name, v.Median, v.Min, v.Max)
		}
		b.WriteString("\n")
	}
	if len(r.floorList()) > 0 {
		b.WriteString("  × floor = tier median / the median read floor of the device it ran on; GB/s = slab bytes / tier median\n")
		if f := r.Floors.GPU; f != nil && r.KernelClock != "" && f.Clock != "" && f.Clock != r.KernelClock {
			fmt.Fprintf(&b, "  (the kernel tier is timed on the %s clock, the GPU floor on the %s clock: its × floor mixes the two)\n", r.KernelClock, f.Clock)
		}
	}
	// Tiers skipped for the same reason share one line.
	var skipped []string
	for i, t := range r.Tiers {
		if t.Skipped {
			skipped = append(skipped, t.Name)
			if i+1 < len(r.Tiers) && r.Tiers[i+1].Skipped && r.Tiers[i+1].SkipReason == t.SkipReason {
				continue
			}
			fmt.Fprintf(&b, "  %s skipped: %s\n", strings.Join(skipped, ", "), t.SkipReason)
			skipped = skipped[:0]
		}
	}
	for _, t := range r.Tiers {
		switch {
		case t.Skipped:
		case t.Error != "":
			fmt.Fprintf(&b, "  %-10s  error: %s\n", t.Name, t.Error)
		case t.CheckDetail != "":
			fmt.Fprintf(&b, "  %-10s  FAIL: %s\n", t.Name, t.CheckDetail)
		}
	}
	for _, f := range r.floorList() {
		if f.Error != "" {
			fmt.Fprintf(&b, "  %-10s  error: %s\n", f.Backend+" floor", f.Error)
		}
	}
	r.writePeers(&b)

	if bd := r.Breakdown; bd != nil {
		wait := ""
		if bd.Backend == "gpu" {
			wait = " (tracing waits for the device once more, to end the kernel stage)"
		}
		fmt.Fprintf(&b, "\nbreakdown of the %s path on the %s, medians of %d traced calls%s\n",
			bd.Tier, backendWord(bd.Backend), bd.Reps, wait)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  stage\tms\tshare\t")
		for _, s := range bd.stages() {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t\n", s.Name, ms(s.MS), pct(bd.Percent[s.Name]))
		}
		fmt.Fprintf(tw, "  end to end\t%s\t100%%\t\n", ms(bd.TotalMS))
		tw.Flush()
		fmt.Fprintf(&b, "  moved: %s up, %s back per call; kernel clock: %s\n",
			bytesHuman(uint64(bd.UploadBytes)), bytesHuman(uint64(bd.ReadbackBytes)), orDash(bd.KernelClock))
		if bd.Backend == "gpu" {
			fmt.Fprintf(&b, "  one search issues: %d dispatches, %d submission(s), %d map(s), %d B up, %d B down (%s select)\n",
				bd.Dispatches, bd.Submissions, bd.Maps, bd.BytesUp, bd.BytesDown, orDash(bd.SelectPath))
		}
	}
	if len(r.Paths) > 0 {
		fmt.Fprintf(&b, "\nselection paths on the GPU, k=%d: the engine's choice (auto), the radix select forced and, for batches, each batch kernel forced (tiles, gemm), medians of untraced calls alternating between them\n", r.K)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  queries\tpath\tselect\tms/call\tms/query\tdispatches\tsubmissions\tmaps\tbytes up\tbytes down\tbytes read\t")
		for _, p := range r.Paths {
			if p.Error != "" {
				fmt.Fprintf(tw, "  %d\t%s\terror: %s\t\t\t\t\t\t\t\t\t\n", p.Queries, p.Path, p.Error)
				continue
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", p.Queries, p.Path, orDash(p.SelectPath), ms(p.MedianMS), ms(p.PerQueryMS),
				p.Dispatches, p.Submissions, p.Maps, p.BytesUp, p.BytesDown, p.BytesRead)
		}
		tw.Flush()
	}

	fmt.Fprintf(&b, "\nconsistency: |score − float64 reference| over all %d scores of query 0 (threshold %.3g), "+
		"top-%d IDs vs the reference (near-ties within the threshold may swap)\n", r.N, r.Threshold, r.K)
	fmt.Fprintf(&b, "verdict: %s\n", r.Verdict)
	_, err := io.WriteString(out, b.String())
	return err
}

// floorList returns the floors measured, CPU first.
func (r *Report) floorList() []*FloorResult {
	var out []*FloorResult
	if r.Floors != nil {
		for _, f := range []*FloorResult{r.Floors.CPU, r.Floors.C, r.Floors.GPU} {
			if f != nil {
				out = append(out, f)
			}
		}
	}
	return out
}

// writePeers writes the peers table: umbra's own rows first, then each
// peer, one query and the batch side by side, with premises and skips.
func (r *Report) writePeers(b *strings.Builder) {
	if len(r.Peers) == 0 && r.Batch == nil {
		return
	}
	var fb, res *TierResult
	for i := range r.Tiers {
		switch Tier(r.Tiers[i].Name) {
		case TierFallback:
			fb = &r.Tiers[i]
		case TierResident:
			res = &r.Tiers[i]
		}
	}
	batchOf := map[string]*BatchTier{}
	nb := 0
	if r.Batch != nil {
		nb = r.Batch.Queries
		for i := range r.Batch.Tiers {
			batchOf[r.Batch.Tiers[i].Name] = &r.Batch.Tiers[i]
		}
	}
	fmt.Fprintf(b, "\npeers on the same data and queries · ÷ = median / umbra's median (above 1: umbra is faster)\n")
	if r.Batch != nil {
		fmt.Fprintf(b, "  batch: %d queries (%s), %d groups × %d repeats, interleaved; FAISS timed in its own process after umbra's groups\n",
			nb, orDash(r.Batch.QueriesFrom), r.Batch.Runs, r.Batch.Repeat)
	}
	names := map[*PeerResult]string{}
	width := len("umbra fallback")
	for i := range r.Peers {
		p := &r.Peers[i]
		name := p.Name
		if p.Version != "" {
			name += " " + p.Version
		}
		if p.Name == "faiss" {
			name += " " + p.Index
			if p.Threads > 0 {
				name += fmt.Sprintf(" (%d thr)", p.Threads)
			}
		}
		names[p] = name
		width = max(width, utf8.RuneCountInString(name))
	}
	pad := func(s string) string { return "  " + s + strings.Repeat(" ", width-utf8.RuneCountInString(s)) }
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t1 query ms\trange\tjitter\t÷ fallback\t÷ resident\t%d queries ms\trange\t÷ fallback\t÷ resident\tmax_abs_diff\ttop-k\tcheck\t\n", pad(""), nb)
	rng := func(lo, hi *float64) string {
		if lo == nil || hi == nil {
			return "—"
		}
		return ms(*lo) + "–" + ms(*hi)
	}
	val := func(x *float64) string {
		if x == nil {
			return "—"
		}
		return ms(*x)
	}
	jit := func(x *float64) string {
		if x == nil {
			return "—"
		}
		return fmt.Sprintf("%.1f%%", 100**x)
	}
	umbraRow := func(t *TierResult, name string) {
		if t == nil || !t.Ran() {
			return
		}
		bt := batchOf[t.Name]
		var bm, blo, bhi, bfb *float64
		check := checkText(t)
		if bt != nil {
			bm, blo, bhi = bt.MedianMS, bt.MinMS, bt.MaxMS
			if bt.Pass != nil && !*bt.Pass {
				check = "FAIL"
			}
		}
		vsFb, bVsFb := "—", "—"
		if name != "umbra fallback" {
			vsFb = xText(ratioOf(t.MedianMS, fb.MedianMS))
			if b := batchOf[string(TierFallback)]; b != nil {
				bfb = b.MedianMS
			}
			bVsFb = xText(ratioOf(bm, bfb))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t—\t%s\t%s\t%s\t—\t%s\t%s\t%s\t\n", pad(name), ms(*t.MedianMS), rng(t.MinMS, t.MaxMS),
			jit(t.Jitter), vsFb, val(bm), rng(blo, bhi), bVsFb, diffText(t), topkText(t, r.K), check)
	}
	if fb != nil {
		umbraRow(fb, "umbra fallback")
	}
	if fb != nil && fb.Ran() {
		umbraRow(res, "umbra resident")
	}
	for i := range r.Peers {
		p := &r.Peers[i]
		name := pad(names[p])
		switch {
		case p.Skipped:
			fmt.Fprintf(tw, "%s\t—\t—\t—\t—\t—\t—\t—\t—\t—\t—\t—\tskipped\t\n", name)
			continue
		case !p.Ran() && p.Error != "":
			fmt.Fprintf(tw, "%s\t—\t—\t—\t—\t—\t—\t—\t—\t—\t—\t—\tERROR\t\n", name)
			continue
		}
		diff, topk, check := "—", "—", "—"
		if p.MaxAbsDiff != nil {
			diff = fmt.Sprintf("%.2e", *p.MaxAbsDiff)
		}
		if p.TopKMatch != nil {
			topk = "differs"
			if *p.TopKMatch && (p.BatchTopKMatch == nil || *p.BatchTopKMatch) {
				topk = "ties"
				if *p.TopKExact {
					topk = "same"
				}
			}
		}
		if p.Pass != nil {
			check = map[bool]string{true: "PASS", false: "FAIL"}[*p.Pass]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, val(p.MedianMS), rng(p.MinMS, p.MaxMS),
			jit(p.Jitter), xText(p.RatioVsUmbra), xText(p.RatioVsResident), val(p.BatchMedianMS), rng(p.BatchMinMS, p.BatchMaxMS),
			xText(p.BatchRatioVsUmbra), xText(p.BatchRatioVsResident), diff, topk, check)
	}
	tw.Flush()
	if r.Batch != nil {
		for _, t := range r.Batch.Tiers {
			fmt.Fprintf(b, "  umbra %-9s batch: %s\n", t.Name, t.Premise)
		}
	}
	for _, p := range r.Peers {
		switch {
		case p.Skipped:
			fmt.Fprintf(b, "  %s skipped: %s\n", p.Name, p.SkipReason)
			if p.Install != "" {
				fmt.Fprintf(b, "    install: %s\n", p.Install)
			}
			continue
		}
		fmt.Fprintf(b, "  %s: %s\n", p.Name, p.Premise)
		if p.BatchPremise != "" && r.Batch != nil {
			fmt.Fprintf(b, "  %s batch: %s\n", p.Name, p.BatchPremise)
		}
		switch {
		case p.Error != "":
			fmt.Fprintf(b, "  %s error: %s\n", p.Name, p.Error)
		case p.CheckDetail != "":
			fmt.Fprintf(b, "  %s FAIL: %s\n", p.Name, p.CheckDetail)
		}
	}
	if r.Batch != nil {
		for _, t := range r.Batch.Tiers {
			switch {
			case t.Error != "":
				fmt.Fprintf(b, "  umbra %s batch error: %s\n", t.Name, t.Error)
			case t.CheckDetail != "":
				fmt.Fprintf(b, "  umbra %s batch FAIL: %s\n", t.Name, t.CheckDetail)
			}
		}
	}
}

// xText prints a multiple (of a floor, of umbra's time).
func xText(x *float64) string {
	if x == nil {
		return "—"
	}
	return ratio(*x) + "×"
}

func gbText(x *float64) string {
	if x == nil {
		return "—"
	}
	if *x >= 10 {
		return fmt.Sprintf("%.1f", *x)
	}
	return fmt.Sprintf("%.2f", *x)
}

func backendWord(b string) string {
	if b == "gpu" {
		return "GPU"
	}
	return "CPU (no GPU in this run)"
}

func diffText(t *TierResult) string {
	if t.MaxAbsDiff == nil {
		return "—"
	}
	return fmt.Sprintf("%.2e", *t.MaxAbsDiff)
}

func topkText(t *TierResult, k int) string {
	switch {
	case t.TopKMatch == nil:
		return "—"
	case *t.TopKExact:
		return "same"
	case *t.TopKMatch:
		return "ties"
	}
	return "differs"
}

func checkText(t *TierResult) string {
	if t.Pass == nil {
		return "—"
	}
	if *t.Pass {
		return "PASS"
	}
	return "FAIL"
}

// ms prints a duration in milliseconds with three significant digits or
// more.
func ms(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.1f", x)
	case x >= 1:
		return fmt.Sprintf("%.2f", x)
	case x >= 0.01:
		return fmt.Sprintf("%.3f", x)
	}
	return fmt.Sprintf("%.2g", x)
}

// ratio prints a speed-up with at least two significant digits: a tier
// slower than the fallback shows as 0.045, not 0.05 or 0.00.
func ratio(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	case x >= 1:
		return fmt.Sprintf("%.2f", x)
	}
	return strconv.FormatFloat(x, 'g', 2, 64)
}

// pct prints a share of the end-to-end time; small shares keep two
// significant digits instead of rounding to 0.0%.
func pct(x float64) string {
	if x >= 0.1 || x == 0 {
		return fmt.Sprintf("%.1f%%", x)
	}
	return strconv.FormatFloat(x, 'g', 2, 64) + "%"
}

func bytesHuman(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
