package gpu

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/shaders"
)

// Policy is how Verify chooses a device's variant.
type Policy struct {
	// Dims and Metrics are what the self-tests check. Empty: dimensions
	// 7 (a short row) and 768 (the common width), whose pipelines stand
	// for every dimension's; every metric (Cosine runs Dot's shaders).
	// With Metrics set, an index of another metric is refused: it would
	// run on a variant not self-tested for it.
	Dims    []int
	Metrics []core.Metric
	// FirstPass takes the first variant whose self-test passes, in the
	// order of firstPassTeams, direct batches before staged ones, and
	// times nothing (gemm.wgsl, which a timing must choose, is then not
	// tried): a browser's probe, where every pipeline costs seconds to
	// build and the clock is coarse. Otherwise every variant is
	// self-tested and tune times those that pass.
	FirstPass bool
	// Report, when set, hears each stage of Verify as it starts:
	// "compile" (building the self-test's pipelines, their count in the
	// detail) and "self-test".
	Report func(stage, detail string)
}

// SetPolicy sets how Verify chooses the variant.
func (d *Device) SetPolicy(p Policy) { d.policy = p }

// firstPassTeams is the order a FirstPass probe tries the teams in (all
// of shaders.TeamCandidates): 32, a subgroup on most desktop GPUs, first.
var firstPassTeams = []uint32{32, 64, 16, 8}

// selfTestDims are the dimensions the self-test checks by default: a
// short row (a team of 2 lanes, one vec4 each) and the common embedding
// width, where a row is split into parts over every team width the
// tuning may choose.
var selfTestDims = []int{7, 768}

// testDims are the dimensions the self-tests check.
func (d *Device) testDims() []int {
	if len(d.policy.Dims) > 0 {
		return d.policy.Dims
	}
	return selfTestDims
}

