package shaders

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
)

// accumulatorStarts finds, in a kernel's source, every float32
// accumulator and the value it starts from: each `var NAME: array<vec4<f32>,
// ...>;` with the right-hand side of its first assignment `NAME[j] = X;`,
// and each `var NAME = X;` of a vec4 accumulator (gemm.wgsl's a<m>_<j>,
// gather.wgsl's acc).
// A compiler may fold an fma whose addend is a compile-time constant zero
// into a product and contract that product with the next add into an fma
// of its own (Vulkan allows both; lavapipe happens not to, NVIDIA's
// compiler may): this is what it would look at.
func accumulatorStarts(src string) map[string]string {
	out := map[string]string{}
	arrays := regexp.MustCompile(`var (acc\w*): array<vec4<f32>, [A-Z0-9]+>;`)
	for _, m := range arrays.FindAllStringSubmatchIndex(src, -1) {
		name := src[m[2]:m[3]]
		first := regexp.MustCompile(regexp.QuoteMeta(name) + `\[j\] = ([^;]+);`).FindStringSubmatch(src[m[1]:])
		start := "its implicit zero (never assigned before use)"
		if first != nil && !strings.Contains(first[1], name) {
			start = first[1] // an assignment, not an accumulation
		}
		out[name] = start
	}
	for _, m := range regexp.MustCompile(`var (a\d+_\d+|acc\w*) = ([^;]+);`).FindAllStringSubmatch(src, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestAccumulatorsStartFromTheUniformZero: every float32 kernel whose
// scores must be the same bits on every path — scores.wgsl in every
// layout (single and batch, staged, subgroup reduction), gemm.wgsl at
// every team, topk.wgsl's fused scan, gather.wgsl — starts each accumulator from the
// zero it reads from the uniform (params._pad0), which no compiler can
// fold, never from a constant. At dimension 7 each lane sums one vec4 by
// one fma: from a constant zero a folding compiler would score such rows
// other bits in scores.wgsl than in gemm.wgsl, and gemm's bit-for-bit
// self-test would fail (and disable it) on that device. Before the fix,
// scores.wgsl's accumulators started from the array's implicit zero and
// topk.wgsl's and gather.wgsl's from vec4<f32>(0.0).
func TestAccumulatorsStartFromTheUniformZero(t *testing.T) {
	const zero = "let zero = vec4<f32>(f32(params._pad0));"
	check := func(name, src string) {
		t.Helper()
		starts := accumulatorStarts(src)
		require.NotEmpty(t, starts, "%s: no accumulator found", name)
		require.True(t, strings.Contains(src, zero), "%s: the zero is not read from the uniform", name)
		for acc, start := range starts {
			require.Equal(t, "zero", start, "%s: accumulator %s starts from %s", name, acc, start)
		}
	}
	target := Target{MaxInvocations: 1024, MaxWorkgroupBytes: 48 << 10}
	n := 0
	for _, m := range []core.Metric{core.Dot, core.L2} {
		for _, stride := range []int{8, 768} {
			for _, team := range TeamCandidates {
				tg := target
				tg.MaxTeam = team
				g, err := PlanGemm(stride, m, tg)
				require.NoError(t, err)
				src, err := Scores(g)
				require.NoError(t, err)
				check(fmt.Sprintf("gemm %+v", g), src)
				for _, qt := range []uint32{1, 8} {
					for _, staged := range []bool{false, true} {
						tg.StageQueries = staged
						l, err := PlanScores(stride, m, qt, tg)
						require.NoError(t, err)
						for _, sg := range []bool{false, true} {
							l.Subgroups = sg
							src, err := Scores(l)
							require.NoError(t, err)
							check(fmt.Sprintf("scores %+v", l), src)
							n++
						}
						l.Subgroups = false
						if qt == 1 && !staged {
							src, err := Gather(GatherLayout(l))
							require.NoError(t, err)
							check(fmt.Sprintf("gather %+v", GatherLayout(l)), src)
							n++
						}
						for _, p := range TopKPlans(l, tg.MaxWorkgroupBytes) {
							src, err := TopK(p)
							require.NoError(t, err)
							check(fmt.Sprintf("topk %+v", p), src)
							n++
						}
					}
				}
			}
		}
	}
	t.Logf("%d kernels checked", n)
	// The finder sees the two faults it is for.
	require.Equal(t, map[string]string{"acc": "its implicit zero (never assigned before use)"},
		accumulatorStarts("var acc: array<vec4<f32>, QT>;\nacc[j] = fma(x, q, acc[j]);"))
	require.Equal(t, map[string]string{"acc0": "vec4<f32>(0.0)"},
		accumulatorStarts("var acc0: array<vec4<f32>, QT>;\nacc0[j] = vec4<f32>(0.0);"))
	require.Equal(t, map[string]string{"acc": "vec4<f32>(0.0)"}, accumulatorStarts("var acc = vec4<f32>(0.0);"))
}
