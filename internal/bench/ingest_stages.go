package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
)

// IngestStage is where one write's time went, medians over traced calls
// (diag.Trace's write stages), beside a plain copy of the same bytes.
type IngestStage struct {
	Name                                   string
	TotalMS                                float64 // the whole call
	PackMS, AssignMS, CompressMS, UploadMS float64
	LogMS, PublishMS                       float64
	CopyMS                                 float64 // a plain copy of the call's bytes into fresh memory
	Backend                                string
	Calls                                  int
}

// IngestStages is RunIngestStages's report.
type IngestStages struct {
	N, Dim int
	Rows   []IngestStage
}

// RunIngestStages traces the writes cmd/bench --store measures — Add of Flat,
// Add of Vectors, a streamed .npy import, Upsert of new rows, Upsert replacing every row, and Add of Flat to a
// store whose log syncs every call — Runs × Repeat calls each on a fresh
// index (Device CPU, or the GPU with o.Device GPU), each beside a plain
// copy, and reports each stage's median.
func RunIngestStages(ctx context.Context, o StoreOptions) (*IngestStages, error) {
	calls := max(o.Runs, 1) * max(o.Repeat, 1)
	dir, cleanup, err := o.workDir("umbra-stages-bench-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	flat := randomFlat(rand.New(rand.NewPCG(o.Seed, 13)), o.N*o.Dim)
	vectors := make([][]float32, o.N)
	ids := make([]uint64, o.N)
	for i := range vectors {
		vectors[i], ids[i] = flat[i*o.Dim:(i+1)*o.Dim], uint64(i)
	}
	cfg := engine.Config{Dim: o.Dim, Device: engine.CPU}
	if o.Device == engine.GPU {
		cfg.Device, cfg.Adapters = engine.GPU, []engine.AdapterSelect{o.Adapter}
	}
	plainCopy := func() float64 {
		start := time.Now()
		c := make([]float32, len(flat))
		copy(c, flat)
		runtime.KeepAlive(c)
		return durMS(time.Since(start))
	}
	store := filepath.Join(dir, "stages.umbra")
	npy := filepath.Join(dir, "stages.npy")
	if err := host.WriteMatrixFile(npy, &host.Matrix{Rows: o.N, Dim: o.Dim, Data: flat}, ""); err != nil {
		return nil, err
	}
	ops := []struct {
		name  string
		setup func() (*engine.Index, error)
		call  func(context.Context, *engine.Index) error
	}{
		{"Add (Flat)", nil, func(ctx context.Context, ix *engine.Index) error {
			_, err := ix.Add(ctx, umbra.Flat(flat, ix.Dim()))
			return err
		}},
		{"Add (Vectors)", nil, func(ctx context.Context, ix *engine.Index) error {
			_, err := ix.Add(ctx, umbra.Vectors(vectors))
			return err
		}},
		{"import .npy (streamed Add)", nil, func(ctx context.Context, ix *engine.Index) error {
			src, err := host.OpenMatrixFile(ctx, npy)
			if err != nil {
				return err
			}
			defer src.Close()
			_, err = ix.Add(ctx, src)
			return err
		}},
		{"Upsert, every ID new", nil, func(ctx context.Context, ix *engine.Index) error {
			_, err := ix.Upsert(ctx, umbra.Vectors(vectors), umbra.WithIDs(ids...))
			return err
		}},
		{"Upsert, replacing every row", func() (*engine.Index, error) {
			ix, err := engine.New(ctx, cfg)
			if err == nil {
				_, err = ix.Add(ctx, umbra.Flat(flat, ix.Dim()))
			}
			return ix, err
		}, func(ctx context.Context, ix *engine.Index) error {
			_, err := ix.Upsert(ctx, umbra.Vectors(vectors), umbra.WithIDs(ids...))
			return err
		}},
		{"Add (Flat) to a store, log fsync per call", func() (*engine.Index, error) {
			empty, err := engine.New(ctx, cfg)
			if err != nil {
				return nil, err
			}
			err = empty.Save(ctx, store)
			empty.Close()
			if err != nil {
				return nil, err
			}
			return engine.Open(ctx, store, engine.Config{Device: cfg.Device, Adapters: cfg.Adapters})
		}, func(ctx context.Context, ix *engine.Index) error {
			_, err := ix.Add(ctx, umbra.Flat(flat, ix.Dim()))
			return err
		}},
	}
	rep := &IngestStages{N: o.N, Dim: o.Dim}
	for _, op := range ops {
		var total, pack, assign, compress, upload, logged, publish, copies []float64
		backend := ""
		for range calls {
			copies = append(copies, plainCopy())
			var ix *engine.Index
			var err error
			if op.setup != nil {
				ix, err = op.setup()
			} else {
				ix, err = engine.New(ctx, cfg)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", op.name, err)
			}
			var tr diag.Trace
			start := time.Now()
			err = op.call(diag.WithTrace(ctx, &tr), ix)
			took := time.Since(start)
			backend = ix.Info().Device.String()
			ix.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", op.name, err)
			}
			total = append(total, durMS(took))
			pack, assign, compress = append(pack, durMS(tr.Pack)), append(assign, durMS(tr.Assign)), append(compress, durMS(tr.Compress))
			upload, logged, publish = append(upload, durMS(tr.Upload)), append(logged, durMS(tr.Log)), append(publish, durMS(tr.Publish))
		}
		rep.Rows = append(rep.Rows, IngestStage{Name: op.name, TotalMS: Median(total), PackMS: Median(pack), AssignMS: Median(assign),
			CompressMS: Median(compress), UploadMS: Median(upload), LogMS: Median(logged), PublishMS: Median(publish),
			CopyMS: Median(copies), Backend: backend, Calls: calls})
	}
	return rep, nil
}

// workDir is o.Dir, or a new temporary directory that cleanup removes.
func (o StoreOptions) workDir(prefix string) (dir string, cleanup func(), err error) {
	if o.Dir != "" {
		return o.Dir, func() {}, nil
	}
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// randomFlat is n values uniform in [-1, 1) from r.
func randomFlat(r *rand.Rand, n int) []float32 {
	flat := make([]float32, n)
	for i := range flat {
		flat[i] = r.Float32()*2 - 1
	}
	return flat
}

// durMS is d in milliseconds.
func durMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// Write prints the stages as a table.
func (r *IngestStages) Write(w io.Writer) {
	if len(r.Rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\ningest stages (--breakdown): %d × %d float32, medians of %d traced calls each on a fresh index, a plain copy of the same bytes before each\n",
		r.N, r.Dim, r.Rows[0].Calls)
	fmt.Fprintln(w, "pack = check, normalise and write the rows (first touch of new memory included; for an import, reading the file too); assign = IDs; log = the store's log record and its fsync; publish = the swap")
	fmt.Fprintf(w, "\n  %-40s %-8s %9s %9s %9s %9s %9s %9s %9s %9s\n", "operation", "backend", "total ms", "pack", "assign", "compress", "upload", "log", "publish", "copy ms")
	for _, s := range r.Rows {
		fmt.Fprintf(w, "  %-40s %-8s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", s.Name, s.Backend, s.TotalMS, s.PackMS, s.AssignMS,
			s.CompressMS, s.UploadMS, s.LogMS, s.PublishMS, s.CopyMS)
	}
}
