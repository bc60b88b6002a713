package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/cmd/internal/cmdline"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/bench"
	"github.com/umbravec/umbra/internal/kernelset"
	"github.com/umbravec/umbra/internal/testkit"
)

// runBench runs the command in-process and returns its exit status and
// output.
func runBench(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// ownLines drops lines that the GPU drivers print on stderr by themselves
// (Mesa's EGL complains about XDG_RUNTIME_DIR in containers).
func ownLines(stderr string) []string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if l != "" && !strings.Contains(l, "XDG_RUNTIME_DIR") {
			keep = append(keep, l)
		}
	}
	return keep
}

func writeMatrix(t *testing.T, name string, rows, dim int, seed uint64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, host.WriteMatrixFile(path, &host.Matrix{Rows: rows, Dim: dim, Data: bench.RandomMatrix(rows, dim, seed, 7)}, ""))
	return path
}

func writeBytes(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

func TestBadInput(t *testing.T) {
	seed := testkit.Seed(t)
	data64 := writeMatrix(t, "data.npy", 30, 64, seed)
	q32 := writeMatrix(t, "q.fvecs", 3, 32, seed)
	nan := &host.Matrix{Rows: 2, Dim: 2, Data: []float32{1, 2, float32(0) / float32(len(data64)-len(data64)), 3}}
	nanPath := filepath.Join(t.TempDir(), "nan.npy")
	require.NoError(t, host.WriteMatrixFile(nanPath, nan, ""))
	zero := writeMatrix(t, "zero.npy", 1, 4, seed)
	zm, err := host.ReadMatrixFile(context.Background(), zero)
	require.NoError(t, err)
	clear(zm.Data)
	require.NoError(t, host.WriteMatrixFile(zero, zm, ""))

	cases := []struct {
		name string
		args []string
		want string // in the one line of error
	}{
		{"unknown tier", []string{"--tiers", "fallback,warp"}, `unknown tier "warp"`},
		{"no tier", []string{"--tiers", ","}, "no tier"},
		{"n zero", []string{"--n", "0"}, "--n 0 out of range"},
		{"n too large", []string{"--n", "100000000", "--dim", "768"}, "--n 100000000 out of range"},
		{"dim negative", []string{"--dim", "-1"}, "--dim -1 out of range"},
		{"dim too large", []string{"--dim", "70000"}, "--dim 70000 out of range"},
		{"k zero", []string{"--n", "100", "--k", "0"}, "--k 0 out of range: want 1..100"},
		{"k above n", []string{"--n", "100", "--k", "101"}, "--k 101 out of range: want 1..100"},
		{"runs zero", []string{"--runs", "0"}, "--runs 0 out of range"},
		{"repeat zero", []string{"--repeat", "0"}, "--repeat 0 out of range"},
		{"reps zero", []string{"--reps", "0"}, "--reps 0 out of range"},
		{"paths zero", []string{"--paths", "1,0"}, `--paths: "0" is not a batch size`},
		{"paths word", []string{"--paths", "8,x"}, `--paths: "x" is not a batch size`},
		{"metric", []string{"--metric", "hamming"}, `unknown metric "hamming"`},
		{"device", []string{"--device", "tpu"}, `unknown device "tpu"`},
		{"backend", []string{"--backend", "cuda"}, `unknown backend "cuda"`},
		{"threshold negative", []string{"--threshold", "-1"}, "--threshold -1 out of range"},
		{"threshold NaN", []string{"--threshold", "NaN"}, "--threshold NaN out of range"},
		{"plot extension", []string{"--plot", "out.svg"}, "must end in .png"},
		{"not a flag", []string{"fast"}, `unexpected argument "fast"`},
		{"undefined flag", []string{"--turbo"}, "unknown flag --turbo"},
		{"bad number", []string{"--n", "many"}, `--n: invalid value "many": want a whole number`},
		{"power", []string{"--power", "max"}, `--power: unknown power "max": want high or low`},
		{"value missing", []string{"--data"}, "--data: needs a value"},
		{"missing file", []string{"--data", filepath.Join(t.TempDir(), "none.npy")}, "no such file"},
		{"unknown extension", []string{"--data", writeBytes(t, "data.csv", []byte("1,2\n"))}, `unknown file extension ".csv"`},
		{"wrong dtype", []string{"--data", writeBytes(t, "i4.npy",
			testkit.NPY("<i4", "(2, 2)", make([]byte, 16)))}, "<i4"},
		{"not 2-D", []string{"--data", writeBytes(t, "3d.npy",
			testkit.NPY("<f4", "(2, 2, 2)", make([]byte, 32)))}, "2-D"},
		{"truncated npy", []string{"--data", writeBytes(t, "short.npy",
			testkit.NPY("<f4", "(4, 2)", make([]byte, 20)))}, "malformed data file"},
		{"truncated fvecs", []string{"--queries", writeBytes(t, "short.fvecs", []byte{4, 0, 0, 0, 0, 0, 128, 63})}, "malformed data file"},
		{"empty data", []string{"--data", writeBytes(t, "empty.npy",
			testkit.NPY("<f4", "(0, 3)", nil))}, "holds no vectors"},
		{"dim mismatch data and queries", []string{"--data", data64, "--queries", q32}, "dim mismatch: --queries"},
		{"dim mismatch flag and data", []string{"--data", data64, "--dim", "32"}, "dim mismatch: --dim 32"},
		{"dim mismatch flag and queries", []string{"--queries", q32, "--dim", "16"}, "dim mismatch: --queries"},
		{"n above data rows", []string{"--data", data64, "--n", "31"}, "holds 30 vectors"},
		{"non-finite data", []string{"--data", nanPath, "--k", "1"}, "--data: value is NaN or infinite: vector 1, component 0 is NaN"},
		{"zero query under cosine", []string{"--queries", zero}, "--queries: zero vector under cosine: query 0"},
		{"batch without peers", []string{"--batch", "8"}, "--batch applies to --peers only"},
		{"python without peers", []string{"--python", "python3"}, "--python applies to --peers only"},
		{"peers without fallback", []string{"--peers", "--tiers", "resident"}, "--peers compares with the fallback tier"},
		{"batch negative", []string{"--peers", "--batch", "-1"}, "--batch -1 out of range"},
		{"batch runs zero", []string{"--peers", "--batch-runs", "0"}, "--batch-runs 0 out of range"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runBench(t, append([]string{"--device", "cpu", "--runs", "1", "--repeat", "1"}, c.args...)...)
			assert.Equal(t, 2, code, stderr)
			assert.Empty(t, stdout)
			lines := ownLines(stderr)
			require.Len(t, lines, 1, "one line of error")
			assert.True(t, strings.HasPrefix(lines[0], "bench: "), lines[0])
			assert.Contains(t, lines[0], c.want)
		})
	}
}

