package shaders

import (
	_ "embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/umbravec/umbra/internal/core"
)

// common.wgsl holds the fragments the other sources share (the ordering
// rule, the Params uniform, the metric constant), as named templates.
//
//go:embed common.wgsl
var commonSource string

//go:embed scores.wgsl
var scoresSource string

//go:embed select.wgsl
var selectSource string

//go:embed quant.wgsl
var quantSource string

//go:embed gemm.wgsl
var gemmSource string

// Read is the WGSL source of the bandwidth-floor shader (read.wgsl): it
// has no constants to fill in.
//
//go:embed read.wgsl
var Read string

// ReadGroups is the number of workgroups a read.wgsl dispatch uses: enough
// to saturate a large GPU's memory system, each striding over the chunk.
const ReadGroups = 4096

var (
	common         = template.Must(template.New("common.wgsl").Option("missingkey=error").Parse(commonSource))
	scoresTemplate = assemble("scores.wgsl", scoresSource)
	selectTemplate = assemble("select.wgsl", selectSource)
	quantTemplate  = assemble("quant.wgsl", quantSource)
	gemmTemplate   = assemble("gemm.wgsl", gemmSource)
	topkTemplate   = assemble("topk.wgsl", topkSource)
)

// assemble parses a shader's source beside common.wgsl's fragments, so
// that {{template "order_key" .}} and its kind place the one definition.
func assemble(name, source string) *template.Template {
	return template.Must(template.Must(common.Clone()).New(name).Parse(source))
}

// SelectWorkgroup is the invocation count of the select shader's hist and
// compact entry points; StateBytes is the size of one query's select state.
const (
	SelectWorkgroup = 256
	StateBytes      = 9*4 + 256*4
)

// ScoresLayout is the shape of one compiled scores shader: how many vec4 a
// row holds, how many invocations share a row, and how many rows one
// workgroup scores.
type ScoresLayout struct {
	Dim4 uint32 // stride / 4
	Team uint32 // invocations per row, a power of two
	Rows uint32 // rows per workgroup
	QT   uint32 // queries scored per pass over a row
	// L2 scores by the squared Euclidean distance, not the dot product
	// (which Cosine and Dot share: cosine is the dot product of rows and
	// a query normalised on the host, so one compiled layout serves both).
	L2 bool
	// Subgroups selects the reduction by subgroup shuffles; it needs the
	// device's native subgroup feature.
	Subgroups bool
	// Slice, when non-zero, stages the QT queries in workgroup memory
	// Slice vec4 at a time (batch layouts only).
	Slice uint32
	// Prec, when not F32, makes the layout quant.wgsl's: rows of
	// compressed codes (F16, two IEEE halves per u32; Int8, four codes per
	// u32, each stored offset by 128), Dim4 vec4<u32> words each, summed
	// against the query without a metric (the tree reduction; no
	// subgroups, no staged queries).
	Prec core.Precision
	// RM, when not 0, makes the layout gemm.wgsl's register tile for
	// batches (PlanGemm): each invocation scores RM rows against QM
	// queries, Rows / RM teams of Team lanes by QT / QM of them make a
	// workgroup, and Pass accumulators meet in workgroup memory at a time.
	RM, QM, Pass uint32
}

// QueryVec4 is how many 16-byte words one query takes in the query
// binding of layout l: a float32 query of a float16 row is twice as long
// as the row's codes.
func (l ScoresLayout) QueryVec4() uint32 {
	if l.Prec == core.F16 {
		return 2 * l.Dim4
	}
	return l.Dim4
}

// Workgroup is the number of invocations in one workgroup.
func (l ScoresLayout) Workgroup() uint32 {
	if l.RM != 0 {
		return l.Team * (l.Rows / l.RM) * (l.QT / l.QM)
	}
	return l.Team * l.Rows
}

// Target is what a layout must fit on one device: its workgroup limits and
// the widest team (invocations per row) worth using there, which the engine
// measures once per device; 0 means the default of 64.
type Target struct {
	MaxInvocations    uint32
	MaxWorkgroupBytes uint32
	MaxTeam           uint32
	// StageQueries gives batch layouts (qt > 1) a slice of the queries in
	// workgroup memory; the engine measures per device whether it pays.
	StageQueries bool
}

