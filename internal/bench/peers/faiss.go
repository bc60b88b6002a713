package peers

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/host"
)

// faissScript is faiss_flat.py, embedded so that the command runs from any
// directory and the script always matches the binary that parses its
// output.
//
//go:embed faiss_flat.py
var faissScript []byte

// FAISSInstall is how to get FAISS on Debian and Ubuntu; the script needs
// nothing else.
const FAISSInstall = "apt-get install python3-faiss python3-numpy libopenblas0-pthread"

// DefaultPythons are the interpreters tried in turn when none is named:
// the system one first, where Debian's python3-faiss lands, then whatever
// python3 the PATH finds.
var DefaultPythons = []string{"/usr/bin/python3", "python3"}

// FAISSPremise says what one timed FAISS call includes.
func FAISSPremise(index string, threads int, m umbra.Metric) string {
	query, stored := "then index.search", "the index built outside timing"
	if m == umbra.Cosine {
		query, stored = "normalised (faiss.normalize_L2), then index.search", "the stored vectors normalised and the index built outside timing"
	}
	th := "as installed"
	if threads > 0 {
		th = fmt.Sprintf("as installed: faiss.omp_get_max_threads() = %d", threads)
	}
	return fmt.Sprintf("FAISS %s through faiss_flat.py under CPython, in its own process after umbra's groups and timed there "+
		"in the same groups over the same queries: the query made a (1, dim) float32 array, %s; %s; OpenMP/BLAS threads %s",
		index, query, stored, th)
}

// DescribeBLAS names the BLAS a FAISS run loaded, for its report. FAISS's
// batch search is one matrix product, so the library decides its time:
// on Debian, python3-faiss alone links the reference BLAS, under which a
// 64-query search at 50,000×768 took 1.3–1.5 s here against 0.07–0.27 s
// with libopenblas0-pthread installed. "" when the run could not tell.
func DescribeBLAS(libs []string) string {
	if len(libs) == 0 {
		return ""
	}
	joined := strings.Join(libs, ", ")
	lower := strings.ToLower(joined)
	for _, fast := range []string{"openblas", "mkl", "blis", "atlas", "accelerate"} {
		if strings.Contains(lower, fast) {
			return "BLAS " + joined
		}
	}
	return "the reference BLAS (" + joined + "), many times slower than an optimised one: " + FAISSInstall
}

// FindFAISS returns the first interpreter of pythons (DefaultPythons when
// empty) that imports faiss and numpy. The error says why none did; wrap
// it with FAISSInstall for the user.
func FindFAISS(ctx context.Context, pythons []string) (string, error) {
	if len(pythons) == 0 {
		pythons = DefaultPythons
	}
	var why []string
	for _, py := range pythons {
		path, err := exec.LookPath(py)
		if err != nil {
			why = append(why, py+": not found")
			continue
		}
		out, err := exec.CommandContext(ctx, path, "-c", "import faiss, numpy").CombinedOutput()
		if err == nil {
			return path, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		why = append(why, py+": "+lastLine(string(out), err))
	}
	return "", errors.New(strings.Join(why, "; "))
}

// lastLine is the last non-empty line of a failed command's output (the
// exception of a Python traceback), or its error.
func lastLine(out string, err error) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return err.Error()
}

// FAISSRun says what faiss_flat.py measures.
type FAISSRun struct {
	Python string // interpreter, from FindFAISS
	Dir    string // where the .npy files and the script go (a fresh temporary directory when empty)
	Metric umbra.Metric
	K      int
	Repeat int
	Runs   int
	Warmup int
	// BatchRepeat and BatchRuns group the batch call; no batch without
	// Batch rows.
	BatchRepeat int
	BatchRuns   int
	// Index is "" or "flat" (IndexFlatIP, IndexFlatL2 under l2: exact),
	// "sq_fp16" or "sq_8bit" (IndexScalarQuantizer, trained on the data
	// outside timing: approximate).
	Index string
}

// FAISSResult is what the script measured and answered.
type FAISSResult struct {
	Version       string // faiss.__version__
	NumPy         string
	PythonVersion string
	Threads       int      // faiss.omp_get_max_threads()
	BLAS          []string // the BLAS libraries the process loaded (Linux)
	Index         string   // IndexFlatIP or IndexFlatL2
	GroupsMS      []float64
	BatchGroupsMS []float64
	Top           []umbra.Hit   // for queries[0]
	BatchTop      [][]umbra.Hit // for each batch query
}

// faissJSON is the script's output.
type faissJSON struct {
	Version       string    `json:"faiss_version"`
	NumPy         string    `json:"numpy_version"`
	PythonVersion string    `json:"python_version"`
	Threads       int       `json:"omp_threads"`
	BLAS          []string  `json:"blas"`
	Index         string    `json:"index"`
	GroupsMS      []float64 `json:"groups_ms"`
	BatchGroupsMS []float64 `json:"batch_groups_ms"`
	Top           *topJSON  `json:"top"`
	BatchTop      []topJSON `json:"batch_top"`
	Error         string    `json:"error"`
}