func TestHelp(t *testing.T) {
	code, stdout, stderr := runBench(t, "-h")
	assert.Equal(t, 0, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "-breakdown")
	// kong's help of bench's own flags, with the shared adapter flags
	// and the examples.
	// kong wraps the help to the widest flag's column: words are
	// compared with the line breaks and indents folded to one space.
	folded := strings.Join(strings.Fields(stderr), " ")
	for _, want := range []string{"Usage: bench [flags]", "--n=50000", "--tiers=LIST", "(default all)", "--backend=B", "--adapter=NAME",
		"--power=P", "--json=FILE", "bench/SCHEMA.md", "Examples: bench "} {
		assert.Contains(t, folded, want)
	}
}

// TestFlagsKeepTheirMeaning: the flags parse as they always have (one dash
// or two, = or a space, negative values, comma lists kept whole) and the
// shared adapter flags become the run's adapter selection.
func TestFlagsKeepTheirMeaning(t *testing.T) {
	f, helped, err := parse([]string{"-n", "1000", "--dim=16", "-k", "5", "--precision", "f32,f16,int8", "--paths=1,8,64", "--shards", "vulkan,gl:llvmpipe",
		"-json", "-", "--peers=false", "--seed", "42", "--duration", "250ms", "--backend", "GL", "-adapter", "llvmpipe", "--power=low", "--threshold", "-0"}, nil)
	require.NoError(t, err)
	require.False(t, helped)
	assert.Equal(t, 1000, f.N)
	assert.Equal(t, 16, f.Dim)
	assert.Equal(t, 5, f.K)
	assert.Equal(t, "f32,f16,int8", f.Precision)
	assert.Equal(t, "1,8,64", f.Paths)
	assert.Equal(t, "vulkan,gl:llvmpipe", f.Shards)
	assert.Equal(t, "-", f.JSONOut)
	assert.False(t, f.Peers)
	assert.Equal(t, uint64(42), f.runSeed())
	assert.Equal(t, 250*time.Millisecond, f.Duration)
	assert.True(t, f.set["seed"] && f.set["json"] && f.set["n"])
	assert.False(t, f.set["runs"], "a default is not set")
	o, err := f.options()
	require.NoError(t, err)
	assert.Equal(t, engine.AdapterSelect{Backend: "gl", Name: "llvmpipe", LowPower: true}, o.Adapter)
	assert.Equal(t, []int{1, 8, 64}, o.Paths)

	f, _, err = parse(nil, nil)
	require.NoError(t, err)
	assert.Equal(t, flags{N: 50000, Dim: 768, K: 10, NQ: 8, Repeat: 3, Runs: 15, Warmup: 1, Tiers: "all", Device: "auto", Metric: "cosine",
		Reps: 12, Batch: 64, BatchRepeat: 2, BatchRuns: 5, Duration: 2 * time.Second, Adapter: cmdline.Adapter{Power: "high"},
		CheckRows: 4_000_000, CheckDim: 768, CheckBatches: "1,64,256,1024", CheckTime: 7 * time.Minute, CheckSoak: 30 * time.Second, set: f.set}, *f)
	o, err = f.options()
	require.NoError(t, err)
	assert.Equal(t, engine.AdapterSelect{}, o.Adapter)
}

