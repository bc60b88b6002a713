package bench

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
)

// testSeed is logged so a failure can be replayed.
func testSeed(t testing.TB) uint64 {
	s := uint64(time.Now().UnixNano())
	t.Logf("seed %d", s)
	return s
}

func TestParseTiers(t *testing.T) {
	ts, err := ParseTiers("list, fallback,LIST")
	require.NoError(t, err)
	assert.Equal(t, []Tier{TierFallback, TierList}, ts, "report order, no duplicates")
	ts, err = ParseTiers("all")
	require.NoError(t, err)
	assert.Equal(t, AllTiers, ts)
	_, err = ParseTiers("fallback,warp")
	assert.ErrorContains(t, err, `unknown tier "warp"`)
	_, err = ParseTiers(" , ")
	assert.ErrorContains(t, err, "no tier")
	for _, tr := range AllTiers {
		assert.NotEmpty(t, tr.Premise(), tr)
		assert.Equal(t, tr != TierFallback, tr.GPU(), tr)
	}
}

func TestCheckValues(t *testing.T) {
	assert.NoError(t, CheckValues([]float32{1, 0, 0, 2}, 2, engine.Cosine, "data"))
	assert.EqualError(t, CheckValues([]float32{1, 0, 0, float32(math.Inf(-1))}, 2, engine.Dot, "data"),
		"data row 1, column 1 is -Inf")
	assert.EqualError(t, CheckValues([]float32{1, 0, 0, 0}, 2, engine.Cosine, "--queries"),
		"--queries row 1 is all zeros, which has no cosine")
	assert.NoError(t, CheckValues([]float32{1, 0, 0, 0}, 2, engine.L2, "data"), "a zero row is fine under L2")
}

func TestWorkloadLayouts(t *testing.T) {
	w := RandomWorkload(50, 7, 3, testSeed(t))
	require.Equal(t, 50, w.N())
	require.Len(t, w.Queries, 3)
	for i, row := range w.Rows() {
		assert.Equal(t, w.Data[i*7:(i+1)*7], row)
		assert.NotSame(t, &w.Data[i*7], &row[0], "rows are copies, not views")
	}
	for _, x := range w.Data {
		require.True(t, x >= -1 && x < 1)
	}
	assert.Equal(t, RandomMatrix(4, 3, 9, 1), RandomMatrix(4, 3, 9, 1), "same seed, same data")
}

func TestRunCPU(t *testing.T) {
	w := RandomWorkload(1500, 48, 3, testSeed(t))
	for _, m := range []engine.Metric{engine.Cosine, engine.Dot, engine.L2} {
		t.Run(m.String(), func(t *testing.T) {
			rep, err := Run(context.Background(), w, Options{K: 5, Repeat: 2, Runs: 3, Warmup: 1, Tiers: AllTiers,
				Metric: m, Device: engine.CPU, Breakdown: true, Reps: 2})
			require.NoError(t, err)
			assert.True(t, rep.Pass, rep.Verdict)
			assert.Contains(t, rep.Verdict, "PASS")
			require.Len(t, rep.Tiers, len(AllTiers))
			fb := rep.Tiers[0]
			require.True(t, fb.Ran())
			assert.Len(t, fb.GroupsMS, 3)
			assert.Equal(t, Median(fb.GroupsMS), *fb.MedianMS)
			assert.Nil(t, fb.SpeedupVsFallback)
			assert.LessOrEqual(t, *fb.MaxAbsDiff, rep.Threshold)
			assert.True(t, *fb.TopKMatch)
			for _, tr := range rep.Tiers[1:] {
				assert.True(t, tr.Skipped, tr.Name)
				assert.Equal(t, "not used with --device cpu", tr.SkipReason)
			}
			assert.Nil(t, rep.Adapter)
			bd := rep.Breakdown
			require.NotNil(t, bd)
			assert.Equal(t, "list", bd.Tier)
			assert.Equal(t, "cpu", bd.Backend)
			assert.Greater(t, bd.MarshalMS, 0.0)
			assert.Greater(t, bd.KernelMS, 0.0)
			var sum float64
			for _, p := range bd.Percent {
				sum += p
			}
			assert.InDelta(t, 100, sum, 1e-6, "stages and other add up to end to end")
		})
	}
}

