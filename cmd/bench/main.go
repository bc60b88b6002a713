// Command bench measures umbra's search tiers: groups of repeats keeping
// the minimum, many independent groups, median, range and jitter,
// speed-ups paired inside each group, every tier checked against a float64
// reference in the same run, and the premise of every figure printed
// beside it.
//
//	go run ./cmd/bench                                 # 50,000×768, k=10, every tier the machine can run
//	go run ./cmd/bench --device gpu --runs 5           # force the GPU tiers, software adapters included
//	go run ./cmd/bench --tiers list --breakdown        # where the time of the per-call path goes
//	go run ./cmd/bench --json - --plot bench.png       # JSON on stdout (schema: bench/SCHEMA.md), a PNG
//	go run ./cmd/bench --peers --device cpu            # chromem-go and FAISS on the same data, one query and 64
//	go run ./cmd/bench --device cpu --tiers fallback --cfloor  # beside an independent C read loop
//	go run ./cmd/bench --data base.fvecs --queries q.npy
//	go run ./cmd/bench --concurrency 1,8,64,256 --peers  # many callers at once, coalescing on and off
//	go run ./cmd/bench --soak 60s                      # mixed load, every answer checked, memory sampled
//	go run ./cmd/bench --device gpu --tiers resident --paths 1,8,64   # fused vs radix selection, with what each issues
//	go run ./cmd/bench --precision f32,f16,int8 --peers # compressed rows, exact answers, beside FAISS
//	go run ./cmd/bench --precision f32,f16,int8 --device gpu --breakdown  # the same on a GPU, stage by stage
//
// Exit status: 0 when every tier that ran agrees with the reference, 1 on a
// consistency failure or a tier error, 2 for bad flags or input files.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/cmd/internal/cmdline"
	"github.com/umbravec/umbra/cmd/internal/quiet"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/bench"
	"github.com/umbravec/umbra/internal/bench/peers"
	"github.com/umbravec/umbra/internal/kernelset"
)