// tierJSON is the documented shape of one tier (bench/SCHEMA.md).
type tierJSON struct {
	Name              *string                              `json:"name"`
	Premise           *string                              `json:"premise"`
	MedianMS          *float64                             `json:"median_ms"`
	MinMS             *float64                             `json:"min_ms"`
	MaxMS             *float64                             `json:"max_ms"`
	Jitter            *float64                             `json:"jitter"`
	GroupsMS          []float64                            `json:"groups_ms"`
	SpeedupVsFallback *struct{ Median, Min, Max *float64 } `json:"speedup_vs_fallback"`
	MaxAbsDiff        *float64                             `json:"max_abs_diff"`
	TopKMatch         *bool                                `json:"topk_match"`
	Skipped           bool                                 `json:"skipped"`
	SkipReason        string                               `json:"skip_reason"`
	Pass              *bool                                `json:"pass"`
	FloorMS           *float64                             `json:"floor_ms"`
	XFloor            *float64                             `json:"x_floor"`
	GBPerS            *float64                             `json:"gb_per_s"`
}

// floorJSON, peerJSON and batchJSON are the documented shapes of floors,
// peers and the batch.
type floorJSON struct {
	Backend  string
	Bytes    *int64
	MedianMS *float64  `json:"median_ms"`
	GroupsMS []float64 `json:"groups_ms"`
	GBPerS   *float64  `json:"gb_per_s"`
}

type peerJSON struct {
	Name              string
	Version           string
	Skipped           bool
	SkipReason        string `json:"skip_reason"`
	Install           string
	MedianMS          *float64 `json:"median_ms"`
	MinMS             *float64 `json:"min_ms"`
	MaxMS             *float64 `json:"max_ms"`
	RatioVsUmbra      *float64 `json:"ratio_vs_umbra"`
	BatchMedianMS     *float64 `json:"batch_median_ms"`
	BatchRatioVsUmbra *float64 `json:"batch_ratio_vs_umbra"`
	TopKMatch         *bool    `json:"topk_match"`
	BatchTopKMatch    *bool    `json:"batch_topk_match"`
	Pass              *bool
}

type batchJSON struct {
	Queries     int
	QueriesFrom string `json:"queries_from"`
	Repeat      int
	Runs        int
	Tiers       []struct {
		Name       string
		MedianMS   *float64 `json:"median_ms"`
		PerQueryMS *float64 `json:"per_query_ms"`
		TopKMatch  *bool    `json:"topk_match"`
	}
}

