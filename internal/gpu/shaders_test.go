//go:build cgo && !nogpu

package gpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/shaders"
)

// TestEveryShaderCompiles compiles, on a working device, every variant
// package shaders assembles from its sources and common.wgsl's fragments:
// each metric and precision, gemm.wgsl at every team width, the single
// and batch scores layouts (tree and, where the device has the feature,
// subgroup reductions; staged queries),
// every fused plan and both merges, both selects, and read.wgsl. A fragment
// that does not fit one of the shaders that place it fails here by name,
// not in a probe's self-test (which compiles only the variant it chose).
func TestEveryShaderCompiles(t *testing.T) {
	d := softwareDevice(t)
	d.mu.Lock()
	defer d.mu.Unlock()
	type variant struct {
		name    string
		src     string
		bs      []shaders.Binding
		entries []string
	}
	var vs []variant
	seen := map[string]bool{} // Cosine and Dot assemble the same source
	add := func(name string, src string, err error, entries ...string) {
		t.Helper()
		require.NoError(t, err, name)
		bs := shaders.ScoresBindings
		switch {
		case strings.HasPrefix(name, "select"):
			bs = shaders.SelectBindings
		case strings.HasPrefix(name, "merge"):
			bs = shaders.MergeBindings
		case strings.HasPrefix(name, "fused"):
			bs = shaders.FusedBindings
		case name == "read":
			bs = shaders.ReadBindings
		}
		if !seen[src] {
			seen[src] = true
			vs = append(vs, variant{name, src, bs, entries})
		}
	}
	target := shaders.Target{MaxInvocations: d.lim.MaxInvocations, MaxWorkgroupBytes: d.lim.MaxWorkgroupBytes}
	for _, m := range []core.Metric{core.Cosine, core.Dot, core.L2} {
		src, err := shaders.Select(m)
		add(fmt.Sprintf("select %v", m), src, err, "hist", "scan", "compact", "sort")
		src, err = shaders.MergeTopK(m)
		add(fmt.Sprintf("merge %v", m), src, err, "merge")
		for _, stride := range []int{4, 768} {
			for _, team := range shaders.TeamCandidates {
				tg := target
				tg.MaxTeam = team
				l, err := shaders.PlanGemm(stride, m, tg)
				require.NoError(t, err)
				src, err := shaders.Scores(l)
				add(fmt.Sprintf("gemm %+v", l), src, err, "main")
			}
			for _, qt := range []uint32{1, 8} {
				for _, staged := range []bool{false, true} {
					tg := target
					tg.StageQueries = staged
					l, err := shaders.PlanScores(stride, m, qt, tg)
					require.NoError(t, err)
					for _, sg := range []bool{false, d.subgroups} {
						l.Subgroups = sg
						src, err := shaders.Scores(l)
						add(fmt.Sprintf("scores %+v", l), src, err, "main")
					}
					l.Subgroups = false
					for _, p := range shaders.TopKPlans(l, d.lim.MaxWorkgroupBytes) {
						src, err := shaders.TopK(p)
						add(fmt.Sprintf("fused scan %+v", p), src, err, "scan")
					}
					if staged {
						continue
					}
					for _, prec := range []core.Precision{core.F16, core.Int8} {
						q := l
						q.Prec = prec
						src, err := shaders.Scores(q)
						add(fmt.Sprintf("quant %+v", q), src, err, "main")
					}
				}
			}
		}
	}
	add("read", shaders.Read, nil, "main")
	for _, v := range vs {
		for _, e := range v.entries {
			_, err := d.api.Pipelines(gpuplan.PipeSpec{Label: v.name, Source: v.src, Entry: e, Layout: "test " + v.name, Bindings: v.bs})
			require.NoError(t, err, "%s does not compile", v.name)
		}
	}
	t.Logf("%d distinct shader variants compiled", len(vs))
}