func main() {
	quiet.Wayland()
	engine.ServeGPUChildIfRequested()
	if spec := os.Getenv(bench.IngestChildEnv); spec != "" {
		// One measured call of --ingest, in a process of its own.
		out, err := bench.IngestChild(context.Background(), spec)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: ingest child:", err)
			os.Exit(1)
		}
		os.Stdout.Write(append(out, '\n'))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Limits on the flags. maxValues bounds n×dim: the run holds the data
// several times over (the input, the per-row copy, each index's slab); 2³²
// admits the device check's 4,000,000 × 768 (12.3 GB a copy), for
// machines with the memory. On 32-bit platforms it is the largest int
// (no slice there could hold more anyway).
const (
	maxDim    = 1 << 16
	maxValues = min(1<<32, math.MaxInt)
	maxGroups = 10000
)

// usageError is bad input from the user: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// flags is bench's command line as kong reads it (cmd/internal/cmdline):
// each field a flag, with its help.
type flags struct {
	N            int             `name:"n" default:"50000" help:"stored vectors (random data), or the first n rows of --data"`
	Dim          int             `name:"dim" default:"768" help:"vector dimension (random data)"`
	K            int             `name:"k" default:"10" help:"results per search"`
	NQ           int             `name:"nq" default:"8" help:"random queries, used in turn (ignored with --queries)"`
	Repeat       int             `name:"repeat" default:"3" help:"timed calls per group; a group keeps its minimum"`
	Runs         int             `name:"runs" default:"15" help:"independent groups; median, range and jitter are over groups"`
	Warmup       int             `name:"warmup" default:"1" help:"untimed calls per tier before the first group"`
	Tiers        string          `name:"tiers" default:"all" placeholder:"LIST" help:"comma list of tiers: fallback, kernel, resident, contiguous, list (or all)"`
	Device       string          `name:"device" default:"auto" placeholder:"D" help:"auto (GPU tiers on a hardware adapter only), gpu (any adapter, software ones too) or cpu"`
	Adapter      cmdline.Adapter `embed:""`
	Metric       string          `name:"metric" default:"cosine" placeholder:"M" help:"cosine, dot or l2"`
	Seed         uint64          `name:"seed" placeholder:"N" help:"seed of the random data and queries (default: from the clock, printed)"`
	JSONOut      string          `name:"json" placeholder:"FILE" help:"write the report as JSON to FILE (- for stdout; the table then goes to stderr)"`
	PlotOut      string          `name:"plot" placeholder:"FILE.png" help:"draw group times and the breakdown to FILE.png"`
	Breakdown    bool            `name:"breakdown" help:"trace the most expensive tier's path stage by stage (marshal, upload, kernel, readback); with --precision, each precision's search stage by stage with rows rescored, MB read and KB read back"`
	Reps         int             `name:"reps" default:"12" help:"traced calls the breakdown takes medians over (and calls per batch size of --paths)"`
	Paths        string          `name:"paths" placeholder:"LIST" help:"comma list of batch sizes (e.g. 1,8,64): time SearchBatch on the resident GPU index with the fused selection and with the radix select forced, side by side, with what each issues"`
	Data         string          `name:"data" placeholder:"FILE" help:"stored vectors from FILE (.npy float32 2-D, or .fvecs) instead of random data"`
	Queries      string          `name:"queries" placeholder:"FILE" help:"queries from FILE (.npy float32 2-D, or .fvecs)"`
	Store        bool            `name:"store" help:"measure the store instead of the search tiers: ingest, Save, Open, a logged Add per fsync policy, and filtered searches, each beside its baseline; with --breakdown also each write's stages (pack, IDs, compress, upload, log, publish) (uses --n, --dim, --runs, --repeat, --seed, --device)"`
	Ingest       bool            `name:"ingest" help:"measure ingest (Add of Flat and of Vectors, Upsert, import of a .npy) and Open against a plain copy or read of the same bytes, each call in a fresh process with its peak memory (uses --n, --dim, --runs: processes per operation)"`
	Peers        bool            `name:"peers" help:"also run chromem-go and, where Python imports faiss, FAISS IndexFlatIP on the same data and queries, one query and --batch queries (${faiss_install})"`
	Filter       string          `name:"filter" placeholder:"LIST" help:"measure filtered searches instead of the search tiers: for each share of the rows in this comma LIST (e.g. 0.001,0.01,0.1) a Where admitting that share, beside the unfiltered search and an index holding only those rows, interleaved in every group, every answer checked against the subset index's (uses --n, --dim, --k, --metric, --device, --runs, --repeat, --seed, --workers, and --precision when it names one precision)"`
	CFloor       bool            `name:"cfloor" help:"also time an independent C read loop (internal/bench/testdata/readloop.c, built now with $$CC or gcc -O3 -march=native -fopenmp) over a buffer of the slab's bytes on as many threads as the fallback has workers, interleaved with the tiers in every group, and state the fallback and its read floor as multiples of it"`
	Batch        int             `name:"batch" default:"64" help:"queries in the batch comparison of --peers (0: none)"`
	BatchRepeat  int             `name:"batch-repeat" default:"2" help:"timed batch calls per group (--peers)"`
	BatchRuns    int             `name:"batch-runs" default:"5" help:"independent groups of batch calls (--peers)"`
	Python       string          `name:"python" placeholder:"PYTHON" help:"PYTHON interpreter for FAISS (default: ${pythons})"`
	Concurrency  string          `name:"concurrency" placeholder:"LIST" help:"measure single searches from this comma list of concurrent callers (e.g. 1,8,64,256), coalescing on and off, the GPU too with --device gpu, the peers with --peers; uses --n, --dim, --k, --metric, --duration"`
	Duration     time.Duration   `name:"duration" default:"2s" help:"time per cell of --concurrency"`
	CoalesceMax  int             `name:"coalesce-max" default:"0" help:"Config.Coalesce.MaxQueries of --concurrency's coalescing-on rows (0: the default)"`
	CoalesceWait time.Duration   `name:"coalesce-wait" default:"0s" help:"Config.Coalesce.Wait of --concurrency's coalescing-on rows"`
	Soak         time.Duration   `name:"soak" default:"0s" help:"run mixed searches and writes for this long (e.g. 60s), every answer checked, memory sampled; exit 1 on any error or wrong answer (uses --n, --dim, --k, --device)"`
	Precision    string          `name:"precision" placeholder:"LIST" help:"measure storage precisions instead of the search tiers: a comma LIST of f32, f16, int8 (f32 first: the others are checked against it), each on the CPU path (or with --device gpu on a GPU, software adapters included) with rows rescored, bytes read, the Approximate mode's recall and a --batch call; with --peers FAISS IndexFlat and IndexScalarQuantizer fp16/8bit beside them (uses --n, --dim, --k, --metric, --nq, --runs, --repeat, --batch, --batch-runs, --seed, --workers)"`
	Clustered    bool            `name:"clustered" help:"with --precision: clustered data (1,000 Gaussian centres) instead of uniform random"`
	Shards       string          `name:"shards" placeholder:"LIST" help:"compare each adapter of this comma LIST alone with all of them sharding one index (several Config.Adapters), Device GPU: an entry is a backend (vulkan, metal, dx12, gl), a name fragment, or backend:name; times SearchBatch for the batch sizes of --paths (default 1,8,64); uses --n, --dim, --k, --metric, --runs, --repeat, --seed"`
	Workers      int             `name:"workers" default:"0" help:"goroutines of the fallback (0: GOMAXPROCS)"`
	CPUKernel    string          `name:"cpu-kernel" placeholder:"SET" help:"run the float32 CPU kernels (Info.CPUKernel: search, read floor, rescore) with SET instead of the best this CPU runs, to measure another CPU's code path here; this CPU runs ${cpu_kernels}"`
	QuantKernel  string          `name:"quant-kernel" placeholder:"SET" help:"run the compressed-row kernels (Info.QuantKernel) with SET instead of the best this CPU runs; this CPU runs ${quant_kernels}"`
	Threshold    float64         `name:"threshold" default:"0" help:"consistency threshold on |score − float64 reference| (0: 8·√dim·2⁻²⁴·scale, see bench/SCHEMA.md)"`
	DeviceCheck  string          `name:"device-check" placeholder:"DIR" help:"run the device check (bench/DEVICE-CHECK.md) and write DIR/report.json and DIR/summary.txt: one deadline, steps by value, every answer checked, every search on the GPU; exit 1 when it fails (uses --seed, --adapter and the --check-* flags)"`
	CheckRows    int             `name:"check-rows" default:"4000000" help:"rows of the device check"`
	CheckDim     int             `name:"check-dim" default:"768" help:"dimension of the device check"`
	CheckBatches string          `name:"check-batches" default:"1,64,256,1024" placeholder:"LIST" help:"batch sizes of the device check's float32 searches"`
	CheckTime    time.Duration   `name:"check-deadline" default:"7m" help:"the device check's deadline for the whole run"`
	CheckSmoke   bool            `name:"check-smoke" help:"device check on a software adapter, without the NVIDIA assertions (CI); never on a GPU machine"`
	CheckPeak    float64         `name:"check-peak-gbps" default:"0" help:"the card's memory bandwidth in GB/s for the device check's percentages (0: by its name, from a table)"`
	CheckSoak    time.Duration   `name:"check-soak" default:"30s" help:"the device check's soak, when time is left"`
	CheckNeg     string          `name:"check-negative" placeholder:"VERDICT" help:"the verdict of bench/device-check.sh's negative control (ok, or FAIL: why), recorded with the device check's assertions"`
	// Args catches stray arguments, to say that bench takes flags only.
	Args []string `arg:"" optional:"" hidden:""`

	set map[string]bool // the flags the command line gave
}

func (*flags) Help() string {
	return `Measures umbra's search tiers: groups of repeats keeping the minimum, many
independent groups, median, range and jitter, speed-ups paired inside each
group, every tier checked against a float64 reference in the same run, and
the premise of every figure printed beside it. The JSON report's schema is
bench/SCHEMA.md.

Exit status: 0 when every tier that ran agrees with the reference, 1 on a
consistency failure or a tier error, 2 for bad flags or input files.`
}

func (*flags) Examples() []string {
	return []string{
		"bench                                 # 50,000×768, k=10, every tier the machine can run",
		"bench --device gpu --runs 5           # force the GPU tiers, software adapters included",
		"bench --tiers list --breakdown        # where the time of the per-call path goes",
		"bench --json - --plot bench.png       # JSON on stdout (schema: bench/SCHEMA.md), a PNG",
		"bench --peers --device cpu            # chromem-go and FAISS on the same data, one query and 64",
		"bench --data base.fvecs --queries q.npy",
		"bench --concurrency 1,8,64,256 --peers  # many callers at once, coalescing on and off",
		"bench --soak 60s                      # mixed load, every answer checked, memory sampled",
		"bench --device gpu --tiers resident --paths 1,8,64   # fused vs radix selection",
		"bench --precision f32,f16,int8 --peers # compressed rows, exact answers, beside FAISS",
	}
}

// parse reads the command line. helped says -h printed the help on stderr
// instead.
func parse(args []string, stderr io.Writer) (f *flags, helped bool, err error) {
	f = &flags{}
	kctx, helped, err := cmdline.Parse(f, args, cmdline.Options{
		Name:        "bench",
		Description: "umbra's benchmark: every figure with its premise, every answer checked.",
		Help:        stderr,
		Vars: kong.Vars{"faiss_install": peers.FAISSInstall, "pythons": strings.Join(peers.DefaultPythons, ", then "),
			"cpu_kernels":   strings.Join(kernelset.Sets(kernelset.Float32), ", "),
			"quant_kernels": strings.Join(kernelset.Sets(kernelset.Compressed), ", ")},
	})
	switch {
	case helped:
		return nil, true, nil
	case err != nil:
		return nil, false, usageError{err.Error()}
	case len(f.Args) > 0:
		return nil, false, usagef("unexpected argument %q (flags only; see -h)", f.Args[0])
	}
	f.set = map[string]bool{}
	for _, fl := range kctx.Flags() {
		f.set[fl.Name] = cmdline.Given(kctx, fl.Name)
	}
	return f, false, nil
}

// runSeed is --seed, or a seed from the clock when it was not given.
func (f *flags) runSeed() uint64 {
	if f.set["seed"] {
		return f.Seed
	}
	return uint64(time.Now().UnixNano())
}

// generatedSize checks --dim, --n and --k for a run on generated data.
func (f *flags) generatedSize() error {
	if err := inRange("dim", f.Dim, 1, maxDim); err != nil {
		return err
	}
	if err := inRange("n", f.N, 1, maxValues/f.Dim); err != nil {
		return err
	}
	return inRange("k", f.K, 1, f.N)
}

// knownBackend says whether b (lower case) names a graphics API, or none.
func knownBackend(b string) bool {
	switch b {
	case "", "vulkan", "metal", "dx12", "gl":
		return true
	}
	return false
}

func inRange(name string, v, lo, hi int) error {
	if v < lo || v > hi {
		return usagef("--%s %d out of range: want %d..%d", name, v, lo, hi)
	}
	return nil
}

// options turns flags into run options, checking every range.
func (f *flags) options() (bench.Options, error) {
	var o bench.Options
	var err error
	if o.Tiers, err = bench.ParseTiers(f.Tiers); err != nil {
		return o, usagef("--tiers: %v", err)
	}
	if o.Metric, err = umbra.ParseMetric(f.Metric); err != nil {
		return o, usagef("--metric: unknown metric %q (want cosine, dot or l2)", f.Metric)
	}
	if o.Device, err = engine.ParseDevice(f.Device); err != nil {
		return o, usagef("--device: unknown device %q (want auto, gpu or cpu)", f.Device)
	}
	o.Adapter = f.Adapter.Select()
	for _, c := range []struct {
		name      string
		v, lo, hi int
	}{
		{"repeat", f.Repeat, 1, maxGroups},
		{"runs", f.Runs, 1, maxGroups},
		{"warmup", f.Warmup, 0, maxGroups},
		{"reps", f.Reps, 1, maxGroups},
		{"nq", f.NQ, 1, 1 << 20},
		{"workers", f.Workers, 0, 1 << 12},
		{"batch", f.Batch, 0, 1 << 16},
		{"batch-repeat", f.BatchRepeat, 1, maxGroups},
		{"batch-runs", f.BatchRuns, 1, maxGroups},
	} {
		if err := inRange(c.name, c.v, c.lo, c.hi); err != nil {
			return o, err
		}
	}
	if f.Threshold < 0 || math.IsNaN(f.Threshold) || math.IsInf(f.Threshold, 0) {
		return o, usagef("--threshold %g out of range: want a finite value ≥ 0 (0: computed)", f.Threshold)
	}
	o.K, o.Repeat, o.Runs, o.Warmup, o.Threshold = f.K, f.Repeat, f.Runs, f.Warmup, f.Threshold
	o.Breakdown, o.Reps, o.Workers = f.Breakdown, f.Reps, f.Workers
	o.Peers, o.Batch, o.BatchRepeat, o.BatchRuns = f.Peers, f.Batch, f.BatchRepeat, f.BatchRuns
	o.CFloor = f.CFloor
	if o.CFloor && !slices.Contains(o.Tiers, bench.TierFallback) {
		return o, usagef("--cfloor compares with the fallback tier: add fallback to --tiers")
	}
	if f.Python != "" {
		o.Pythons = []string{f.Python}
	}
	if f.Paths != "" {
		for _, part := range strings.Split(f.Paths, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(part))
			if err != nil || n < 1 || n > 1<<16 {
				return o, usagef("--paths: %q is not a batch size in 1..65536", part)
			}
			o.Paths = append(o.Paths, n)
		}
	}
	if o.Peers && !slices.Contains(o.Tiers, bench.TierFallback) {
		return o, usagef("--peers compares with the fallback tier: add fallback to --tiers")
	}
	for _, name := range []string{"batch", "batch-repeat", "batch-runs", "python"} {
		if f.set[name] && !f.Peers && f.Precision == "" {
			return o, usagef("--%s applies to --peers only", name)
		}
	}
	if f.JSONOut == "" && f.set["json"] {
		return o, usagef("--json needs a file name, or - for stdout")
	}
	if f.PlotOut != "" && !strings.HasSuffix(strings.ToLower(f.PlotOut), ".png") {
		return o, usagef("--plot %q: the file name must end in .png", f.PlotOut)
	}
	return o, nil
}