type reportJSON struct {
	N, Dim, K, Repeat, Runs *int
	Adapter                 *struct{ Name, Vendor, API, Type, Driver string }
	GPUReason               string `json:"gpu_reason"`
	Seed                    *uint64
	Tiers                   []tierJSON
	Breakdown               *struct {
		Tier       string
		MarshalMS  *float64 `json:"marshal_ms"`
		UploadMS   *float64 `json:"upload_ms"`
		KernelMS   *float64 `json:"kernel_ms"`
		ReadbackMS *float64 `json:"readback_ms"`
		TotalMS    *float64 `json:"total_ms"`
		Percent    map[string]float64
	}
	Floors  *struct{ CPU, GPU *floorJSON }
	Batch   *batchJSON
	Peers   []peerJSON
	Pass    bool
	Verdict string
}

func decode(t *testing.T, stdout string) reportJSON {
	t.Helper()
	var r reportJSON
	dec := json.NewDecoder(strings.NewReader(stdout))
	require.NoError(t, dec.Decode(&r), "stdout must be exactly one JSON object")
	assert.False(t, dec.More(), "nothing after the JSON object")
	require.NotNil(t, r.N)
	return r
}

func TestJSONOnStdoutCPU(t *testing.T) {
	code, stdout, stderr := runBench(t, "--n", "2000", "--dim", "64", "--runs", "3", "--repeat", "1",
		"--device", "cpu", "--seed", "42", "--json", "-", "--breakdown", "--reps", "2")
	require.Equal(t, 0, code, stderr)
	r := decode(t, stdout)
	assert.Equal(t, 2000, *r.N)
	assert.Equal(t, 64, *r.Dim)
	assert.Equal(t, 10, *r.K)
	assert.Equal(t, 1, *r.Repeat)
	assert.Equal(t, 3, *r.Runs)
	assert.Equal(t, uint64(42), *r.Seed)
	assert.Nil(t, r.Adapter)
	assert.Contains(t, r.GPUReason, "--device cpu")
	require.Len(t, r.Tiers, 5)
	fb := r.Tiers[0]
	assert.Equal(t, "fallback", *fb.Name)
	for _, f := range []*float64{fb.MedianMS, fb.MinMS, fb.MaxMS, fb.Jitter, fb.MaxAbsDiff} {
		assert.NotNil(t, f)
	}
	assert.Len(t, fb.GroupsMS, 3)
	assert.Nil(t, fb.SpeedupVsFallback, "absent for the fallback itself")
	assert.True(t, *fb.TopKMatch)
	for _, tr := range r.Tiers[1:] {
		assert.True(t, tr.Skipped, *tr.Name)
		assert.NotEmpty(t, tr.SkipReason)
		assert.Nil(t, tr.MedianMS)
	}
	require.NotNil(t, r.Breakdown)
	for _, f := range []*float64{r.Breakdown.MarshalMS, r.Breakdown.UploadMS, r.Breakdown.KernelMS, r.Breakdown.ReadbackMS, r.Breakdown.TotalMS} {
		assert.NotNil(t, f)
	}
	assert.True(t, r.Pass)
	assert.Contains(t, stderr, "verdict: PASS", "the table goes to stderr when stdout carries JSON")
}