// PlanScores picks the layout for rows of stride float32 elements on
// device t. A team is as wide as the row has vec4 words, up to t.MaxTeam,
// so short rows do not leave lanes idle; a workgroup holds 256 invocations
// (fewer where the device caps it). qt is the number of queries scored per
// pass over the slab (1 for single searches; more for batches, bounded by
// the workgroup memory the partial sums need: qt × 256 × 4 bytes must fit
// in t.MaxWorkgroupBytes).
func PlanScores(stride int, metric core.Metric, qt uint32, t Target) (ScoresLayout, error) {
	if stride <= 0 || stride%4 != 0 {
		return ScoresLayout{}, fmt.Errorf("shaders: stride %d is not a positive multiple of 4", stride)
	}
	if err := checkMetric(metric); err != nil {
		return ScoresLayout{}, err
	}
	wg := uint32(256)
	if t.MaxInvocations != 0 && t.MaxInvocations < wg {
		wg = t.MaxInvocations
	}
	maxTeam := t.MaxTeam
	if maxTeam == 0 {
		maxTeam = 64
	}
	dim4 := uint32(stride / 4)
	team := uint32(1)
	for team < dim4 && team < maxTeam && team*2 <= wg {
		team *= 2
	}
	if qt == 0 {
		qt = 1
	}
	maxBytes := t.MaxWorkgroupBytes
	if maxBytes == 0 {
		maxBytes = 16384
	}
	for qt > 1 && qt*wg*4 > maxBytes {
		qt /= 2
	}
	l := ScoresLayout{Dim4: dim4, Team: team, Rows: wg / team, QT: qt, L2: metric == core.L2}
	if qt > 1 && t.StageQueries {
		// The query slice gets the workgroup memory the partial sums
		// leave, as a power of two no wider than the row.
		left := (maxBytes - qt*wg*4) / (qt * 16)
		slice := uint32(1)
		for slice*2 <= left && slice < dim4 {
			slice *= 2
		}
		// A slice of fewer words than the team would hand lane i other
		// words than i, i+Team, ... (another summation order than the
		// single-query and fused paths'): then nothing is staged.
		if slice >= 4 && (slice >= team || slice >= dim4) {
			l.Slice = slice
		}
	}
	return l, nil
}

// Register tiles of gemm.wgsl: each invocation holds GemmRows rows ×
// GemmQueries queries of accumulators (16 vec4, 64 floats), and a
// workgroup spans up to GemmTile queries, so it reads its rows once per
// GemmTile queries.
const (
	GemmRows    = 4
	GemmQueries = 4
	GemmTile    = 32
)

// PlanGemm picks gemm.wgsl's layout for batches of rows of stride float32
// elements on device t: the team PlanScores gives a single query (so the
// scores are the same bits), GemmTile / GemmQueries query teams where the
// workgroup's invocations allow (fewer for wide teams), as many row teams
// as fill the rest, and the accumulators reduced as many at a time as
// t.MaxWorkgroupBytes holds.
func PlanGemm(stride int, metric core.Metric, t Target) (ScoresLayout, error) {
	l, err := PlanScores(stride, metric, 1, t)
	if err != nil {
		return ScoresLayout{}, err
	}
	wg := uint32(256)
	if t.MaxInvocations != 0 && t.MaxInvocations < wg {
		wg = t.MaxInvocations
	}
	tq := max(min(GemmTile/GemmQueries, wg/l.Team), 1)
	tr := max(wg/(l.Team*tq), 1)
	l.RM, l.QM = GemmRows, GemmQueries
	l.Rows, l.QT = tr*GemmRows, tq*GemmQueries
	maxBytes := t.MaxWorkgroupBytes
	if maxBytes == 0 {
		maxBytes = 16384
	}
	l.Pass = GemmRows * GemmQueries
	for l.Pass > 1 && l.Pass*l.Workgroup()*4 > maxBytes {
		l.Pass /= 2
	}
	return l, nil
}

// gemmAcc is one accumulator of gemm.wgsl's tile: row M, query J, and
// its slot in workgroup memory within its round.
type gemmAcc struct{ M, J, Slot uint32 }