// forceKernels applies --cpu-kernel and --quant-kernel for the whole run
// (before any index exists, so no search sees the switch) and says so on
// stdout, beside the sets the CPU would have chosen; restore undoes it.
func (f *flags) forceKernels(stdout io.Writer) (restore func(), err error) {
	var undo []func()
	restore = func() {
		for _, u := range slices.Backward(undo) {
			u()
		}
	}
	for _, k := range []struct {
		flag, name string
		fam        kernelset.Family
	}{{"cpu-kernel", f.CPUKernel, kernelset.Float32}, {"quant-kernel", f.QuantKernel, kernelset.Compressed}} {
		if k.name == "" {
			continue
		}
		if f.Ingest {
			restore()
			return nil, usagef("--%s: --ingest measures in child processes of its own, which run the best kernels", k.flag)
		}
		best := kernelset.Sets(k.fam)[0]
		u, err := kernelset.Force(k.fam, k.name)
		if err != nil {
			restore()
			return nil, usagef("--%s: %v", k.flag, err)
		}
		undo = append(undo, u)
		fmt.Fprintf(stdout, "%s kernels forced to %s by --%s (this CPU's best: %s)\n", k.fam, k.name, k.flag, best)
	}
	return restore, nil
}

// readMatrix reads a data file for flag name, as a usage error on failure.
func readMatrix(ctx context.Context, name, path string) (*host.Matrix, error) {
	m, err := host.ReadMatrixFile(ctx, path)
	if err != nil {
		return nil, usagef("--%s: %v", name, err)
	}
	if m.Rows < 1 {
		return nil, usagef("--%s %q holds no vectors", name, path)
	}
	return m, nil
}

