package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
)

// IngestChildEnv, set in a process's environment, makes cmd/bench run one
// ingest operation (IngestChild) instead of its flags: RunIngest starts
// itself once per measured call, so every figure, peak memory above all,
// comes from a fresh process.
const IngestChildEnv = "UMBRA_BENCH_INGEST_CHILD"

// IngestOptions sizes the ingest measurements.
type IngestOptions struct {
	N, Dim int
	Runs   int    // child processes per operation; medians are over them
	Exe    string // the executable that answers IngestChildEnv (cmd/bench)
	Dir    string // where the data and store files go ("" for a temporary directory)
}

// ingestSample is what one child reports.
type ingestSample struct {
	Ms        float64 `json:"ms"`
	PeakMiB   float64 `json:"peak_mib"`   // peak resident memory during the call
	BeforeMiB float64 `json:"before_mib"` // resident memory when the call began
}

// ingestOps are the measured operations, each with its baseline: the same
// bytes moved without the engine.
var ingestOps = []struct{ name, op, base, baseName, note string }{
	{"Add (Flat)", "addflat", "copy", "copy", "rows in memory → a new index"},
	{"Add (Vectors)", "add", "copy", "copy", ""},
	{"Upsert, every ID new", "upsert-new", "copy", "copy", ""},
	{"Upsert, replacing every row", "upsert-replace", "copy", "copy", "in place, checked first (with a store or a device the old rows are kept aside to undo)"},
	{"import .npy (streamed Add)", "import", "read-npy", "read file", "what umbra build does before it saves"},
	{"import .npy (read, then Add of Flat)", "import-read", "read-npy", "read file", "the whole file read first, then packed in place"},
	{"Open", "open", "read-store", "read file", "rows mapped and CRC-checked, IDs read"},
}

