package shaders

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/umbravec/umbra/internal/core"
)

//go:embed gather.wgsl
var gatherSource string

var gatherTemplate = assemble("gather.wgsl", gatherSource)

// GatherBindings is gather.wgsl's bind group layout: scores.wgsl's and
// the list of rows.
var GatherBindings = []Binding{{0, ReadOnlyStorage}, {1, ReadOnlyStorage}, {2, Storage}, {3, Uniform}, {4, ReadOnlyStorage}}

// Gather returns the WGSL source of gather.wgsl for the team and rows of
// scores layout l (a float32 single-query layout: its Dim4, Team, Rows and
// metric; the reduction is always team_sum's tree, which gives the
// shuffles' bits).
func Gather(l ScoresLayout) (string, error) {
	if l.Prec != core.F32 || l.RM != 0 || l.Team == 0 || l.Rows == 0 || l.Dim4 == 0 {
		return "", fmt.Errorf("shaders: gather.wgsl takes a float32 scores layout, not %+v", l)
	}
	var b strings.Builder
	err := gatherTemplate.Execute(&b, map[string]any{"Dim4": l.Dim4, "Team": l.Team, "Rows": l.Rows,
		"Workgroup": l.Team * l.Rows, "L2": l.L2})
	return b.String(), err
}

// GatherLayout is the single-query layout gather.wgsl is compiled for:
// l's shape without the subgroup variant or staged queries, which change
// no bits.
func GatherLayout(l ScoresLayout) ScoresLayout {
	return ScoresLayout{Dim4: l.Dim4, Team: l.Team, Rows: l.Rows, QT: 1, L2: l.L2}
}