// TestRunGPU runs every tier on whatever adapter the engine finds (lavapipe
// in CI), with chunks small enough that the data spans three of them.
func TestRunGPU(t *testing.T) {
	w := RandomWorkload(1500, 40, 2, testSeed(t))
	rep, err := Run(context.Background(), w, Options{K: 7, Repeat: 1, Runs: 2, Tiers: AllTiers,
		Device: engine.GPU, MaxChunkRows: 512, Breakdown: true, Reps: 2})
	require.NoError(t, err)
	if rep.Adapter == nil {
		if os.Getenv("UMBRA_REQUIRE_GPU") == "1" {
			t.Fatal("UMBRA_REQUIRE_GPU=1 but no usable GPU adapter: " + rep.GPUReason)
		}
		t.Skip("no usable GPU adapter: " + rep.GPUReason)
	}
	assert.True(t, rep.Pass, rep.Verdict)
	assert.Equal(t, 3, rep.Chunks)
	assert.Equal(t, 512, rep.ChunkRows)
	// GPU timestamps where the adapter writes them inside passes (lavapipe
	// and llvmpipe do), else the wall clock.
	assert.Contains(t, []string{"gpu", "wall"}, rep.KernelClock)
	for _, tr := range rep.Tiers {
		require.True(t, tr.Ran(), "%s: %s", tr.Name, tr.Error)
		assert.True(t, *tr.Pass, tr.Name)
		if tr.Name != "fallback" {
			require.NotNil(t, tr.SpeedupVsFallback, tr.Name)
			s := tr.SpeedupVsFallback
			assert.True(t, s.Min <= s.Median && s.Median <= s.Max, tr.Name)
		}
	}
	bd := rep.Breakdown
	require.NotNil(t, bd)
	assert.Equal(t, "gpu", bd.Backend)
	assert.GreaterOrEqual(t, bd.UploadBytes, int64(1500*40*4), "the list path uploads every row")
	assert.Greater(t, bd.ReadbackBytes, int64(0))
	assert.Contains(t, rep.Tiers[2].Premise, "back per call]")
}

func TestRunRejects(t *testing.T) {
	w := RandomWorkload(10, 4, 1, 1)
	_, err := Run(context.Background(), w, Options{K: 11, Repeat: 1, Runs: 1, Tiers: AllTiers, Device: engine.CPU})
	assert.ErrorContains(t, err, "k=11 out of range 1..10")
	_, err = Run(context.Background(), w, Options{K: 1, Repeat: 0, Runs: 1, Tiers: AllTiers, Device: engine.CPU})
	assert.ErrorContains(t, err, "repeat 0")
}