// gemm returns gemm.wgsl's source for layout l.
func gemm(l ScoresLayout) (string, error) {
	if l.QM == 0 || l.Pass == 0 || l.Rows%l.RM != 0 || l.QT%l.QM != 0 || (l.RM*l.QM)%l.Pass != 0 ||
		l.Subgroups || l.Slice != 0 || l.Prec != core.F32 {
		return "", fmt.Errorf("shaders: invalid gemm layout %+v", l)
	}
	type round struct {
		First, Last uint32
		Accs        []gemmAcc
	}
	var ms, js []uint32
	var accs []gemmAcc
	for m := range l.RM {
		ms = append(ms, m)
	}
	for j := range l.QM {
		js = append(js, j)
	}
	var rounds []round
	for m := range l.RM {
		for j := range l.QM {
			a := gemmAcc{M: m, J: j, Slot: uint32(len(accs)) % l.Pass}
			if a.Slot == 0 {
				rounds = append(rounds, round{First: uint32(len(accs))})
			}
			r := &rounds[len(rounds)-1]
			r.Accs, r.Last = append(r.Accs, a), uint32(len(accs))
			accs = append(accs, a)
		}
	}
	var b strings.Builder
	err := gemmTemplate.Execute(&b, struct {
		ScoresLayout
		Workgroup, Partial, TR uint32
		Ms, Js                 []uint32
		Accs                   []gemmAcc
		Rounds                 []round
	}{l, l.Workgroup(), l.Pass * l.Workgroup(), l.Rows / l.RM, ms, js, accs, rounds})
	if err != nil {
		return "", fmt.Errorf("shaders: %w", err)
	}
	return b.String(), nil
}

// Scores returns the WGSL source of the scores shader for layout l.
func Scores(l ScoresLayout) (string, error) {
	if l.Team == 0 || l.Team&(l.Team-1) != 0 || l.Rows == 0 || l.Dim4 == 0 || l.QT == 0 {
		return "", fmt.Errorf("shaders: invalid scores layout %+v", l)
	}
	if l.RM != 0 {
		return gemm(l)
	}
	if l.Slice != 0 && l.Slice%l.Team != 0 && l.Slice < l.Dim4 {
		return "", fmt.Errorf("shaders: invalid scores layout %+v: a staged slice narrower than the team changes the summation order", l)
	}
	var b strings.Builder
	if l.Prec != core.F32 {
		if l.Prec != core.F16 && l.Prec != core.Int8 || l.Subgroups || l.Slice != 0 {
			return "", fmt.Errorf("shaders: invalid compressed scores layout %+v", l)
		}
		err := quantTemplate.Execute(&b, struct {
			ScoresLayout
			Workgroup uint32
			Partial   uint32
			Int8      bool
		}{l, l.Workgroup(), l.QT * l.Workgroup(), l.Prec == core.Int8})
		if err != nil {
			return "", fmt.Errorf("shaders: %w", err)
		}
		return b.String(), nil
	}
	err := scoresTemplate.Execute(&b, struct {
		ScoresLayout
		Workgroup uint32
		Partial   uint32
		QTile     uint32
	}{l, l.Workgroup(), l.QT * l.Workgroup(), l.QT * l.Slice})
	if err != nil {
		return "", fmt.Errorf("shaders: %w", err)
	}
	return b.String(), nil
}

// checkMetric refuses a metric no shader knows.
func checkMetric(m core.Metric) error {
	if m != core.Cosine && m != core.Dot && m != core.L2 {
		return fmt.Errorf("shaders: unknown metric %v", m)
	}
	return nil
}

// Select returns the WGSL source of the top-k select shader (entry points
// hist, scan and compact) for metric.
func Select(metric core.Metric) (string, error) {
	if err := checkMetric(metric); err != nil {
		return "", err
	}
	var b strings.Builder
	if err := selectTemplate.Execute(&b, struct{ L2 bool }{metric == core.L2}); err != nil {
		return "", fmt.Errorf("shaders: %w", err)
	}
	return b.String(), nil
}

//go:embed topk.wgsl
var topkSource string

// FusedMaxK is the largest k the fused scan-and-select (topk.wgsl) takes;
// larger k goes to the radix select. 256 keeps a single query's candidate
// slots (the next power of two above k plus one step of rows: 512 slots of
// 8 bytes, 4 KiB) and the merge's (512 slots, 4 KiB) well inside WebGPU's
// guaranteed 16 KiB of workgroup memory, and bounds the candidates the
// merge reads (lists × k) to what one workgroup per query merges in a few
// dozen steps. Batches need QT times the slots, so on a device with less
// workgroup memory their limit is lower (TopKPlan).
const FusedMaxK = 256

// MergeWorkgroup is the invocation count of topk.wgsl's merge, and
// MergeCap its candidate slots: room for FusedMaxK kept and one step of
// MergeWorkgroup offered.
const (
	MergeWorkgroup = 256
	MergeCap       = 512
)

