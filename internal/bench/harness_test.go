package bench

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/bench/peers"
	"github.com/umbravec/umbra/internal/testkit"
)

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

// RandomWorkload returns n random vectors and nq random queries of
// dimension dim, all drawn from seed.
func RandomWorkload(n, dim, nq int, seed uint64) *Workload {
	return NewWorkload(RandomMatrix(n, dim, seed, 1), dim, RandomRows(nq, dim, seed, 2), seed)
}

// TestRunRefusesInput: Run hands the workload to the engine first, so a
// vector the engine refuses stops the run with the engine's reason and
// says whether it was in the data or the queries.
func TestRunRefusesInput(t *testing.T) {
	seed := testkit.Seed(t)
	opt := func(m umbra.Metric) Options {
		return Options{K: 1, Repeat: 1, Runs: 1, Tiers: []Tier{TierFallback}, Device: engine.CPU, Metric: m}
	}
	cases := []struct {
		name   string
		metric umbra.Metric
		spoil  func(w *Workload)
		what   string
		want   error
	}{
		{"NaN in the data", umbra.Dot, func(w *Workload) { w.Data[len(w.Data)-3] = float32(math.NaN()) }, "data", umbra.ErrNonFinite},
		{"-Inf in a query", umbra.L2, func(w *Workload) { w.Queries[1][2] = float32(math.Inf(-1)) }, "queries", umbra.ErrNonFinite},
		{"zero row under cosine", umbra.Cosine, func(w *Workload) { clear(w.Data[5*w.Dim : 6*w.Dim]) }, "data", umbra.ErrZeroVector},
		{"zero query under cosine", umbra.Cosine, func(w *Workload) { clear(w.Queries[0]) }, "queries", umbra.ErrZeroVector},
		{"short query", umbra.Dot, func(w *Workload) { w.Queries[1] = w.Queries[1][:3] }, "queries", umbra.ErrDimMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := RandomWorkload(40, 6, 2, seed)
			c.spoil(w)
			_, err := Run(context.Background(), w, opt(c.metric))
			require.ErrorIs(t, err, c.want)
			var in *InputError
			require.ErrorAs(t, err, &in)
			assert.Equal(t, c.what, in.What)
		})
	}

	w := RandomWorkload(40, 6, 2, seed)
	clear(w.Data[:6])
	clear(w.Queries[0])
	rep, err := Run(context.Background(), w, opt(umbra.L2))
	require.NoError(t, err, "zero vectors are fine under L2")
	assert.True(t, rep.Pass, rep.Verdict)
}