// workload loads or generates the vectors and queries. It returns the
// report's description of each source.
func (f *flags) workload(ctx context.Context, progress func(string)) (w *bench.Workload, data, queries string, seed *uint64, err error) {
	var dm, qm *host.Matrix
	if f.Data != "" {
		if dm, err = readMatrix(ctx, "data", f.Data); err != nil {
			return
		}
		if f.set["dim"] && f.Dim != dm.Dim {
			err = usagef("dim mismatch: --dim %d but --data %q has dimension %d", f.Dim, f.Data, dm.Dim)
			return
		}
	}
	if f.Queries != "" {
		if qm, err = readMatrix(ctx, "queries", f.Queries); err != nil {
			return
		}
	}
	dim := f.Dim
	switch {
	case dm != nil:
		dim = dm.Dim
	case qm != nil && !f.set["dim"]:
		dim = qm.Dim
	}
	if qm != nil && qm.Dim != dim {
		what := fmt.Sprintf("--dim %d", dim)
		if dm != nil {
			what = fmt.Sprintf("--data %q has dimension %d", f.Data, dim)
		}
		err = usagef("dim mismatch: --queries %q has dimension %d but %s", f.Queries, qm.Dim, what)
		return
	}
	if err = inRange("dim", dim, 1, maxDim); err != nil {
		return
	}
	n := f.N
	if dm != nil && !f.set["n"] {
		n = dm.Rows
	}
	if dm != nil && n > dm.Rows {
		err = usagef("--n %d out of range: --data %q holds %d vectors", n, f.Data, dm.Rows)
		return
	}
	if err = inRange("n", n, 1, maxValues/dim); err != nil {
		return
	}
	if err = inRange("k", f.K, 1, n); err != nil {
		return
	}
	s := f.runSeed()
	var flat []float32
	if dm != nil {
		flat, data = dm.Data[:n*dim], f.Data
	} else {
		progress(fmt.Sprintf("generating %d×%d random vectors (seed %d)", n, dim, s))
		flat, data, seed = bench.RandomMatrix(n, dim, s, 1), "random", &s
	}
	var qs [][]float32
	if qm != nil {
		qs, queries = make([][]float32, qm.Rows), f.Queries
		for i := range qs {
			qs[i] = qm.Row(i)
		}
	} else {
		qs, queries, seed = bench.RandomRows(f.NQ, dim, s, 2), "random", &s
	}
	w = bench.NewWorkload(flat, dim, qs, s)
	if f.Peers && f.Batch > 0 {
		if qm != nil {
			// The file's rows, repeated in turn when it holds fewer.
			w.Batch = w.BatchQueries(f.Batch)
			w.BatchFrom = fmt.Sprintf("%s, first %d rows", f.Queries, min(f.Batch, qm.Rows))
			if qm.Rows < f.Batch {
				w.BatchFrom = fmt.Sprintf("%s, its %d rows repeated in turn", f.Queries, qm.Rows)
			}
		} else {
			w.Batch, w.BatchFrom = bench.RandomRows(f.Batch, dim, s, 3), fmt.Sprintf("random, seed %d", s)
			seed = &s
		}
	}
	return w, data, queries, seed, nil
}