// TestPeersJSON runs the fallback with its floor and the peers, and reads
// back the documented fields.
func TestPeersJSON(t *testing.T) {
	code, stdout, stderr := runBench(t, "--n", "600", "--dim", "32", "--runs", "2", "--repeat", "1",
		"--device", "cpu", "--seed", "7", "--peers", "--batch", "4", "--batch-runs", "2", "--batch-repeat", "1", "--json", "-")
	require.Equal(t, 0, code, stderr)
	r := decode(t, stdout)
	fb := r.Tiers[0]
	require.NotNil(t, r.Floors)
	require.NotNil(t, r.Floors.CPU)
	assert.Nil(t, r.Floors.GPU)
	fl := r.Floors.CPU
	assert.Equal(t, "cpu", fl.Backend)
	assert.Equal(t, int64(600*32*4), *fl.Bytes)
	assert.Len(t, fl.GroupsMS, 2)
	require.NotNil(t, fl.GBPerS)
	assert.Equal(t, *fl.MedianMS, *fb.FloorMS)
	assert.InDelta(t, *fb.MedianMS / *fl.MedianMS, *fb.XFloor, 1e-9)
	assert.NotNil(t, fb.GBPerS)

	require.NotNil(t, r.Batch)
	assert.Equal(t, 4, r.Batch.Queries)
	assert.Equal(t, "random, seed 7", r.Batch.QueriesFrom)
	assert.Equal(t, 2, r.Batch.Runs)
	require.Len(t, r.Batch.Tiers, 1)
	assert.NotNil(t, r.Batch.Tiers[0].PerQueryMS)
	assert.True(t, *r.Batch.Tiers[0].TopKMatch)

	require.Len(t, r.Peers, 2)
	c := r.Peers[0]
	assert.Equal(t, "chromem-go", c.Name)
	for _, x := range []*float64{c.MedianMS, c.MinMS, c.MaxMS, c.RatioVsUmbra, c.BatchMedianMS, c.BatchRatioVsUmbra} {
		assert.NotNil(t, x)
	}
	assert.True(t, *c.TopKMatch && *c.BatchTopKMatch && *c.Pass)
	f := r.Peers[1]
	assert.Equal(t, "faiss", f.Name)
	if f.Skipped {
		assert.Contains(t, f.Install, "python3-faiss")
		t.Logf("FAISS skipped: %s (install: %s)", f.SkipReason, f.Install)
	} else {
		assert.NotEmpty(t, f.Version)
		assert.NotNil(t, f.RatioVsUmbra)
		assert.True(t, *f.Pass)
	}
	assert.Contains(t, stderr, "peers on the same data and queries")
}

// TestGPUTiers runs every tier through the command on the software
// adapter, with the slab split into several device buffers, and writes the
// JSON and PNG to files.
func TestGPUTiers(t *testing.T) {
	dir := t.TempDir()
	jsonPath, pngPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.png")
	code, stdout, stderr := runBench(t, "--n", "2000", "--dim", "64", "--runs", "3", "--repeat", "1",
		"--device", "gpu", "--breakdown", "--reps", "2", "--json", jsonPath, "--plot", pngPath)
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err, stderr)
	r := decode(t, string(b))
	if r.Adapter == nil {
		testkit.NoGPU(t, "no usable GPU adapter: %s", r.GPUReason)
	}
	require.Equal(t, 0, code, stdout+stderr)
	for _, tr := range r.Tiers {
		assert.False(t, tr.Skipped, *tr.Name)
		require.NotNil(t, tr.Pass, *tr.Name)
		assert.True(t, *tr.Pass, *tr.Name)
		if *tr.Name != "fallback" {
			require.NotNil(t, tr.SpeedupVsFallback, *tr.Name)
		}
	}
	assert.Equal(t, "list", r.Breakdown.Tier)
	assert.Regexp(t, `1 chunk\(s\) of up to \d+ rows`, stdout)
	png, err := os.ReadFile(pngPath)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG")))
}

// TestFailExitsOne makes the check impossible to pass: the report says
// FAIL with the reason and the exit status is 1, the JSON still written.
func TestFailExitsOne(t *testing.T) {
	code, stdout, stderr := runBench(t, "--n", "500", "--dim", "16", "--runs", "2", "--repeat", "1",
		"--device", "cpu", "--threshold", "1e-300", "--json", "-")
	assert.Equal(t, 1, code, stderr)
	r := decode(t, stdout)
	assert.False(t, r.Pass)
	assert.False(t, *r.Tiers[0].Pass)
	assert.NotNil(t, r.Tiers[0].MedianMS, "a failing tier is still timed")
	assert.Contains(t, r.Verdict, "FAIL · fallback: max_abs_diff")
	assert.Contains(t, stderr, "FAIL")
}

// TestNoMatchingAdapter asks for an API this platform's adapters do not
// have: the GPU tiers are skipped with the engine's reason, and the run
// still passes on the fallback.
func TestNoMatchingAdapter(t *testing.T) {
	code, stdout, stderr := runBench(t, "--n", "500", "--dim", "16", "--runs", "1", "--repeat", "1",
		"--device", "gpu", "--backend", "metal", "--adapter", "no-such-adapter", "--tiers", "fallback,resident,list", "--json", "-")
	require.Equal(t, 0, code, stderr)
	r := decode(t, stdout)
	assert.Nil(t, r.Adapter)
	assert.NotEmpty(t, r.GPUReason)
	require.Len(t, r.Tiers, 3)
	assert.NotNil(t, r.Tiers[0].MedianMS)
	for _, tr := range r.Tiers[1:] {
		assert.True(t, tr.Skipped, *tr.Name)
		assert.Equal(t, r.GPUReason, tr.SkipReason)
	}
	assert.True(t, r.Pass)
	assert.Contains(t, stderr, "resident, list skipped: ")
}