func TestWorkloadLayouts(t *testing.T) {
	w := RandomWorkload(50, 7, 3, testkit.Seed(t))
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
	w := RandomWorkload(1500, 48, 3, testkit.Seed(t))
	for _, m := range []umbra.Metric{umbra.Cosine, umbra.Dot, umbra.L2} {
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
			require.NotNil(t, rep.Floors)
			require.NotNil(t, rep.Floors.CPU)
			assert.Nil(t, rep.Floors.GPU, "no GPU tier ran")
			fl := rep.Floors.CPU
			require.True(t, fl.Ran(), fl.Error)
			assert.Len(t, fl.GroupsMS, 3)
			assert.GreaterOrEqual(t, fl.Bytes, int64(1500*48*4))
			assert.InDelta(t, float64(fl.Bytes)/(*fl.MedianMS*1e6), *fl.GBPerS, 1e-9)
			require.NotNil(t, fb.XFloor)
			assert.Equal(t, *fl.MedianMS, *fb.FloorMS)
			assert.InDelta(t, *fb.MedianMS / *fl.MedianMS, *fb.XFloor, 1e-9)
			assert.InDelta(t, float64(fl.Bytes)/(*fb.MedianMS*1e6), *fb.GBPerS, 1e-9)
			assert.Empty(t, rep.Peers, "no peers unless asked")
			assert.Nil(t, rep.Batch)
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
	w := RandomWorkload(1500, 40, 2, testkit.Seed(t))
	rep, err := Run(context.Background(), w, Options{K: 7, Repeat: 1, Runs: 2, Tiers: AllTiers,
		Device: engine.GPU, Breakdown: true, Reps: 2, Paths: []int{1, 3}})
	require.NoError(t, err)
	if rep.Adapter == nil {
		testkit.NoGPU(t, "no usable GPU adapter: %s", rep.GPUReason)
	}
	assert.True(t, rep.Pass, rep.Verdict)
	// 1,500 rows of 40 floats fit one device buffer of any adapter.
	assert.Equal(t, 1, rep.Chunks)
	assert.GreaterOrEqual(t, rep.ChunkRows, 1500)
	// GPU timestamps where the adapter writes them inside passes (lavapipe
	// and llvmpipe do), else the wall clock.
	assert.Contains(t, []string{"gpu", "wall"}, rep.KernelClock)
	require.NotNil(t, rep.Floors)
	for _, fl := range []*FloorResult{rep.Floors.CPU, rep.Floors.GPU} {
		require.NotNil(t, fl)
		assert.True(t, fl.Ran(), "%s floor: %s", fl.Backend, fl.Error)
	}
	for _, tr := range rep.Tiers {
		require.True(t, tr.Ran(), "%s: %s", tr.Name, tr.Error)
		assert.True(t, *tr.Pass, tr.Name)
		assert.NotNil(t, tr.XFloor, tr.Name)
		assert.NotNil(t, tr.GBPerS, tr.Name)
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
	// One search within the fused limit: a scan for the one chunk, the
	// merge, one submission, one map, and 7 hits of 8 bytes back (16 more
	// for the timestamps where the adapter writes them).
	assert.Equal(t, "fused", bd.SelectPath)
	assert.Equal(t, int64(2), bd.Dispatches)
	assert.Equal(t, int64(1), bd.Submissions)
	assert.Equal(t, int64(1), bd.Maps)
	assert.Contains(t, []int64{56, 72}, bd.BytesDown)
	assert.Greater(t, bd.BytesUp, int64(40*4))
	// --paths: each batch size on the fused path and on the radix select,
	// and the batch on each batch kernel (the tiles take the fused scan,
	// gemm.wgsl the radix select), each reading the rows once.
	require.Len(t, rep.Paths, 6)
	for i, p := range rep.Paths {
		require.Empty(t, p.Error)
		assert.Equal(t, []int{1, 1, 3, 3, 3, 3}[i], p.Queries)
		assert.Equal(t, []string{"auto", "radix", "auto", "radix", "tiles", "gemm"}[i], p.Path)
		radix := p.Path == "radix" || p.Path == "gemm"
		assert.Equal(t, map[bool]string{false: "fused", true: "radix"}[radix], p.SelectPath, "k = 7 is within the fused limit; radix when forced")
		assert.Equal(t, map[bool]int64{false: 2, true: 19}[radix], p.Dispatches, "one chunk: scan and merge, or scores and 18 select dispatches (16 rounds, compact, sort)")
		assert.Positive(t, p.BytesRead)
		assert.Equal(t, rep.Paths[0].BytesRead, p.BytesRead, "one pass over the rows")
		assert.Equal(t, int64(1), p.Submissions)
		assert.Equal(t, int64(1), p.Maps)
		assert.Greater(t, p.MedianMS, 0.0)
		assert.InDelta(t, p.MedianMS/float64(p.Queries), p.PerQueryMS, 1e-9)
	}
}

// TestRunPeers runs chromem-go and, where Python imports it, FAISS beside
// the fallback, with a batch.
func TestRunPeers(t *testing.T) {
	w := RandomWorkload(900, 32, 3, testkit.Seed(t))
	w.Batch = RandomRows(5, 32, 7, 3)
	rep, err := Run(context.Background(), w, Options{K: 6, Repeat: 2, Runs: 3, Warmup: 1, Tiers: []Tier{TierFallback},
		Device: engine.CPU, Peers: true, Batch: 5, BatchRepeat: 1, BatchRuns: 2})
	require.NoError(t, err)
	assert.True(t, rep.Pass, rep.Verdict)
	require.NotNil(t, rep.Batch)
	assert.Equal(t, 5, rep.Batch.Queries)
	require.Len(t, rep.Batch.Tiers, 1)
	bt := rep.Batch.Tiers[0]
	assert.Equal(t, "fallback", bt.Name)
	require.True(t, bt.Ran(), bt.Error)
	assert.Len(t, bt.GroupsMS, 2)
	assert.True(t, *bt.Pass)
	assert.InDelta(t, *bt.MedianMS/5, *bt.PerQueryMS, 1e-12)

	require.Len(t, rep.Peers, 2)
	c := rep.Peers[0]
	assert.Equal(t, "chromem-go", c.Name)
	assert.Equal(t, "v0.7.0", c.Version)
	require.True(t, c.Ran(), c.Error)
	assert.Len(t, c.GroupsMS, 3)
	assert.Len(t, c.BatchGroupsMS, 2)
	assert.True(t, *c.TopKMatch)
	assert.True(t, *c.BatchTopKMatch)
	assert.True(t, *c.Pass)
	fb := rep.Tiers[0]
	assert.InDelta(t, *c.MedianMS / *fb.MedianMS, *c.RatioVsUmbra, 1e-9)
	assert.InDelta(t, *c.BatchMedianMS / *bt.MedianMS, *c.BatchRatioVsUmbra, 1e-9)
	assert.Nil(t, c.RatioVsResident, "no resident tier ran")
	assert.Contains(t, rep.Verdict, "chromem-go")

	f := rep.Peers[1]
	assert.Equal(t, "faiss", f.Name)
	if f.Skipped {
		t.Logf("FAISS skipped (%s); install it with: %s", f.SkipReason, f.Install)
		assert.Equal(t, peers.FAISSInstall, f.Install)
		return
	}
	require.True(t, f.Ran(), f.Error)
	assert.Equal(t, "IndexFlatIP", f.Index)
	assert.Greater(t, f.Threads, 0)
	assert.True(t, *f.Pass, f.CheckDetail)
	assert.NotNil(t, f.RatioVsUmbra)
	assert.NotNil(t, f.BatchRatioVsUmbra)
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b))
	assert.Contains(t, b.String(), "faiss "+f.Version+" IndexFlatIP")
}