// RunIngest measures ingest and Open against a plain copy or read of the
// same bytes, each call in a fresh child process that reports its time
// and its peak resident memory (Linux VmHWM, reset just before the call).
// Children alternate operation and baseline.
func RunIngest(ctx context.Context, o IngestOptions) (*StoreReport, error) {
	o.Runs = max(o.Runs, 1)
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "umbra-ingest-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	// Values in [-1, 1) from a fixed xorshift sequence (as
	// packed.Synthetic), cheap at a billion values.
	m := &host.Matrix{Rows: o.N, Dim: o.Dim, Data: make([]float32, o.N*o.Dim)}
	x := uint32(2463534242)
	for i := range m.Data {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		m.Data[i] = float32(x)/float32(1<<32)*2 - 1
	}
	if err := host.WriteMatrixFile(filepath.Join(dir, "data.npy"), m, ""); err != nil {
		return nil, err
	}
	ix, err := engine.New(ctx, engine.Config{Dim: o.Dim, Device: engine.CPU})
	if err != nil {
		return nil, err
	}
	_, err = ix.Add(ctx, umbra.Flat(m.Data, ix.Dim()))
	if err == nil {
		err = ix.Save(ctx, filepath.Join(dir, "store.umbra"))
	}
	ix.Close()
	if err != nil {
		return nil, err
	}
	m = nil
	debug.FreeOSMemory()

	rep := &StoreReport{N: o.N, Dim: o.Dim}
	for _, op := range ingestOps {
		var a, b []ingestSample
		for range o.Runs {
			for _, which := range []string{op.base, op.op} {
				smp, err := runChild(ctx, o, dir, which)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", which, err)
				}
				if which == op.op {
					a = append(a, smp)
				} else {
					b = append(b, smp)
				}
			}
		}
		row := StoreRow{Name: op.name, Baseline: op.baseName, Note: op.note}
		row.Ms, row.PeakMiB, row.BeforeMiB = medianSample(a)
		row.BaseMs, row.BasePeakMiB, _ = medianSample(b)
		if row.BaseMs > 0 {
			row.Ratio = row.Ms / row.BaseMs
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

func medianSample(s []ingestSample) (ms, peak, before float64) {
	var t, p, q []float64
	for _, x := range s {
		t, p, q = append(t, x.Ms), append(p, x.PeakMiB), append(q, x.BeforeMiB)
	}
	return Median(t), Median(p), Median(q)
}

func runChild(ctx context.Context, o IngestOptions, dir, op string) (ingestSample, error) {
	cmd := exec.CommandContext(ctx, o.Exe)
	cmd.Env = append(os.Environ(), IngestChildEnv+"="+op+","+dir+","+fmt.Sprint(o.Dim))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return ingestSample{}, fmt.Errorf("child: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	var s ingestSample
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		return ingestSample{}, fmt.Errorf("child said %q: %v", out.String(), err)
	}
	return s, nil
}

// IngestChild runs the one operation spec names ("op,dir,dim", from
// IngestChildEnv) and returns its report as a JSON line: what it loads
// first is not measured, and peak memory is reset just before the call.
func IngestChild(ctx context.Context, spec string) ([]byte, error) {
	var op, dir string
	var dim int
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return nil, fmt.Errorf("bad %s %q", IngestChildEnv, spec)
	}
	op, dir = parts[0], parts[1]
	if _, err := fmt.Sscan(parts[2], &dim); err != nil {
		return nil, fmt.Errorf("bad %s %q: %v", IngestChildEnv, spec, err)
	}
	dataPath, storePath := filepath.Join(dir, "data.npy"), filepath.Join(dir, "store.umbra")
	cpu := engine.Config{Dim: dim, Device: engine.CPU}
	var flat []float32
	var vectors [][]float32
	var ids []uint64
	var target *engine.Index
	defer func() {
		if target != nil {
			target.Close()
		}
	}()
	switch op {
	case "copy", "addflat", "add", "upsert-new", "upsert-replace":
		m, err := host.ReadMatrixFile(ctx, dataPath)
		if err != nil {
			return nil, err
		}
		flat = m.Data
		vectors = make([][]float32, m.Rows)
		ids = make([]uint64, m.Rows)
		for i := range vectors {
			vectors[i], ids[i] = m.Row(i), uint64(i)
		}
		if target, err = engine.New(ctx, cpu); err != nil {
			return nil, err
		}
		if op == "upsert-replace" {
			if _, err := target.Add(ctx, umbra.Flat(flat, target.Dim())); err != nil {
				return nil, err
			}
		}
	}
	var call func() error
	switch op {
	case "copy":
		call = func() error { c := make([]float32, len(flat)); copy(c, flat); runtime.KeepAlive(c); return nil }
	case "addflat":
		call = func() error { _, err := target.Add(ctx, umbra.Flat(flat, target.Dim())); return err }
	case "add":
		call = func() error { _, err := target.Add(ctx, umbra.Vectors(vectors)); return err }
	case "upsert-new", "upsert-replace":
		call = func() error {
			_, err := target.Upsert(ctx, umbra.Vectors(vectors), umbra.WithIDs(ids...))
			return err
		}
	case "import":
		call = func() error {
			src, err := host.OpenMatrixFile(ctx, dataPath)
			if err != nil {
				return err
			}
			defer src.Close()
			ix, err := engine.New(ctx, engine.Config{Dim: src.Dim(), Device: engine.CPU})
			if err != nil {
				return err
			}
			defer ix.Close()
			_, err = ix.Add(ctx, src)
			return err
		}
	case "import-read":
		call = func() error {
			m, err := host.ReadMatrixFile(ctx, dataPath)
			if err != nil {
				return err
			}
			ix, err := engine.New(ctx, engine.Config{Dim: m.Dim, Device: engine.CPU})
			if err != nil {
				return err
			}
			defer ix.Close()
			_, err = ix.Add(ctx, umbra.Flat(m.Data, ix.Dim()))
			return err
		}
	case "read-npy", "read-store":
		p := dataPath
		if op == "read-store" {
			p = storePath
		}
		call = func() error { b, err := os.ReadFile(p); runtime.KeepAlive(b); return err }
	case "open":
		call = func() error {
			ix, err := engine.Open(ctx, storePath, engine.Config{Device: engine.CPU})
			if err != nil {
				return err
			}
			return ix.Close()
		}
	default:
		return nil, fmt.Errorf("unknown ingest operation %q", op)
	}
	// What the child loaded stays; its garbage goes back to the system,
	// so the peak counts the call's own memory on top of what it holds.
	runtime.GC()
	debug.FreeOSMemory()
	resetPeak()
	before := rssMiB()
	start := time.Now()
	if err := call(); err != nil {
		return nil, err
	}
	ms := float64(time.Since(start).Microseconds()) / 1e3
	runtime.KeepAlive(flat)
	runtime.KeepAlive(vectors)
	return json.Marshal(ingestSample{Ms: ms, PeakMiB: peakMiB(), BeforeMiB: before})
}