// run is the command without the process around it, so tests can call it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, helped, err := parse(args, stderr)
	if helped {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	opt, err := f.options()
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	restore, err := f.forceKernels(stdout)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	defer restore()
	if f.DeviceCheck != "" {
		return runDeviceCheck(ctx, f, opt, stdout, stderr)
	}
	if f.Store {
		return runStore(ctx, f, opt, stdout, stderr)
	}
	if f.Concurrency != "" {
		return runConcurrency(ctx, f, opt, stdout, stderr)
	}
	if f.Soak != 0 {
		return runSoak(ctx, f, opt, stdout, stderr)
	}
	if f.Ingest {
		return runIngest(ctx, f, opt, stdout, stderr)
	}
	if f.Filter != "" {
		return runFilter(ctx, f, opt, stdout, stderr)
	}
	if f.Precision != "" {
		return runPrecision(ctx, f, opt, stdout, stderr)
	}
	if f.Shards != "" {
		return runShards(ctx, f, opt, stdout, stderr)
	}
	progress := newProgress(stderr)
	defer progress.done()
	opt.Progress = progress.show
	w, data, queries, seed, err := f.workload(ctx, progress.show)
	if err != nil {
		progress.done()
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	rep, err := bench.Run(ctx, w, opt)
	progress.done()
	var refused *bench.InputError
	if errors.As(err, &refused) {
		// Only files can hold what the engine refuses: name the flag.
		fmt.Fprintf(stderr, "bench: --%s: %v\n", refused.What, refused.Err)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	rep.Data, rep.QueriesFrom, rep.Seed = data, queries, seed

	text := stdout
	if f.JSONOut == "-" {
		text = stderr
	}
	if err := rep.WriteText(text); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	if f.JSONOut != "" {
		if err := writeJSON(f.JSONOut, stdout, rep); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	}
	if f.PlotOut != "" {
		if err := bench.WritePlot(f.PlotOut, rep); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	}
	if !rep.Pass {
		return 1
	}
	return 0
}

// runIngest is --ingest: ingest and Open in child processes.
func runIngest(ctx context.Context, f *flags, opt bench.Options, stdout, stderr io.Writer) int {
	if f.Data != "" || f.Peers || f.Store || f.JSONOut != "" || f.PlotOut != "" {
		fmt.Fprintln(stderr, "bench: --ingest runs on generated data and prints a table: drop --data, --peers, --store, --json and --plot")
		return 2
	}
	if err := inRange("n", f.N, 1, maxValues/max(f.Dim, 1)); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	fmt.Fprintln(stdout, "umbra bench --ingest")
	rep, err := bench.RunIngest(ctx, bench.IngestOptions{N: f.N, Dim: f.Dim, Runs: opt.Runs, Exe: exe})
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	rep.WriteIngest(stdout)
	return 0
}

// runStore is --store: the store measurements on random data.
func runStore(ctx context.Context, f *flags, opt bench.Options, stdout, stderr io.Writer) int {
	if f.Data != "" || f.Peers || f.JSONOut != "" || f.PlotOut != "" {
		fmt.Fprintln(stderr, "bench: --store runs on random data and prints a table: drop --data, --peers, --json and --plot")
		return 2
	}
	if err := inRange("n", f.N, 1, maxValues/max(f.Dim, 1)); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	seed := f.runSeed()
	fmt.Fprintf(stdout, "umbra bench --store · seed %d\n", seed)
	rep, err := bench.RunStore(ctx, bench.StoreOptions{N: f.N, Dim: f.Dim, Runs: opt.Runs, Repeat: opt.Repeat,
		Device: opt.Device, Adapter: opt.Adapter, Seed: seed})
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	rep.Write(stdout)
	if f.Breakdown {
		stages, err := bench.RunIngestStages(ctx, bench.StoreOptions{N: f.N, Dim: f.Dim, Runs: opt.Runs, Repeat: opt.Repeat,
			Device: opt.Device, Adapter: opt.Adapter, Seed: seed})
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		stages.Write(stdout)
	}
	return 0
}

// runFilter is --filter: filtered searches beside the unfiltered one and
// an index of the admitted rows alone.
func runFilter(ctx context.Context, f *flags, opt bench.Options, stdout, stderr io.Writer) int {
	if f.Data != "" || f.Queries != "" || f.Peers || f.JSONOut != "" || f.PlotOut != "" {
		fmt.Fprintln(stderr, "bench: --filter runs on generated data and prints a table: drop --data, --queries, --peers, --json and --plot")
		return 2
	}
	var fracs []float64
	for _, part := range strings.Split(f.Filter, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || !(v > 0 && v <= 1) {
			fmt.Fprintf(stderr, "bench: --filter: %q is not a share of the rows in (0, 1]\n", part)
			return 2
		}
		fracs = append(fracs, v)
	}
	prec := umbra.F32
	if f.Precision != "" {
		p, err := umbra.ParsePrecision(strings.TrimSpace(f.Precision))
		if err != nil {
			fmt.Fprintf(stderr, "bench: --precision with --filter names one precision (f32, f16 or int8), got %q\n", f.Precision)
			return 2
		}
		prec = p
	}
	if err := f.generatedSize(); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	device := engine.CPU
	if opt.Device == engine.GPU {
		device = engine.GPU
	}
	progress := newProgress(stderr)
	rep, err := bench.RunFilter(ctx, bench.FilterOptions{Device: device, Adapter: opt.Adapter, N: f.N, Dim: f.Dim, K: f.K,
		Fractions: fracs, Metric: opt.Metric, Precision: prec, Runs: opt.Runs, Repeat: opt.Repeat, Seed: f.runSeed(),
		Workers: opt.Workers, Progress: progress.show})
	progress.done()
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	rep.Write(stdout)
	for _, r := range rep.Rows {
		if !r.Exact {
			fmt.Fprintf(stderr, "bench: the filtered search admitting %g of the rows did not return the subset index's answer\n", r.Fraction)
			return 1
		}
	}
	return 0
}

// runPrecision is --precision: the storage precisions on random data.
func runPrecision(ctx context.Context, f *flags, opt bench.Options, stdout, stderr io.Writer) int {
	if f.Data != "" || f.Queries != "" || f.JSONOut != "" || f.PlotOut != "" {
		fmt.Fprintln(stderr, "bench: --precision runs on generated data and prints a table: drop --data, --queries, --json and --plot")
		return 2
	}
	var precs []umbra.Precision
	for _, s := range strings.Split(f.Precision, ",") {
		p, err := umbra.ParsePrecision(strings.TrimSpace(s))
		if err != nil || strings.TrimSpace(s) == "" {
			fmt.Fprintf(stderr, "bench: --precision: unknown precision %q (want f32, f16 or int8)\n", s)
			return 2
		}
		precs = append(precs, p)
	}
	if err := f.generatedSize(); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	seed := f.runSeed()
	progress := newProgress(stderr)
	device := engine.CPU
	if opt.Device == engine.GPU {
		device = engine.GPU
	}
	rep, err := bench.RunPrecision(ctx, bench.PrecisionOptions{Device: device, Adapter: opt.Adapter, N: f.N, Dim: f.Dim, K: f.K, Queries: f.NQ, Batch: f.Batch,
		Precisions: precs, Metric: opt.Metric, Runs: opt.Runs, Repeat: opt.Repeat, BatchRuns: opt.BatchRuns,
		Seed: seed, Clustered: f.Clustered, Workers: opt.Workers, Peers: f.Peers, Pythons: opt.Pythons, Progress: progress.show,
		Breakdown: f.Breakdown})
	progress.done()
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	rep.Write(stdout)
	for _, r := range rep.Rows {
		if strings.HasPrefix(r.Name, "umbra") && !r.Exact {
			fmt.Fprintf(stderr, "bench: %s did not return the float32 answer\n", r.Name)
			return 1
		}
	}
	return 0
}

// parseShards reads --shards: each entry a backend, a name fragment, or
// backend:name.
func parseShards(list string) ([]engine.AdapterSelect, error) {
	var out []engine.AdapterSelect
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		backend, name, both := strings.Cut(part, ":")
		var sel engine.AdapterSelect
		switch b := strings.ToLower(backend); {
		case part == "":
			return nil, usagef("--shards: an empty entry in %q", list)
		case both:
			sel = engine.AdapterSelect{Backend: b, Name: name}
		case b != "" && knownBackend(b):
			sel = engine.AdapterSelect{Backend: b}
		default:
			sel = engine.AdapterSelect{Name: part}
		}
		if !knownBackend(sel.Backend) {
			return nil, usagef("--shards: unknown backend %q (want vulkan, metal, dx12 or gl)", sel.Backend)
		}
		out = append(out, sel)
	}
	if len(out) < 2 {
		return nil, usagef("--shards: name at least two adapters, got %q", list)
	}
	return out, nil
}

// runShards is --shards: each adapter alone beside all of them sharding.
func runShards(ctx context.Context, f *flags, opt bench.Options, stdout, stderr io.Writer) int {
	if f.Data != "" || f.Queries != "" || f.Peers || f.JSONOut != "" || f.PlotOut != "" {
		fmt.Fprintln(stderr, "bench: --shards runs on random data and prints a table: drop --data, --queries, --peers, --json and --plot")
		return 2
	}
	sel, err := parseShards(f.Shards)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	if err := f.generatedSize(); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	batches := opt.Paths
	if len(batches) == 0 {
		batches = []int{1, 8, 64}
	}
	seed := f.runSeed()
	progress := newProgress(stderr)
	rep, err := bench.RunShards(ctx, bench.ShardOptions{N: f.N, Dim: f.Dim, K: f.K, Batches: batches, Shards: sel,
		Metric: opt.Metric, Runs: opt.Runs, Repeat: opt.Repeat, Seed: seed, Progress: progress.show})
	progress.done()
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	rep.Write(stdout)
	for _, r := range rep.Rows {
		if !r.SameIDs {
			fmt.Fprintf(stderr, "bench: %s did not return the fallback's IDs\n", r.Name)
			return 1
		}
	}
	return 0
}

// runDeviceCheck is --device-check: bench/DEVICE-CHECK.md.
func runDeviceCheck(ctx context.Context, f *flags, opt bench.Options, stdout, stderr io.Writer) int {
	o := bench.DeviceCheckOptions{Deadline: f.CheckTime, Smoke: f.CheckSmoke, Rows: f.CheckRows, Dim: f.CheckDim,
		Seed: f.runSeed(), Adapter: opt.Adapter, PeakBytesPerSec: f.CheckPeak * 1e9, Soak: f.CheckSoak, Log: stderr, Negative: f.CheckNeg}
	if err := inRange("check-dim", f.CheckDim, 1, maxDim); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	if err := inRange("check-rows", f.CheckRows, 1, maxValues/f.CheckDim); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	for _, part := range strings.Split(f.CheckBatches, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 || n > 1<<16 {
			fmt.Fprintf(stderr, "bench: --check-batches: %q is not a batch size in 1..65536\n", part)
			return 2
		}
		o.Batches = append(o.Batches, n)
	}
	if f.CheckTime <= 0 || f.CheckPeak < 0 || f.CheckSoak < 0 {
		fmt.Fprintln(stderr, "bench: --check-deadline must be positive, --check-peak-gbps and --check-soak not negative")
		return 2
	}
	if err := os.MkdirAll(f.DeviceCheck, 0o755); err != nil {
		fmt.Fprintln(stderr, "bench: --device-check:", err)
		return 2
	}
	if p, err := exec.LookPath("nvidia-smi"); err == nil && !f.CheckSmoke {
		o.SMI = p
	}
	rep, err := bench.RunDeviceCheck(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "bench: device check:", err)
		return 1
	}
	if err := bench.WriteDeviceCheck(f.DeviceCheck, rep); err != nil {
		fmt.Fprintln(stderr, "bench: device check:", err)
		return 1
	}
	summary, _ := os.ReadFile(filepath.Join(f.DeviceCheck, "summary.txt"))
	stdout.Write(summary)
	if !rep.Passed {
		return 1
	}
	return 0
}