// TopKLayout is one compiled fused scan: the scores layout it scores rows
// with (its team and rows per workgroup, QT queries per pass; the tree
// reduction, no staged queries), RM rows per team per step (one reduction
// tree, and its barriers, serves RM rows) and Cap candidate slots per
// query.
type TopKLayout struct {
	Scores ScoresLayout
	RM     uint32
	Cap    uint32
}

// Step is the rows one step of the fused scan scores: at most that many
// candidates per query enter the slots between two checks.
func (l TopKLayout) Step() uint32 { return l.Scores.Rows * l.RM }

// WorkgroupBytes is the workgroup memory the fused scan needs.
func (l TopKLayout) WorkgroupBytes() uint32 {
	qt := l.Scores.QT
	return l.RM*qt*l.Scores.Workgroup()*4 + qt*l.Cap*8 + qt*12 + 4
}

// MaxK is the largest k the layout keeps: a step offers at most Step
// candidates per query on top of the k kept, never past Cap.
func (l TopKLayout) MaxK() int {
	return int(min(l.Cap-l.Step(), FusedMaxK))
}

// fusedRM is how many rows a team scores per step: 4 for one query (its
// partial sums stay at 4 KiB), 1 for a batch tile (QT accumulators already).
func fusedRM(qt uint32) uint32 {
	if qt > 1 {
		return 1
	}
	return 4
}

func nextPow2(x uint32) uint32 {
	p := uint32(1)
	for p < x {
		p *= 2
	}
	return p
}

// TopKPlans returns the fused layouts worth compiling for scores layout l
// on a device with maxBytes of workgroup memory (0: WebGPU's 16 KiB),
// smallest first: a small one for small k (a cheap sort per cut) and one
// for k up to FusedMaxK, or the largest that fits. None when not even the
// small one fits (the radix select then serves every k).
func TopKPlans(l ScoresLayout, maxBytes uint32) []TopKLayout {
	if maxBytes == 0 {
		maxBytes = 16384
	}
	rm := fusedRM(l.QT)
	small := TopKLayout{Scores: l, RM: rm, Cap: max(64, nextPow2(l.Rows*rm+32))}
	if small.WorkgroupBytes() > maxBytes {
		return nil
	}
	big := TopKLayout{Scores: l, RM: rm, Cap: nextPow2(l.Rows*rm + FusedMaxK)}
	for big.Cap > small.Cap && big.WorkgroupBytes() > maxBytes {
		big.Cap /= 2
	}
	if big.Cap == small.Cap {
		return []TopKLayout{small}
	}
	return []TopKLayout{small, big}
}

// TopK returns the WGSL source of the fused scan (entry point scan) for l.
func TopK(l TopKLayout) (string, error) {
	s := l.Scores
	if s.Team == 0 || s.Team&(s.Team-1) != 0 || s.Rows == 0 || s.Dim4 == 0 || s.QT == 0 || l.RM == 0 ||
		l.Cap&(l.Cap-1) != 0 || l.Cap <= l.Step() {
		return "", fmt.Errorf("shaders: invalid top-k layout %+v", l)
	}
	ms := make([]uint32, l.RM) // the rows of a step, unrolled in the source
	for m := range ms {
		ms[m] = uint32(m)
	}
	return execTopK(map[string]any{"Merge": false, "L2": s.L2, "QT": s.QT, "Workgroup": s.Workgroup(),
		"Cap": l.Cap, "Keep": s.QT * l.Cap, "Dim4": s.Dim4, "Team": s.Team, "Rows": s.Rows, "RM": l.RM,
		"Ms": ms, "Partial": l.RM * s.QT * s.Workgroup()})
}

// MergeTopK returns the WGSL source of the fused path's merge (entry point
// merge) for metric.
func MergeTopK(metric core.Metric) (string, error) {
	if err := checkMetric(metric); err != nil {
		return "", err
	}
	return execTopK(map[string]any{"Merge": true, "L2": metric == core.L2, "QT": 1, "Workgroup": MergeWorkgroup,
		"Cap": MergeCap, "Keep": MergeCap})
}

func execTopK(data map[string]any) (string, error) {
	var b strings.Builder
	if err := topkTemplate.Execute(&b, data); err != nil {
		return "", fmt.Errorf("shaders: %w", err)
	}
	return b.String(), nil
}