// TestRunPeersSkips: chromem-go under another metric, FAISS without a
// Python that has it, and the fallback tier that peers need.
func TestRunPeersSkips(t *testing.T) {
	w := RandomWorkload(300, 16, 2, testkit.Seed(t))
	rep, err := Run(context.Background(), w, Options{K: 3, Repeat: 1, Runs: 2, Tiers: []Tier{TierFallback}, Metric: umbra.Dot,
		Device: engine.CPU, Peers: true, Batch: 4, BatchRepeat: 1, BatchRuns: 1,
		Pythons: []string{filepath.Join(t.TempDir(), "python3")}})
	require.NoError(t, err)
	assert.True(t, rep.Pass, "skipped peers do not fail a run: %s", rep.Verdict)
	require.Len(t, rep.Peers, 2)
	assert.True(t, rep.Peers[0].Skipped)
	assert.Contains(t, rep.Peers[0].SkipReason, "cosine similarity only")
	assert.True(t, rep.Peers[1].Skipped)
	assert.Contains(t, rep.Peers[1].SkipReason, "not found")
	assert.Equal(t, peers.FAISSInstall, rep.Peers[1].Install)
	assert.Equal(t, "the run's 2 queries, repeated in turn", rep.Batch.QueriesFrom)
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b))
	assert.Contains(t, b.String(), "install: "+peers.FAISSInstall)

	_, err = Run(context.Background(), w, Options{K: 3, Repeat: 1, Runs: 1, Tiers: []Tier{TierResident}, Device: engine.CPU, Peers: true})
	assert.ErrorContains(t, err, "fallback tier")
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