// testMetrics are the metrics whose shaders the self-tests check.
func (d *Device) testMetrics() []core.Metric {
	if len(d.policy.Metrics) == 0 {
		return []core.Metric{core.Dot, core.L2}
	}
	var ms []core.Metric
	for _, m := range d.policy.Metrics {
		if m = metricOf(m == core.L2); !slices.Contains(ms, m) {
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

// checkScope refuses an index of a metric the probe's self-test did not
// cover.
func (d *Device) checkScope(m core.Metric) error {
	if len(d.policy.Metrics) == 0 || slices.Contains(d.testMetrics(), metricOf(m == core.L2)) {
		return nil
	}
	return fmt.Errorf("%w: this device's probe self-tested %s only; a %v index would run untested", ErrFailed, d.scopeText(), m)
}

// Variant is a device's choice of kernels: a scoring variant, the
// reduction, and whether top-k may take the fused scan-and-select and
// batches gemm.wgsl.
type Variant struct {
	shaders.Variant
	Subgroups bool
	Fused     bool
	Gemm      bool
}

func (v Variant) String() string {
	return fmt.Sprintf("team %d, staged %v, subgroups %v, fused %v, gemm %v", v.Team, v.Staged, v.Subgroups, v.Fused, v.Gemm)
}

// brief describes the scoring part of v for a person: "team 32, subgroup
// reduction, direct batches".
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

// SetVariant makes later indexes use v, untested: the second judge runs
// every variant this way. Subgroups need HasSubgroups.
func (d *Device) SetVariant(v Variant) error {
	if v.Subgroups && !d.hasSubgroups {
		return fmt.Errorf("%w: the device has no subgroups feature", ErrFailed)
	}
	d.team, d.staged, d.subgroups, d.fused, d.gemm = v.Team, v.Staged, v.Subgroups, v.Fused, v.Gemm
	return nil
}

// Variant is the variant in use.
func (d *Device) Variant() Variant {
	return Variant{shaders.Variant{Team: d.team, Staged: d.staged}, d.subgroups, d.fused, d.gemm}
}

// variantName names the variant in use for a person.
func (d *Device) variantName() string { return d.Variant().brief() }

// record adds a check of kernel's variant and returns its index.
func (d *Device) record(kernel, variant string, err error) int {
	c := VariantCheck{Kernel: kernel, Variant: variant, Passed: err == nil}
	if err != nil {
		c.Error = err.Error()
	}
	d.checks = append(d.checks, c)
	return len(d.checks) - 1
}

// choose marks the scores check of v chosen, and every other passed one
// not, with why.
func (d *Device) choose(v Variant, chosen, others string) {
	for i := range d.checks {
		c := &d.checks[i]
		if c.Kernel != "scores" || !c.Passed {
			continue
		}
		c.Chosen = c.Variant == v.brief()
		if c.Chosen {
			c.Why = chosen
		} else if c.Why == "" {
			c.Why = others
		}
	}
}

// Verify chooses the variant searches use on the device, self-testing
// each before it is timed, let alone used: first with the subgroup
// reduction where the device offers it, then, if no variant of that
// passes, with the workgroup-memory tree; among those that pass, the
// fastest (tune), or the first under Policy.FirstPass. Then the fused
// scan-and-select and gemm.wgsl are self-tested with that variant and
// enabled only if they pass (gemm also only if faster). Every outcome is
// in Checks.
func (d *Device) Verify() error {
	d.checks = nil
	reductions := []bool{false}
	if d.hasSubgroups {
		reductions = []bool{true, false}
	}
	var firstErr error
	for _, sub := range reductions {
		d.subgroups = sub
		var passed []variant
		for _, v := range d.candidates() {
			d.team, d.staged = v.Team, v.Staged
			name := d.variantName()
			if d.policy.FirstPass {
				d.precompileFor(Variant{Variant: v, Subgroups: sub})
			}
			if d.policy.Report != nil {
				d.policy.Report("self-test", fmt.Sprintf("%s, %s", name, d.scopeText()))
			}
			err := d.selfTest()
			d.record("scores", name, err)
			if err != nil {
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			passed = append(passed, v)
			if d.policy.FirstPass {
				break
			}
		}
		if len(passed) == 0 {
			continue
		}
		if d.policy.FirstPass {
			d.team, d.staged = passed[0].Team, passed[0].Staged
			d.choose(d.Variant(), "the first variant to pass (this probe times nothing)", "")
		} else {
			d.tune(passed)
		}
		d.verifyFused()
		if d.policy.FirstPass {
			d.gemm, d.gemmErr = false, nil
			i := d.record("gemm", "gemm.wgsl", nil)
			d.checks[i].Passed = false
			d.checks[i].Why = "not tried: only a timing can choose it, and this probe times nothing"
		} else {
			d.verifyGemm()
		}
		if d.policy.Report != nil {
			fusedOn := "fused top-k on"
			if !d.fused {
				fusedOn = "fused top-k off (its self-test failed)"
			}
			d.policy.Report("self-test", fmt.Sprintf("%s, %s: passed, %s", d.variantName(), d.scopeText(), fusedOn))
		}
		return nil
	}
	return firstErr
}

// candidates are the scoring variants Verify self-tests, in order.
func (d *Device) candidates() []variant {
	if !d.policy.FirstPass {
		return tuneVariants()
	}
	var out []variant
	for _, team := range firstPassTeams {
		out = append(out, variant{Team: team}, variant{Team: team, Staged: true})
	}
	return out
}

// precompileFor builds, all at once, the pipelines the self-tests of v
// (and of its fused top-k) will use, reporting how many. One that fails
// to compile fails its self-test, with the compiler's messages.
func (d *Device) precompileFor(v Variant) {
	fv := v
	fv.Fused = true
	var prep []Prepared
	for _, dim := range d.testDims() {
		for _, m := range d.testMetrics() {
			prep = append(prep, Prepared{v, (dim + 3) &^ 3, m, core.F32}, Prepared{fv, (dim + 3) &^ 3, m, core.F32})
		}
	}
	if d.policy.Report != nil {
		d.policy.Report("compile", fmt.Sprintf("%d pipelines, %s", d.CountNew(prep), v.brief()))
	}
	_ = d.Precompile(prep)
}

// verifyFused self-tests the fused scan-and-select (topk.wgsl) with the
// variant chosen, and enables it only if every check passes; a device
// whose fused path fails keeps the radix select for every k (fusedErr says
// why). It runs after tune, whose timings use no selection.
func (d *Device) verifyFused() {
	d.fused, d.fusedErr = true, nil
	for _, dim := range d.testDims() {
		for _, metric := range d.testMetrics() {
			if err := d.checkFused(nil, dim, metric); err != nil {
				d.fused = false
				d.fusedErr = fmt.Errorf("fused self-test at dimension %d, metric %v, team %d: %w", dim, metric, d.team, err)
				i := d.record("fused", "topk.wgsl with "+d.variantName(), d.fusedErr)
				d.checks[i].Why = "not used: top-k takes the radix select for every k"
				return
			}
		}
	}
	i := d.record("fused", "topk.wgsl with "+d.variantName(), nil)
	d.checks[i].Chosen, d.checks[i].Why = true, "passed: top-k within its limits scans and selects in one pass"
}

// checkFused runs the ranking checks through the fused path, with k at
// each plan's limit and small, single queries and batches, masked and not,
// over more than twice the largest k in rows so the device selects. (k = 1
// is the smallest plan's case of k below its limit, which 5 covers.) Each
// 128-row chunk is scanned by two workgroups, each looping over several
// steps of rows and cutting its lists as they fill, and the merge meets
// two lists a chunk (as many workgroups as planned would be at most eight
// a chunk here, on a software adapter one or two: the same code, fewer
// loops, so one pass checks both).
func (d *Device) checkFused(r *rand.Rand, dim int, metric core.Metric) error {
	g, err := newIndex(d, (dim+3)&^3, metric, 128)
	if err != nil {
		return err
	}
	rows, ks := gpuplan.FusedChecks(g.topkSingle, g.topkBatch)
	g.Release()
	return d.checkSearches(r, dim, metric, rows, ks, 2)
}

// selfTest checks the device's current variant (team, reduction, staged
// batches) through the same code an index uses, for every metric, single
// queries and batches, top-k selected on the device and on the host: every
// score against float64, every ranking against a float64 ranking. It is
// what makes the probe prove the GPU works rather than that it exists.
func (d *Device) selfTest() error {
	fused := d.fused
	d.fused = false
	defer func() { d.fused = fused }()
	for _, dim := range d.testDims() {
		for _, metric := range d.testMetrics() {
			if err := d.checkVariant(nil, dim, metric); err != nil {
				return fmt.Errorf("self-test at dimension %d, metric %v, team %d, subgroups %v, staged %v: %w",
					dim, metric, d.team, d.subgroups, d.staged, err)
			}
		}
	}
	return nil
}

// checkVariant checks the current variant's scores and radix and host
// selections on 300 rows, which span several workgroups and, at 128 rows
// a chunk, three chunks; 8 queries fill one batch tile.
func (d *Device) checkVariant(r *rand.Rand, dim int, metric core.Metric) error {
	return d.checkSearches(r, dim, metric, 300, []int{5}, -1)
}

// CheckVariant checks the current variant's scores and radix and host
// selections at dimension dim under metric m, on random rows from r (nil:
// synthetic ones), across three 128-row chunks: the second judge's check.
func (d *Device) CheckVariant(r *rand.Rand, dim int, m core.Metric) error {
	fused := d.fused
	d.fused = false
	defer func() { d.fused = fused }()
	if err := d.checkVariant(r, dim, m); err != nil {
		return fmt.Errorf("self-test at dimension %d, metric %v, %v: %w", dim, m, d.Variant(), err)
	}
	return nil
}

// CheckFused checks the fused scan-and-select with the current variant,
// k small and at each plan's limit, the scan looping over many steps (two
// workgroups a chunk), on random rows from r (nil: synthetic ones).
func (d *Device) CheckFused(r *rand.Rand, dim int, m core.Metric) error {
	fused := d.fused
	d.fused = true
	defer func() { d.fused = fused }()
	if err := d.checkFused(r, dim, m); err != nil {
		return fmt.Errorf("fused self-test at dimension %d, metric %v, %v: %w", dim, m, d.Variant(), err)
	}
	return nil
}

// rowsFor returns n rows of dim: random in [-1, 1) from r, or
// packed.Synthetic's when r is nil.
func rowsFor(r *rand.Rand, n, dim int) *packed.Slab {
	if r == nil {
		return packed.Synthetic(n, dim)
	}
	s := packed.NewSlab(dim)
	flat := make([]float32, n*dim)
	for i := range flat {
		flat[i] = 2*r.Float32() - 1
	}
	s.AppendFlat(flat, false)
	return s
}

// checkSearches checks scores and rankings on rows rows of dim (random
// from r, or synthetic when r is nil), selecting each k of ks on the
// device and every row on the host, with and without an allow bitmap:
// every score against float64, every ranking against a float64 ranking
// and, rank by rank, against the CPU fallback's answer. fusedGroups < 0
// checks the radix select (the fused path is not enabled yet); otherwise
// the fused path, which must be the one taken, with at most fusedGroups
// workgroups per chunk (0: as many as it plans).
func (d *Device) checkSearches(r *rand.Rand, dim int, metric core.Metric, rows int, ks []int, fusedGroups int) error {
	fused := fusedGroups >= 0
	slab, qs, g, err := d.selfTestIndex(r, dim, metric, rows, batchQT)
	if err != nil {
		return err
	}
	defer g.Release()
	g.selfTest, g.fusedGroups = true, max(fusedGroups, 0)
	ctx := context.Background()
	// Every query's exact scores, once: the cases below rank prefixes of
	// qs, so a case's query qi is qs[qi].
	exactOf := make([][]float64, len(qs))
	for qi, q := range qs {
		exactOf[qi] = make([]float64, rows)
		for i := range exactOf[qi] {
			exactOf[qi][i] = gpuplan.ExactScore(slab.Row(i), q, metric)
		}
	}
	tol := gpuplan.Tol
	got, err := g.scores(ctx, qs[0], rows)
	if err != nil {
		return err
	}
	for i, s := range got {
		if w := exactOf[0][i]; math.Abs(float64(s)-w) > tol(w) {
			return fmt.Errorf("%w: test dispatch gave score %g for row %d, want %g", ErrFailed, s, i, w)
		}
	}
	view := fallback.Slab{Data: slab.Data, Rows: slab.Rows, Dim: slab.Dim, Stride: slab.Stride}
	// Top k selected on the device (one query, then a batch), and every row
	// ranked on the host from read-back scores (k = rows); then the same
	// with an allow bitmap admitting every third row.
	for _, c := range gpuplan.Cases(qs, ks, rows, fused) {
		var st core.Stages
		hits, err := g.Search(ctx, c.Queries, c.K, rows, c.Mask, &st)
		if err != nil {
			return err
		}
		if _, ok := g.fusedPlan(c.K, len(c.Queries), false); fused && ok && 2*c.Want < rows && st.Path != "fused" {
			return fmt.Errorf("%w: test top-%d of %d queries took the %s path, not the fused one", ErrFailed, c.K, len(c.Queries), st.Path)
		}
		if len(hits) != len(c.Queries) {
			return fmt.Errorf("%w: test search returned %d lists for %d queries", ErrFailed, len(hits), len(c.Queries))
		}
		for qi, q := range c.Queries {
			ex := exactOf[qi]
			exact := func(row int) float64 { return ex[row] }
			ranked := gpuplan.Ranked(rows, c.Mask != nil, metric, exact)
			for _, h := range hits[qi] {
				if h.Row < 0 || h.Row >= rows {
					return fmt.Errorf("%w: test top-%d of query %d returned row %d of %d", ErrFailed, c.K, qi, h.Row, rows)
				}
				if c.Mask != nil && h.Row%3 != 0 {
					return fmt.Errorf("%w: test search with an allow bitmap returned row %d, which it excludes", ErrFailed, h.Row)
				}
			}
			if err := gpuplan.CheckRanking(hits[qi], c.Want, ranked, exact, tol); err != nil {
				return fmt.Errorf("%w: test top-%d of query %d of %d (masked %v, path %s): %v", ErrFailed, c.K, qi, len(c.Queries), c.Mask != nil, st.Path, err)
			}
			// The CPU fallback's answer, rank by rank: the same rows
			// unless two scores tie within the tolerance.
			v := view
			v.Allow = c.Mask
			want, err := fallback.Search(ctx, v, q, c.K, metric, 1)
			if err != nil {
				return err
			}
			if len(want) != len(hits[qi]) {
				return fmt.Errorf("%w: %d hits, the fallback %d", ErrFailed, len(hits[qi]), len(want))
			}
			for i, h := range hits[qi] {
				w := want[i]
				if math.Abs(float64(h.Score)-float64(w.Score)) > 2*tol(float64(w.Score)) ||
					h.Row != w.Row && math.Abs(ex[h.Row]-ex[w.Row]) > 2*tol(float64(w.Score)) {
					return fmt.Errorf("%w: top-%d of query %d (path %s) rank %d: row %d score %g, the fallback's row %d score %g",
						ErrFailed, c.K, qi, st.Path, i, h.Row, h.Score, w.Row, w.Score)
				}
			}
		}
	}
	return nil
}

// verifyGemm self-tests gemm.wgsl, the register-tiled batch kernel, with
// the variant tune chose, and lets batches take it only if every score it
// writes is the same bits as scores.wgsl's and a batch searched faster
// with it (tuneGemm). A device whose gemm fails keeps scores.wgsl's tiles
// (gemmErr says why).
func (d *Device) verifyGemm() {
	d.gemm, d.gemmErr = false, nil
	name := "gemm.wgsl with " + d.variantName()
	for _, dim := range d.testDims() {
		for _, metric := range d.testMetrics() {
			if err := d.checkGemm(dim, metric); err != nil {
				d.gemmErr = fmt.Errorf("gemm self-test at dimension %d, metric %v, team %d: %w", dim, metric, d.team, err)
				i := d.record("gemm", name, d.gemmErr)
				d.checks[i].Why = "not used: batches take scores.wgsl's tiles"
				return
			}
		}
	}
	i := d.record("gemm", name, nil)
	gemm, tile, err := d.tuneGemm()
	c := &d.checks[i]
	c.Time = gemm
	switch {
	case err != nil:
		c.Why = "not used: its timing failed: " + err.Error()
	case gemm < tile:
		d.gemm = true
		c.Chosen, c.Why = true, fmt.Sprintf("a batch searched in %v with it, %v with scores.wgsl's tiles", gemm.Round(time.Microsecond), tile.Round(time.Microsecond))
	default:
		c.Why = fmt.Sprintf("not used: a batch searched in %v with it, %v with scores.wgsl's tiles", gemm.Round(time.Microsecond), tile.Round(time.Microsecond))
	}
}

// checkGemm scores gemmChecks queries (a whole tile of gemm.wgsl's and a
// part of one) against 300 synthetic rows in 128-row chunks through
// gemm.wgsl, and compares every score with scores.wgsl's, bit for bit: the
// one summation order makes them equal, so any difference is a fault.
// (scores.wgsl passed selfTest against float64 before; its tiles give a
// single query's bits, TestScoreBitsOnEveryPath.)
func (d *Device) checkGemm(dim int, metric core.Metric) error {
	const rows = 300
	_, qs, g, err := d.selfTestIndex(nil, dim, metric, rows, gemmChecks)
	if err != nil {
		return err
	}
	defer g.Release()
	ctx := context.Background()
	_, all, err := g.run(WithBatchKernel(ctx, BatchGemm), qs, submission{Rows: rows}, nil)
	if err != nil {
		return err
	}
	_, want, err := g.run(WithBatchKernel(ctx, BatchTile), qs, submission{Rows: rows}, nil)
	if err != nil {
		return err
	}
	for i, s := range want {
		if b := all[i]; math.Float32bits(b) != math.Float32bits(s) {
			return fmt.Errorf("%w: gemm gave score %g for query %d, row %d; scores.wgsl %g", ErrFailed, b, i/rows, i%rows, s)
		}
	}
	return nil
}

// gemmChecks is how many queries checkGemm scores at once: more than one
// tile of gemm.wgsl's at every team width, the last one partly filled.
const gemmChecks = 40

// selfTestIndex uploads rows rows of dim (random from r, or synthetic) to
// a new index on d in 128-row chunks and returns them with nq queries
// (padded) drawn past them; the caller releases the index.
func (d *Device) selfTestIndex(r *rand.Rand, dim int, metric core.Metric, rows, nq int) (*packed.Slab, [][]float32, *Index, error) {
	data := rowsFor(r, rows+nq, dim)
	slab := data.Part(0, rows)
	qs := make([][]float32, nq)
	for i := range qs {
		qs[i] = data.PaddedRow(rows + i)
	}
	g, err := newIndex(d, slab.Stride, metric, 128)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := g.Upload(context.Background(), slab, 0, nil, nil); err != nil {
		g.Release()
		return nil, nil, nil, err
	}
	return slab, qs, g, nil
}

// CheckCompressed checks quant.wgsl for prec (F16 or Int8) with the
// current team: the device's raw sums of random rows' codes against the
// CPU's (Int8: the same integers; F16: within float32 rounding of the
// float64 sum), then the exact search certified from the device's sums
// against the CPU's own exact search, hit for hit and bit for bit.
func (d *Device) CheckCompressed(r *rand.Rand, prec core.Precision, dim int, m core.Metric) error {
	const rows, nq = 300, batchQT
	data := rowsFor(r, rows+nq, dim)
	view := fallback.Slab{Data: data.Data[:rows*data.Stride], Rows: rows, Dim: dim, Stride: data.Stride}
	c, err := exact.NewCompressed(prec, dim)
	if err != nil {
		return err
	}
	c.AppendSlab(view, 0)
	g, err := d.NewCompressedIndex(c.WordsPerRow(), prec, m, 128)
	if err != nil {
		return err
	}
	defer g.Release()
	ctx := context.Background()
	w := c.WordsPerRow()
	if err := g.Upload(ctx, &packed.Slab{Dim: w, Stride: w, Rows: c.Rows, Data: c.Words()}, 0, nil, nil); err != nil {
		return err
	}
	qs := make([][]float32, nq)
	dq := make([][]float32, nq)
	for i := range qs {
		qs[i] = data.PaddedRow(rows + i)
		dq[i] = exact.DeviceQuery(c, qs[i])
	}
	for _, part := range [][][]float32{dq[:1], dq} {
		sums, scans, err := g.Sums(ctx, part, rows, nil)
		if err != nil {
			return err
		}
		for j, q := range part {
			for i := 0; i < rows; i++ {
				if err := checkSum(c, q, i, sums[j*rows+i]); err != nil {
					return fmt.Errorf("%w: %v at dimension %d, team %d, query %d of %d, row %d: %v", ErrFailed, prec, dim, g.single.Team, j, len(part), i, err)
				}
			}
		}
		want, _, err := exact.ExactSearchBatch(ctx, view, c, qs[:len(part)], 10, m, 1, false)
		if err != nil {
			return err
		}
		got, _, err := exact.ExactSearchSums(ctx, view, c, qs[:len(part)], exact.DeviceSums{Sums: sums, Rows: rows}, scans, 10, m, 1, false)
		if err != nil {
			return err
		}
		if !slices.EqualFunc(want, got, func(a, b []core.Hit) bool { return slices.Equal(a, b) }) {
			return fmt.Errorf("%w: %v exact search at dimension %d, metric %v from the device's sums differs from the CPU's", ErrFailed, prec, dim, m)
		}
	}
	return nil
}

// checkSum checks one raw sum of row i against the device query q (its
// words as float32 bits).
func checkSum(c *exact.Compressed, q []float32, i int, got float32) error {
	if c.Prec == core.Int8 {
		var want int32
		for j := 0; j < c.Stride; j++ {
			code := int32(c.U8[i*c.Stride+j]) - 128
			qb := int8(math.Float32bits(q[j/4]) >> (8 * (j % 4)))
			want += code * int32(qb)
		}
		if s := int32(math.Float32bits(got)); s != want {
			return fmt.Errorf("sum %d, want %d", s, want)
		}
		return nil
	}
	var want, mag float64
	for j := 0; j < c.Stride; j++ {
		x := float64(halfToFloat(c.F16[i*c.Stride+j]))
		want += x * float64(q[j])
		mag += math.Abs(x * float64(q[j]))
	}
	if math.Abs(float64(got)-want) > 1e-5*math.Max(1, mag) {
		return fmt.Errorf("sum %g, want %g", got, want)
	}
	return nil
}

// halfToFloat widens an IEEE half.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	e := uint32(h>>10) & 0x1f
	m := uint32(h) & 0x3ff
	switch {
	case e == 0:
		f := float32(m) / (1 << 24)
		if sign != 0 {
			return -f
		}
		return f
	case e == 31:
		return math.Float32frombits(sign | 0x7f800000 | m<<13)
	}
	return math.Float32frombits(sign | (e+112)<<23 | m<<13)
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

// specsOf lists the pipelines every index of each of ps would use; the
// variant in use does not change.
func (d *Device) specsOf(ps []Prepared) []gpuplan.PipeSpec {
	keep := d.Variant()
	defer d.SetVariant(keep)
	var specs []gpuplan.PipeSpec
	for _, p := range ps {
		if d.SetVariant(p.Variant) != nil {
			continue
		}
		g, err := d.planIndex(p.Stride, p.Metric, p.Prec, 128)
		if err != nil {
			continue
		}
		if sp, err := g.specs(); err == nil {
			specs = append(specs, sp...)
		}
	}
	return specs
}

// Precompile builds the pipelines every index of each of ps would use,
// all at once (an API that can, such as a browser's, builds them in
// parallel), so that later NewIndex calls find them built. The variant
// in use does not change. It returns the first compile error; the
// pipelines that compiled are kept either way.
func (d *Device) Precompile(ps []Prepared) error {
	specs := d.specsOf(ps)
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.build(specs...)
	return err
}

// CountNew counts the pipelines of ps that Precompile would build: those
// not built yet, each once.
func (d *Device) CountNew(ps []Prepared) int {
	specs := d.specsOf(ps)
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[string]bool{}
	for _, sp := range specs {
		if !d.built[sp.Key()] {
			seen[sp.Key()] = true
		}
	}
	return len(seen)
}