type topJSON struct {
	IDs    []int64   `json:"ids"`
	Scores []float32 `json:"scores"`
}

func (t *topJSON) hits(n int) ([]umbra.Hit, error) {
	if len(t.IDs) != len(t.Scores) {
		return nil, fmt.Errorf("%d ids but %d scores", len(t.IDs), len(t.Scores))
	}
	hits := make([]umbra.Hit, len(t.IDs))
	for i, id := range t.IDs {
		// FAISS pads with -1 when it has fewer than k results.
		if id < 0 || id >= int64(n) {
			return nil, fmt.Errorf("id %d out of range 0..%d", id, n-1)
		}
		hits[i] = umbra.Hit{ID: uint64(id), Score: t.Scores[i]}
	}
	return hits, nil
}

// RunFAISS writes data (n×dim, row-major), queries and batch to .npy files
// and times FAISS over them with faiss_flat.py. Its stderr is kept for the
// error when the script fails.
func RunFAISS(ctx context.Context, r FAISSRun, data []float32, dim int, queries, batch [][]float32) (*FAISSResult, error) {
	dir := r.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "umbra-faiss-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	n := len(data) / dim
	write := func(name string, m *host.Matrix) (string, error) {
		path := filepath.Join(dir, name)
		return path, host.WriteMatrixFile(path, m, "")
	}
	dataPath, err := write("data.npy", &host.Matrix{Rows: n, Dim: dim, Data: data})
	if err != nil {
		return nil, err
	}
	qPath, err := write("queries.npy", rowsMatrix(queries, dim))
	if err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "faiss_flat.py")
	if err := os.WriteFile(script, faissScript, 0o644); err != nil {
		return nil, err
	}
	args := []string{script, "--data", dataPath, "--queries", qPath, "--metric", r.Metric.String(),
		"--k", strconv.Itoa(r.K), "--repeat", strconv.Itoa(r.Repeat), "--runs", strconv.Itoa(r.Runs),
		"--warmup", strconv.Itoa(r.Warmup)}
	if r.Index != "" {
		args = append(args, "--index", r.Index)
	}
	if len(batch) > 0 {
		bPath, err := write("batch.npy", rowsMatrix(batch, dim))
		if err != nil {
			return nil, err
		}
		args = append(args, "--batch", bPath, "--batch-repeat", strconv.Itoa(r.BatchRepeat),
			"--batch-runs", strconv.Itoa(r.BatchRuns))
	}
	cmd := exec.CommandContext(ctx, r.Python, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var out faissJSON
	if runErr != nil {
		if json.Unmarshal(stdout.Bytes(), &out) == nil && out.Error != "" {
			return nil, errors.New(out.Error)
		}
		return nil, fmt.Errorf("faiss_flat.py: %v: %s", runErr, lastLine(stderr.String(), runErr))
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("faiss_flat.py printed no report: %v", err)
	}
	if len(out.GroupsMS) != r.Runs || out.Top == nil {
		return nil, fmt.Errorf("faiss_flat.py reported %d groups (want %d), top-k present %v", len(out.GroupsMS), r.Runs, out.Top != nil)
	}
	res := &FAISSResult{Version: out.Version, NumPy: out.NumPy, PythonVersion: out.PythonVersion, Threads: out.Threads,
		BLAS: out.BLAS, Index: out.Index, GroupsMS: out.GroupsMS, BatchGroupsMS: out.BatchGroupsMS}
	if res.Top, err = out.Top.hits(n); err != nil {
		return nil, fmt.Errorf("faiss_flat.py top-k: %w", err)
	}
	if len(batch) > 0 {
		if len(out.BatchGroupsMS) != r.BatchRuns || len(out.BatchTop) != len(batch) {
			return nil, fmt.Errorf("faiss_flat.py reported %d batch groups (want %d) and %d batch answers (want %d)",
				len(out.BatchGroupsMS), r.BatchRuns, len(out.BatchTop), len(batch))
		}
		res.BatchTop = make([][]umbra.Hit, len(batch))
		for i := range out.BatchTop {
			if res.BatchTop[i], err = out.BatchTop[i].hits(n); err != nil {
				return nil, fmt.Errorf("faiss_flat.py batch query %d: %w", i, err)
			}
		}
	}
	return res, nil
}

// rowsMatrix copies rows into one matrix for writing.
func rowsMatrix(rows [][]float32, dim int) *host.Matrix {
	m := &host.Matrix{Rows: len(rows), Dim: dim, Data: make([]float32, 0, len(rows)*dim)}
	for _, r := range rows {
		m.Data = append(m.Data, r...)
	}
	return m
}