// TestDataFiles reads vectors from .fvecs and queries from .npy.
func TestDataFiles(t *testing.T) {
	seed := testkit.Seed(t)
	data := writeMatrix(t, "base.fvecs", 300, 24, seed)
	queries := writeMatrix(t, "q.npy", 4, 24, seed+1)
	code, stdout, stderr := runBench(t, "--data", data, "--queries", queries, "--k", "5", "--runs", "2", "--repeat", "1",
		"--device", "cpu", "--metric", "dot", "--json", "-")
	require.Equal(t, 0, code, stderr)
	r := decode(t, stdout)
	assert.Equal(t, 300, *r.N)
	assert.Equal(t, 24, *r.Dim)
	assert.Nil(t, r.Seed, "no random data, no seed")
	assert.True(t, r.Pass)

	code, stdout, stderr = runBench(t, "--data", data, "--n", "120", "--runs", "1", "--repeat", "1", "--device", "cpu", "--json", "-")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, 120, *decode(t, stdout).N, "--n takes the first rows of --data")
}

// --precision measures the three precisions on small data, checks every
// compressed answer against the float32 one, and prints the cost columns.
func TestPrecisionTable(t *testing.T) {
	for _, extra := range [][]string{nil, {"--clustered", "--metric", "l2"}} {
		args := append([]string{"--precision", "f32,f16,int8", "--n", "600", "--dim", "40", "--runs", "2", "--repeat", "1",
			"--batch", "5", "--batch-runs", "1", "--seed", "3"}, extra...)
		code, out, stderr := runBench(t, args...)
		require.Equal(t, 0, code, "stderr: %s", stderr)
		for _, want := range []string{"umbra f32", "umbra f16 exact", "umbra int8 exact", "rescored/search", "× f32 floor"} {
			assert.Contains(t, out, want)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "| umbra") {
				assert.True(t, strings.HasSuffix(line, "| yes |"), "not exact: %s", line)
			}
		}
	}
	code, _, stderr := runBench(t, "--precision", "f32,int4")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "int4")
}

// --cpu-kernel and --quant-kernel run every row with the named sets (the
// generic ones run everywhere), say so, name each row's kernels, and are
// undone when the run ends; a set the CPU does not run is a usage error.
func TestKernelFlags(t *testing.T) {
	code, out, stderr := runBench(t, "--precision", "f32,int8", "--device", "cpu", "--n", "500", "--dim", "70", "--runs", "1",
		"--repeat", "1", "--batch", "5", "--batch-runs", "1", "--seed", "3", "--cpu-kernel", "generic", "--quant-kernel", "generic")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, out, "compressed kernels forced to generic by --quant-kernel")
	assert.Contains(t, out, "| umbra f32 | generic |")
	assert.Contains(t, out, "| umbra int8 exact | generic, rescore generic |")
	ix, err := engine.New(context.Background(), engine.Config{Dim: 4, Device: engine.CPU, Precision: umbra.Int8})
	require.NoError(t, err)
	defer ix.Close()
	assert.Equal(t, kernelset.Sets(kernelset.Float32)[0], ix.Info().CPUKernel, "restored after the run")
	assert.Equal(t, kernelset.Sets(kernelset.Compressed)[0], ix.Info().QuantKernel, "restored after the run")
	for _, args := range [][]string{{"--quant-kernel", "avx9"}, {"--cpu-kernel", "vnni"}, {"--ingest", "--cpu-kernel", "generic"}} {
		code, _, stderr := runBench(t, append([]string{"--precision", "f32", "--n", "10", "--dim", "4"}, args...)...)
		assert.Equal(t, 2, code, args)
		assert.Contains(t, stderr, args[len(args)-2], args)
	}
}