// sampleReport is a hand-made report with every part filled in.
func sampleReport() *Report {
	pass := true
	f := func(x float64) *float64 { return &x }
	r := &Report{UmbraVersion: Version, GoVersion: "go1.26", OS: "linux", Arch: "amd64", CPU: CPUInfo{Model: "Test CPU", Cores: 2, GOMAXPROCS: 2},
		N: 50000, Dim: 768, K: 10, Metric: "cosine", Repeat: 3, Runs: 4, Queries: 8, Data: "random", QueriesFrom: "random",
		Device: "gpu", Adapter: &Adapter{Name: "Test GPU", API: "vulkan", Type: "discrete"}, Threshold: 1e-5,
		Limits: &Limits{MaxStorageBindingBytes: 128 << 20, MaxBufferBytes: 1 << 31}, Chunks: 2, ChunkRows: 43690}
	r.Tiers = []TierResult{
		{Name: "fallback", MedianMS: f(14), MinMS: f(13), MaxMS: f(16), Jitter: f(3.0 / 14), GroupsMS: []float64{13, 14, 14, 16},
			MaxAbsDiff: f(2e-8), TopKMatch: &pass, TopKExact: &pass, Pass: &pass},
		{Name: "resident", MedianMS: f(0.7), MinMS: f(0.6), MaxMS: f(0.9), Jitter: f(0.3 / 0.7), GroupsMS: []float64{0.6, 0.7, 0.7, 0.9},
			SpeedupVsFallback: &Range{Median: 20, Min: 17, Max: 23}, MaxAbsDiff: f(3e-8), TopKMatch: &pass, TopKExact: &pass, Pass: &pass},
		{Name: "list", Skipped: true, SkipReason: "no adapter"},
	}
	r.Breakdown = &Breakdown{Tier: "list", Backend: "gpu", Reps: 12, MarshalMS: 362, UploadMS: 71.6, KernelMS: 7.7, ReadbackMS: 0.3,
		TotalMS: 442, Percent: map[string]float64{"marshal": 81.9, "upload": 16.2, "kernel": 1.7, "readback": 0.07}}
	r.Pass, r.Verdict = verdict(r)
	return r
}

func TestVerdict(t *testing.T) {
	r := sampleReport()
	assert.True(t, r.Pass)
	assert.Contains(t, r.Verdict, "resident speed-up vs fallback 20.0× (17.0–23.0×)")
	assert.Contains(t, r.Verdict, "marshal 82%")

	fail := false
	r.Tiers[1].Pass, r.Tiers[1].CheckDetail = &fail, "max_abs_diff 0.1 > threshold 1e-05"
	ok, v := verdict(r)
	assert.False(t, ok)
	assert.Equal(t, "FAIL · resident: max_abs_diff 0.1 > threshold 1e-05", v)

	r.Adapter, r.GPUReason = nil, "no adapter; try a driver"
	r.Tiers = []TierResult{{Name: "list", Skipped: true, SkipReason: r.GPUReason}}
	ok, v = verdict(r)
	assert.True(t, ok)
	assert.Equal(t, "no tier ran · no adapter · list path on the gpu: marshal 82%, upload 16%, kernel 2% of end to end", v)

	r = sampleReport()
	r.Tiers[1].Error = "device lost"
	ok, v = verdict(r)
	assert.False(t, ok)
	assert.Contains(t, v, "resident: device lost")
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, sampleReport().WriteText(&b))
	out := b.String()
	for _, want := range []string{"Test CPU", "Test GPU", "2 chunk(s)", "20.0× (17.0–23.0)", "list skipped: no adapter",
		"marshal", "81.9%", "0.07%", "verdict: PASS"} {
		assert.Contains(t, out, want)
	}
}

func TestWritePlot(t *testing.T) {
	dir := t.TempDir()
	r := sampleReport()
	path := filepath.Join(dir, "bench.png")
	require.NoError(t, WritePlot(path, r))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")))

	r.Breakdown = nil
	require.NoError(t, WritePlot(path, r), "without a breakdown")
	r.Tiers = nil
	require.NoError(t, WritePlot(path, r), "with nothing run")
	assert.ErrorContains(t, WritePlot(filepath.Join(dir, "bench.svg"), r), ".png")
}

func TestLogTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var out []string
		for _, tk := range logTicks(lo, hi) {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	assert.Equal(t, []string{"1", "2", "5", "10", "20", "50", "100"}, labels(0.9, 110))
	assert.Equal(t, []string{"500", "1000", "2000", "5000"}, labels(450, 9000))
	assert.Equal(t, []string{"5", "6", "7"}, labels(4.2, 7.5), "a narrow range labels every step")
	assert.Equal(t, strings.Fields("0.05 0.1 0.2"), labels(0.04, 0.25))
}
