package shaders

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
)

func TestPlanScores(t *testing.T) {
	cases := []struct {
		stride         int
		team, rows, qt uint32
	}{
		{4, 1, 256, 8},   // dim 1..4: one vec4 per row, a lane per row
		{128, 32, 8, 8},  // dim 127
		{768, 64, 4, 8},  // dim 768
		{1536, 64, 4, 8}, // dim 1536
		{20, 8, 32, 8},   // 5 vec4 round up to a team of 8
	}
	for _, c := range cases {
		l, err := PlanScores(c.stride, core.Dot, 8, Target{MaxInvocations: 1024, MaxWorkgroupBytes: 32768})
		require.NoError(t, err)
		assert.Equal(t, c.team, l.Team, "stride %d", c.stride)
		assert.Equal(t, c.rows, l.Rows, "stride %d", c.stride)
		assert.Equal(t, c.qt, l.QT, "stride %d", c.stride)
		assert.Equal(t, uint32(256), l.Workgroup())
	}
	// WebGPU's default 16 KiB of workgroup memory holds the partial sums of
	// 16 queries × 256 invocations × 4 bytes, so a request for 32 halves.
	l, err := PlanScores(768, core.L2, 32, Target{MaxInvocations: 256, MaxWorkgroupBytes: 16384})
	require.NoError(t, err)
	assert.Equal(t, uint32(16), l.QT)
	l, err = PlanScores(768, core.Dot, 1, Target{MaxInvocations: 128})
	require.NoError(t, err)
	assert.Equal(t, uint32(128), l.Workgroup(), "a device capped at 128 invocations")

	l, err = PlanScores(768, core.Dot, 1, Target{MaxTeam: 8})
	require.NoError(t, err)
	assert.Equal(t, uint32(8), l.Team, "a device tuned to teams of 8")
	assert.Equal(t, uint32(32), l.Rows)

	staged, err := PlanScores(768, core.Dot, 8, Target{MaxInvocations: 256, MaxWorkgroupBytes: 16384, StageQueries: true})
	require.NoError(t, err)
	assert.Equal(t, uint32(64), staged.Slice, "8 KiB left after the partial sums: 64 vec4 of 8 queries")
	src, err := Scores(staged)
	require.NoError(t, err)
	assert.Contains(t, src, "var<workgroup> qtile: array<vec4<f32>, 512>;")
	single, err := PlanScores(768, core.Dot, 1, Target{StageQueries: true})
	require.NoError(t, err)
	assert.Zero(t, single.Slice, "one query is never staged")

	_, err = PlanScores(6, core.Dot, 1, Target{})
	assert.ErrorContains(t, err, "not a positive multiple of 4")
	_, err = PlanScores(8, 7, 1, Target{})
	assert.ErrorContains(t, err, "unknown metric")
}

func TestSourcesHaveNoHoles(t *testing.T) {
	for _, sg := range []bool{false, true} {
		l, err := PlanScores(768, core.L2, 8, Target{MaxInvocations: 256, MaxWorkgroupBytes: 16384})
		require.NoError(t, err)
		l.Subgroups = sg
		src, err := Scores(l)
		require.NoError(t, err)
		assert.NotContains(t, src, "{{")
		assert.Contains(t, src, "const DIM4: u32 = 192u;")
		assert.Contains(t, src, "const L2: bool = true;")
		assert.Equal(t, sg, strings.Contains(src, "subgroupShuffleXor"))
	}
	src, err := Select(core.Dot)
	require.NoError(t, err)
	assert.NotContains(t, src, "{{")
	for _, entry := range []string{"fn hist(", "fn scan(", "fn compact("} {
		assert.Contains(t, src, entry)
	}
	_, err = Scores(ScoresLayout{Dim4: 4, Team: 3, Rows: 1, QT: 1})
	assert.Error(t, err, "a team must be a power of two")
	_, err = Select(5)
	assert.Error(t, err)
}