// TestStoreBreakdown: --store prints every measured operation beside its
// baseline, and with --breakdown a stage table for each traced write whose
// stages are the engine's (a log only where there is a store).
func TestStoreBreakdown(t *testing.T) {
	code, out, stderr := runBench(t, "--store", "--breakdown", "--n", "300", "--dim", "16", "--runs", "1", "--repeat", "1",
		"--device", "cpu", "--seed", "5")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	for _, want := range []string{"Add (Flat)", "import .npy", "Save", "Open", "log fsync per call", "0.01% of rows allowed", "ingest stages (--breakdown)"} {
		assert.Contains(t, out, want)
	}
	stages := out[strings.Index(out, "ingest stages"):]
	for _, op := range []string{"Add (Flat) ", "Add (Vectors)", "import .npy (streamed Add)", "Upsert, every ID new", "Upsert, replacing every row", "Add (Flat) to a store, log fsync per call"} {
		i := strings.Index(stages, "  "+op)
		require.GreaterOrEqual(t, i, 0, "stage row %q in\n%s", op, stages)
		f := strings.Fields(stages[i+len(op)+2 : i+strings.Index(stages[i:], "\n")])
		require.Len(t, f, 9, "backend and eight figures: %q", f)
		assert.Equal(t, "cpu", f[0])
		logMS, err := strconv.ParseFloat(f[6], 64)
		require.NoError(t, err)
		if strings.Contains(op, "store") {
			assert.Positive(t, logMS, "%s: its log stage", op)
		} else {
			assert.Zero(t, logMS, "%s: no store, no log", op)
		}
	}
}

// TestShardsFlag: --shards reads backends, names and backend:name, refuses
// fewer than two entries and unknown backends, and on the software
// adapters runs a small comparison whose every index returns the
// fallback's IDs (with UMBRA_REQUIRE_GPU=1 a missing adapter fails).
func TestShardsFlag(t *testing.T) {
	sel, err := parseShards("vulkan, GL,llvmpipe,vulkan:llvm")
	require.NoError(t, err)
	require.Equal(t, []engine.AdapterSelect{{Backend: "vulkan"}, {Backend: "gl"}, {Name: "llvmpipe"}, {Backend: "vulkan", Name: "llvm"}}, sel)
	for _, bad := range []string{"vulkan", "vulkan,,gl", "glide:x,vulkan"} {
		code, _, stderr := runBench(t, "--shards", bad)
		assert.Equal(t, 2, code, bad)
		assert.Contains(t, stderr, "--shards", bad)
	}
	code, out, stderr := runBench(t, "--shards", "vulkan,gl", "--n", "300", "--dim", "16", "--runs", "1", "--repeat", "1", "--paths", "1,4")
	if code != 0 && !testkit.RequireGPU() && (!engine.GPUSupport() || strings.Contains(stderr, "adapter")) {
		t.Skipf("no software adapters: %s", stderr)
	}
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "| sharded vulkan+gl |")
	require.Equal(t, 3, strings.Count(out, "| yes |"), out)
}

// --precision --device gpu measures the precisions on a software adapter:
// every compressed answer is the CPU path's float32 one, bit for bit, and
// the table says where a GPU search's time goes.
func TestPrecisionTableGPU(t *testing.T) {
	code, out, stderr := runBench(t, "--precision", "f32,f16,int8", "--device", "gpu", "--n", "700", "--dim", "40",
		"--runs", "2", "--repeat", "1", "--batch", "9", "--batch-runs", "1", "--seed", "5", "--breakdown")
	if code == 1 && (strings.Contains(stderr, "adapter") || strings.Contains(stderr, "GPU support")) && !testkit.RequireGPU() {
		t.Skip("no usable GPU adapter: " + stderr)
	}
	require.Equal(t, 0, code, "stderr: %s", stderr)
	for _, want := range []string{"umbra f32", "umbra f16 exact", "umbra int8 exact", "GPU ", "device ", "breakdown:", "| readback ms |"} {
		assert.Contains(t, out, want)
	}
	table, _, _ := strings.Cut(out, "breakdown:") // the breakdown's rows have no exact column
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "| umbra") {
			assert.True(t, strings.HasSuffix(line, "| yes |"), "not exact: %s", line)
		}
	}
}
