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
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/host"
)

//go:embed faiss_concurrent.py
var faissConcurrentScript []byte

// FAISSLevel is one level of concurrent callers.
type FAISSLevel struct {
	Threads  int     `json:"threads"`
	Searches int     `json:"searches"`
	QPS      float64 `json:"qps"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
}

// FAISSConcurrent is what faiss_concurrent.py measured.
type FAISSConcurrent struct {
	Version string       `json:"faiss_version"`
	Index   string       `json:"index"`
	Threads int          `json:"omp_threads"`
	Levels  []FAISSLevel `json:"levels"`
	Error   string       `json:"error"`
}

// RunFAISSConcurrent times FAISS's flat index searched by as many Python
// threads as each level says, one query per call, for d per level.
func RunFAISSConcurrent(ctx context.Context, python string, data []float32, dim int, queries [][]float32,
	m umbra.Metric, k int, levels []int, d time.Duration) (*FAISSConcurrent, error) {
	dir, err := os.MkdirTemp("", "umbra-faiss-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	dataPath, qPath := filepath.Join(dir, "data.npy"), filepath.Join(dir, "queries.npy")
	if err := host.WriteMatrixFile(dataPath, &host.Matrix{Rows: len(data) / dim, Dim: dim, Data: data}, ""); err != nil {
		return nil, err
	}
	if err := host.WriteMatrixFile(qPath, rowsMatrix(queries, dim), ""); err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "faiss_concurrent.py")
	if err := os.WriteFile(script, faissConcurrentScript, 0o644); err != nil {
		return nil, err
	}
	ls := make([]string, len(levels))
	for i, l := range levels {
		ls[i] = strconv.Itoa(l)
	}
	cmd := exec.CommandContext(ctx, python, script, "--data", dataPath, "--queries", qPath, "--metric", m.String(),
		"--k", strconv.Itoa(k), "--threads", strings.Join(ls, ","), "--duration", strconv.FormatFloat(d.Seconds(), 'f', 3, 64))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var out FAISSConcurrent
	if jerr := json.Unmarshal(stdout.Bytes(), &out); jerr != nil {
		if runErr != nil {
			return nil, fmt.Errorf("faiss_concurrent.py: %v: %s", runErr, lastLine(stderr.String(), runErr))
		}
		return nil, fmt.Errorf("faiss_concurrent.py printed no report: %v", jerr)
	}
	if out.Error != "" {
		return nil, errors.New(out.Error)
	}
	if runErr != nil {
		return nil, fmt.Errorf("faiss_concurrent.py: %v: %s", runErr, lastLine(stderr.String(), runErr))
	}
	if len(out.Levels) != len(levels) {
		return nil, fmt.Errorf("faiss_concurrent.py reported %d levels, want %d", len(out.Levels), len(levels))
	}
	return &out, nil
}
