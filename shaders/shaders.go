package shaders

import (
	_ "embed"
	"fmt"
	"strings"
	"text/template"
)

//go:embed scores.wgsl
var scoresSource string

//go:embed select.wgsl
var selectSource string

// Read is the WGSL source of the bandwidth-floor shader (read.wgsl): it
// has no constants to fill in.
//
//go:embed read.wgsl
var Read string

// ReadGroups is the number of workgroups a read.wgsl dispatch uses: enough
// to saturate a large GPU's memory system, each striding over the chunk.
const ReadGroups = 4096

var (
	scoresTemplate = template.Must(template.New("scores.wgsl").Option("missingkey=error").Parse(scoresSource))
	selectTemplate = template.Must(template.New("select.wgsl").Option("missingkey=error").Parse(selectSource))
)

// SelectWorkgroup is the invocation count of the select shader's hist and
// compact entry points; StateBytes is the size of one query's select state.
const (
	SelectWorkgroup = 256
	StateBytes      = 9*4 + 256*4
)

// Metric codes understood by the shaders.
const (
	MetricDot = 0 // dot product; cosine is dot over normalised vectors
	MetricL2  = 1 // squared Euclidean distance
)

// ScoresLayout is the shape of one compiled scores shader: how many vec4 a
// row holds, how many invocations share a row, and how many rows one
// workgroup scores.
type ScoresLayout struct {
	Dim4   uint32 // stride / 4
	Team   uint32 // invocations per row, a power of two
	Rows   uint32 // rows per workgroup
	QT     uint32 // queries scored per pass over a row
	Metric uint32 // MetricDot or MetricL2
	// Subgroups selects the reduction by subgroup shuffles; it needs the
	// device's native subgroup feature.
	Subgroups bool
	// Slice, when non-zero, stages the QT queries in workgroup memory
	// Slice vec4 at a time (batch layouts only).
	Slice uint32
}

// Workgroup is the number of invocations in one workgroup.
func (l ScoresLayout) Workgroup() uint32 { return l.Team * l.Rows }

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
func PlanScores(stride int, metric uint32, qt uint32, t Target) (ScoresLayout, error) {
	if stride <= 0 || stride%4 != 0 {
		return ScoresLayout{}, fmt.Errorf("shaders: stride %d is not a positive multiple of 4", stride)
	}
	if metric != MetricDot && metric != MetricL2 {
		return ScoresLayout{}, fmt.Errorf("shaders: unknown metric code %d", metric)
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
	l := ScoresLayout{Dim4: dim4, Team: team, Rows: wg / team, QT: qt, Metric: metric}
	if qt > 1 && t.StageQueries {
		// The query slice gets the workgroup memory the partial sums
		// leave, as a power of two no wider than the row.
		left := (maxBytes - qt*wg*4) / (qt * 16)
		slice := uint32(1)
		for slice*2 <= left && slice < dim4 {
			slice *= 2
		}
		if slice >= 4 {
			l.Slice = slice
		}
	}
	return l, nil
}

// Scores returns the WGSL source of the scores shader for layout l.
func Scores(l ScoresLayout) (string, error) {
	if l.Team == 0 || l.Team&(l.Team-1) != 0 || l.Rows == 0 || l.Dim4 == 0 || l.QT == 0 {
		return "", fmt.Errorf("shaders: invalid scores layout %+v", l)
	}
	var b strings.Builder
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

// Select returns the WGSL source of the top-k select shader (entry points
// hist, scan and compact) for metric.
func Select(metric uint32) (string, error) {
	if metric != MetricDot && metric != MetricL2 {
		return "", fmt.Errorf("shaders: unknown metric code %d", metric)
	}
	var b strings.Builder
	if err := selectTemplate.Execute(&b, struct{ Metric uint32 }{metric}); err != nil {
		return "", fmt.Errorf("shaders: %w", err)
	}
	return b.String(), nil
}