func TestTopKPlans(t *testing.T) {
	l, err := PlanScores(768, core.Dot, 1, Target{MaxInvocations: 256, MaxWorkgroupBytes: 16384})
	require.NoError(t, err)
	plans := TopKPlans(l, 16384)
	require.Len(t, plans, 2)
	assert.Equal(t, uint32(64), plans[0].Cap, "4 rows × 4 a step: 64 slots hold k up to 48")
	assert.Equal(t, 48, plans[0].MaxK())
	assert.Equal(t, uint32(512), plans[1].Cap)
	assert.Equal(t, FusedMaxK, plans[1].MaxK(), "one query reaches the limit in 16 KiB")
	b, err := PlanScores(768, core.Dot, 8, Target{MaxInvocations: 256, MaxWorkgroupBytes: 16384})
	require.NoError(t, err)
	plans = TopKPlans(b, 16384)
	require.Len(t, plans, 1, "8 queries' slots leave room for one plan in 16 KiB")
	assert.Equal(t, uint32(64), plans[0].Cap)
	assert.LessOrEqual(t, plans[0].WorkgroupBytes(), uint32(16384), "a batch plan fits the budget")
	plans = TopKPlans(b, 49152)
	require.Len(t, plans, 2)
	assert.Equal(t, FusedMaxK, plans[1].MaxK(), "48 KiB holds 8 queries at the limit")
	tiny, err := PlanScores(4, core.Dot, 8, Target{MaxInvocations: 256, MaxWorkgroupBytes: 16384})
	require.NoError(t, err)
	assert.Empty(t, TopKPlans(tiny, 16384), "256 rows a step of 8 queries do not fit 16 KiB")

	src, err := TopK(TopKLayout{Scores: l, RM: 4, Cap: 64})
	require.NoError(t, err)
	assert.NotContains(t, src, "{{")
	assert.Contains(t, src, "fn scan(")
	assert.NotContains(t, src, "fn merge(")
	src, err = MergeTopK(core.L2)
	require.NoError(t, err)
	assert.NotContains(t, src, "{{")
	assert.Contains(t, src, "fn merge(")
	assert.Contains(t, src, "const L2: bool = true;")
	_, err = TopK(TopKLayout{Scores: l, RM: 4, Cap: 16})
	assert.Error(t, err, "fewer slots than one step's rows")
	_, err = MergeTopK(9)
	assert.Error(t, err)
}

// TestFragmentsAreWrittenOnce: the ordering rule, the Params uniform and
// the metric constant are written once, in common.wgsl, and every shader
// that needs one gets exactly one copy when it is assembled. (That every
// assembled variant compiles is internal/gpu's TestEveryShaderCompiles,
// which needs a device.)
func TestFragmentsAreWrittenOnce(t *testing.T) {
	sources := map[string]string{"common.wgsl": commonSource, "scores.wgsl": scoresSource, "select.wgsl": selectSource,
		"quant.wgsl": quantSource, "topk.wgsl": topkSource, "read.wgsl": Read}
	for _, decl := range []string{"fn order_key(", "struct Params {", "const L2: bool"} {
		var in []string
		for name, src := range sources {
			for range strings.Count(src, decl) {
				in = append(in, name)
			}
		}
		assert.Equal(t, []string{"common.wgsl"}, in, "%q is declared in", decl)
	}

	single, err := PlanScores(768, core.Cosine, 1, Target{})
	require.NoError(t, err)
	batch, err := PlanScores(768, core.L2, 8, Target{StageQueries: true})
	require.NoError(t, err)
	batch.Subgroups = true
	quant := single
	quant.Prec = core.Int8
	assembled := map[string]func() (string, error){
		"scores":        func() (string, error) { return Scores(single) },
		"scores, batch": func() (string, error) { return Scores(batch) },
		"quant":         func() (string, error) { return Scores(quant) },
		"select":        func() (string, error) { return Select(core.Dot) },
		"fused scan":    func() (string, error) { return TopK(TopKPlans(single, 0)[0]) },
		"fused merge":   func() (string, error) { return MergeTopK(core.L2) },
	}
	want := map[string][]string{
		"scores": {"struct Params {", "const L2: bool = false;"}, "scores, batch": {"struct Params {", "const L2: bool = true;"},
		"quant":       {"struct Params {"},
		"select":      {"fn order_key(", "const L2: bool = false;"},
		"fused scan":  {"fn order_key(", "struct Params {", "const L2: bool = false;"},
		"fused merge": {"fn order_key(", "const L2: bool = true;"},
	}
	for name, build := range assembled {
		src, err := build()
		require.NoError(t, err, name)
		assert.NotContains(t, src, "{{", name)
		for _, decl := range []string{"fn order_key(", "struct Params {", "const L2: bool"} {
			n := 0
			for _, w := range want[name] {
				if strings.HasPrefix(w, decl) {
					n = 1
					assert.Contains(t, src, w, name)
				}
			}
			assert.Equal(t, n, strings.Count(src, decl), "%s: copies of %q", name, decl)
		}
	}
	// Cosine and Dot are one compiled layout.
	dot, err := PlanScores(768, core.Dot, 1, Target{})
	require.NoError(t, err)
	assert.Equal(t, single, dot)
}