// withPeers adds floors, Auto's route, a batch and two peers to a sample
// report.
func withPeers(r *Report) *Report {
	pass := true
	f := func(x float64) *float64 { return &x }
	r.Route = "one query goes to the GPU above 3.1 MB of vectors (GPU: 0.120 ms latency, 300.0 GB/s; CPU: 20.0 GB/s)"
	r.Floors = &Floors{
		CPU: &FloorResult{Backend: "cpu", Premise: cpuFloorPremise, Bytes: 153600000,
			Timing: Timing{MedianMS: f(7), MinMS: f(6.9), MaxMS: f(7.4), Jitter: f(0.5 / 7)}, GBPerS: f(21.9)},
		GPU: &FloorResult{Backend: "gpu", Premise: gpuFloorPremise, Bytes: 153600000,
			Timing: Timing{MedianMS: f(0.5), MinMS: f(0.5), MaxMS: f(0.6), Jitter: f(0.2)}, GBPerS: f(307)},
	}
	r.Tiers[0].FloorMS, r.Tiers[0].XFloor, r.Tiers[0].GBPerS = f(7), f(2), f(11)
	r.Tiers[1].FloorMS, r.Tiers[1].XFloor, r.Tiers[1].GBPerS = f(0.5), f(1.4), f(219)
	r.Batch = &BatchResult{Queries: 64, QueriesFrom: "random, seed 1", Repeat: 2, Runs: 5, Tiers: []BatchTier{
		{Name: "fallback", Premise: fallbackBatchPremise, Timing: Timing{MedianMS: f(160), MinMS: f(150), MaxMS: f(170)}, Pass: &pass},
	}}
	r.Peers = []PeerResult{
		{Name: "chromem-go", Version: "v0.7.0", Premise: "in process", Timing: Timing{MedianMS: f(84), MinMS: f(80), MaxMS: f(90), Jitter: f(0.1)},
			RatioVsUmbra: f(6), BatchMedianMS: f(5400), BatchMinMS: f(5300), BatchMaxMS: f(5500), BatchRatioVsUmbra: f(33.75),
			MaxAbsDiff: f(1e-7), TopKMatch: &pass, TopKExact: &pass, BatchTopKMatch: &pass, Pass: &pass},
		{Name: "faiss", Skipped: true, SkipReason: "no Python here imports faiss and numpy", Install: "apt-get install python3-faiss"},
	}
	r.Pass, r.Verdict = verdict(r)
	return r
}

func TestWriteTextPeers(t *testing.T) {
	r := withPeers(sampleReport())
	assert.True(t, r.Pass, r.Verdict)
	assert.Contains(t, r.Verdict, "fallback 14.00 ms per search (2.00× the CPU read floor)")
	assert.Contains(t, r.Verdict, "peer time / fallback time: one query chromem-go 6.00×; 64 queries chromem-go 33.8×")
	var b bytes.Buffer
	require.NoError(t, r.WriteText(&b))
	out := b.String()
	for _, want := range []string{"route    Auto's calibration: one query goes to the GPU above 3.1 MB",
		"× floor", "2.00×", "cpu floor", "gpu floor", "21.9", "307.0", "(146.5 MiB per pass)",
		"batch: 64 queries (random, seed 1), 5 groups × 2 repeats", "chromem-go v0.7.0", "6.00×", "33.8×",
		"faiss skipped: no Python here imports faiss", "install: apt-get install python3-faiss"} {
		assert.Contains(t, out, want)
	}

	fail := false
	r.Peers[0].Pass, r.Peers[0].CheckDetail = &fail, "top-10 differs from the float64 reference from rank 3 on"
	ok, v := verdict(r)
	assert.False(t, ok, "a peer that disagrees voids the comparison")
	assert.Contains(t, v, "peer chromem-go: top-10 differs")
	r.Peers[0].Pass = &fail
	r.Batch.Tiers[0].Pass, r.Batch.Tiers[0].CheckDetail = &fail, "batch query 3: top-10 differs"
	_, v = verdict(r)
	assert.Contains(t, v, "batch fallback: batch query 3")
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
