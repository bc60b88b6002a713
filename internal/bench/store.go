package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
)

// StoreOptions sizes the store measurements.
type StoreOptions struct {
	N, Dim  int
	Runs    int // independent groups; each keeps its fastest of Repeat
	Repeat  int
	Device  engine.Device // for the filtered searches; the rest is host work
	Adapter engine.AdapterSelect
	Seed    uint64
	Dir     string // where the store files go ("" for a temporary directory)
}

// StoreRow is one measured operation beside its baseline, both medians of
// Runs groups (each the fastest of Repeat), measured interleaved.
type StoreRow struct {
	Name, Baseline string
	Ms, BaseMs     float64
	Ratio          float64 // Ms / BaseMs
	PeakMiB        float64 // the process's peak resident memory during the operation (Linux), 0 if unknown
	// BeforeMiB and BasePeakMiB, measured in fresh processes (RunIngest):
	// the resident memory when the operation began, and the baseline's
	// peak. 0 when not measured.
	BeforeMiB, BasePeakMiB float64
	Note                   string
}

// StoreReport is the store measurements of one run.
type StoreReport struct {
	N, Dim int
	Rows   []StoreRow
}

// RunStore measures what the store costs against what the same bytes cost
// without it: ingest against a plain copy, Save against a plain write, Open
// against a plain read, one logged Add per fsync policy against one Add in
// memory, and filtered searches against the unfiltered one.
func RunStore(ctx context.Context, o StoreOptions) (*StoreReport, error) {
	o.Runs, o.Repeat = max(o.Runs, 1), max(o.Repeat, 1)
	dir, cleanup, err := o.workDir("umbra-store-bench-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	r := rand.New(rand.NewPCG(o.Seed, 11))
	flat := randomFlat(r, o.N*o.Dim)
	rep := &StoreReport{N: o.N, Dim: o.Dim}
	bytes := len(flat) * 4
	cpu := engine.Config{Dim: o.Dim, Device: engine.CPU}

	// measure runs op and base interleaved, groups × repeats, and returns
	// their medians of group minima in milliseconds and op's peak memory.
	measure := func(op, base func() error) (float64, float64, float64, error) {
		var opG, baseG []float64
		peak := 0.0
		for g := 0; g < o.Runs; g++ {
			var a, b []float64
			for i := 0; i < o.Repeat; i++ {
				if base != nil {
					t, err := timeMs(base)
					if err != nil {
						return 0, 0, 0, err
					}
					b = append(b, t)
				}
				resetPeak()
				t, err := timeMs(op)
				if err != nil {
					return 0, 0, 0, err
				}
				peak = max(peak, peakMiB())
				a = append(a, t)
			}
			opG = append(opG, GroupMin(a))
			if base != nil {
				baseG = append(baseG, GroupMin(b))
			}
		}
		return Median(opG), Median(baseG), peak, nil
	}
	add := func(name, base string, op, baseOp func() error, note string) error {
		ms, bms, peak, err := measure(op, baseOp)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		row := StoreRow{Name: name, Baseline: base, Ms: ms, BaseMs: bms, PeakMiB: peak, Note: note}
		if bms > 0 {
			row.Ratio = ms / bms
		}
		rep.Rows = append(rep.Rows, row)
		return nil
	}
	plainCopy := func() error { c := make([]float32, len(flat)); copy(c, flat); runtime.KeepAlive(c); return nil }
	vectors := make([][]float32, o.N)
	for i := range vectors {
		vectors[i] = flat[i*o.Dim : (i+1)*o.Dim]
	}
	ingest := func(f func(ix *engine.Index) error) func() error {
		return func() error {
			ix, err := engine.New(ctx, cpu)
			if err != nil {
				return err
			}
			defer ix.Close()
			return f(ix)
		}
	}
	if err := add("Add (Flat)", "copy", ingest(func(ix *engine.Index) error { _, err := ix.Add(ctx, umbra.Flat(flat, ix.Dim())); return err }), plainCopy,
		fmt.Sprintf("%s of vectors", mib(bytes))); err != nil {
		return nil, err
	}
	if err := add("Add (Vectors)", "copy", ingest(func(ix *engine.Index) error { _, err := ix.Add(ctx, umbra.Vectors(vectors)); return err }), plainCopy, ""); err != nil {
		return nil, err
	}

	ids := make([]uint64, o.N)
	for i := range ids {
		ids[i] = uint64(i)
	}
	if err := add("Upsert, every ID new", "copy", ingest(func(ix *engine.Index) error {
		_, err := ix.Upsert(ctx, umbra.Vectors(vectors), umbra.WithIDs(ids...))
		return err
	}), plainCopy, ""); err != nil {
		return nil, err
	}
	ix, err := engine.New(ctx, cpu)
	if err != nil {
		return nil, err
	}
	defer ix.Close()
	if _, err := ix.Add(ctx, umbra.Flat(flat, ix.Dim())); err != nil {
		return nil, err
	}
	if err := add("Upsert, replacing every row", "copy", func() error { _, err := ix.Upsert(ctx, umbra.Vectors(vectors), umbra.WithIDs(ids...)); return err }, plainCopy,
		"in place, checked first (with a store or a device the old rows are kept aside to undo)"); err != nil {
		return nil, err
	}
	npy := filepath.Join(dir, "data.npy")
	if err := host.WriteMatrixFile(npy, &host.Matrix{Rows: o.N, Dim: o.Dim, Data: flat}, ""); err != nil {
		return nil, err
	}
	importNPY := ingest(func(ix *engine.Index) error {
		m, err := host.ReadMatrixFile(ctx, npy)
		if err != nil {
			return err
		}
		_, err = ix.Add(ctx, umbra.Flat(m.Data, ix.Dim()))
		return err
	})
	streamNPY := ingest(func(ix *engine.Index) error {
		src, err := host.OpenMatrixFile(ctx, npy)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = ix.Add(ctx, src)
		return err
	})
	readNPY := func() error { b, err := os.ReadFile(npy); runtime.KeepAlive(b); return err }
	if err := add("import .npy (streamed Add)", "read file", streamNPY, readNPY, "what umbra build does before it saves"); err != nil {
		return nil, err
	}
	if err := add("import .npy (read, then Add of Flat)", "read file", importNPY, readNPY, "the whole file read first, then packed in place"); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "bench.umbra")
	plain := filepath.Join(dir, "plain.bin")
	raw := make([]byte, bytes)
	plainWrite := func() error {
		f, err := os.Create(plain)
		if err != nil {
			return err
		}
		if _, err := f.Write(raw); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := add("Save", "write+fsync", func() error { return ix.Save(ctx, path) }, plainWrite, "atomic: temp file, fsync, rename, fsync dir"); err != nil {
		return nil, err
	}
	st, _ := os.Stat(path)
	plainRead := func() error { b, err := os.ReadFile(path); runtime.KeepAlive(b); return err }
	if err := add("Open", "read file", func() error {
		s, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
		if err != nil {
			return err
		}
		return s.Close()
	}, plainRead, fmt.Sprintf("%s store file, rows mapped and CRC-checked, IDs read", mib(int(st.Size())))); err != nil {
		return nil, err
	}
	if err := add("Open, then 1 search (k=10)", "read file", func() error {
		s, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
		if err != nil {
			return err
		}
		if _, err := s.Search(ctx, vectors[0], 10); err != nil {
			s.Close()
			return err
		}
		return s.Close()
	}, plainRead, "searchable: the first search reads the mapped rows"); err != nil {
		return nil, err
	}
	if o.Device == engine.GPU {
		// A GPU index reads its rows (C code must not read a mapping that
		// could fault) and uploads them; making the device (adapter,
		// pipelines, the self-tests) costs the same with or without a
		// store, so the baseline makes one and reads the file.
		gpuCfg := engine.Config{Device: engine.GPU, Adapters: []engine.AdapterSelect{o.Adapter}}
		var where string
		if err := add("Open on the GPU", "New + read", func() error {
			s, err := engine.Open(ctx, path, gpuCfg)
			if err != nil {
				return err
			}
			where = s.Info().Device.String()
			return s.Close()
		}, func() error {
			cfg := gpuCfg
			cfg.Dim = o.Dim
			e, err := engine.New(ctx, cfg)
			if err != nil {
				return err
			}
			if err := e.Close(); err != nil {
				return err
			}
			return plainRead()
		}, "rows read, CRC-checked and uploaded"); err != nil {
			return nil, err
		}
		rep.Rows[len(rep.Rows)-1].Note += ", on " + where
	}

	// One logged Add: fsync per call, fsync within a second, in memory.
	one := [][]float32{vectors[0]}
	for _, c := range []struct {
		name string
		sync time.Duration
	}{{"Add 1 vector, log fsync per call", 0}, {"Add 1 vector, log fsync within 1s", time.Second}} {
		spath := filepath.Join(dir, fmt.Sprintf("log%d.umbra", c.sync))
		s, err := engine.Open(ctx, spath, engine.Config{Dim: o.Dim, Device: engine.CPU, LogSync: c.sync})
		if err != nil {
			return nil, err
		}
		mem, err := engine.New(ctx, cpu)
		if err != nil {
			s.Close()
			return nil, err
		}
		err = add(c.name, "in memory", func() error { _, err := s.Add(ctx, umbra.Vectors(one)); return err },
			func() error { _, err := mem.Add(ctx, umbra.Vectors(one)); return err }, "")
		s.Close()
		mem.Close()
		if err != nil {
			return nil, err
		}
	}

	// Filtered searches against the unfiltered one, on the chosen device.
	sx, err := engine.New(ctx, engine.Config{Dim: o.Dim, Device: o.Device, Adapters: adapterFor(o.Device, o.Adapter)})
	if err != nil {
		return nil, err
	}
	defer sx.Close()
	if _, err := sx.Add(ctx, umbra.Flat(flat, sx.Dim())); err != nil {
		return nil, err
	}
	q := vectors[o.N/2]
	where := sx.Info().Device.String()
	for _, frac := range []float64{1, 0.1, 0.01, 0.0001} {
		allow := make([]uint64, 0, int(float64(o.N)*frac)+1)
		for i := 0; i < o.N; i++ {
			if r.Float64() < frac {
				allow = append(allow, uint64(i))
			}
		}
		name := fmt.Sprintf("Search k=10, %s of rows allowed", strconv.FormatFloat(frac*100, 'g', -1, 64)+"%")
		if err := add(name, "unfiltered", func() error { _, err := sx.Search(ctx, q, 10, umbra.Allow(allow...)); return err },
			func() error { _, err := sx.Search(ctx, q, 10); return err }, fmt.Sprintf("%d rows allowed, on %s", len(allow), where)); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

func timeMs(f func() error) (float64, error) {
	start := time.Now()
	err := f()
	return float64(time.Since(start).Microseconds()) / 1e3, err
}

func mib(b int) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// resetPeak restarts the kernel's count of peak resident memory (Linux).
func resetPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakMiB is the peak resident memory since resetPeak (Linux; 0 elsewhere).
func peakMiB() float64 { return procStatusMiB("VmHWM:") }

// procStatusMiB reads a kB field of /proc/self/status in MiB (Linux; 0
// elsewhere).
func procStatusMiB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

// Write prints the report as a table.
func (r *StoreReport) Write(w io.Writer) {
	fmt.Fprintf(w, "store: %d × %d float32; medians of groups, each group's fastest repeat; baseline measured interleaved\n\n", r.N, r.Dim)
	r.writeRows(w)
}

// WriteIngest prints RunIngest's report as a table.
func (r *StoreReport) WriteIngest(w io.Writer) {
	fmt.Fprintf(w, "ingest: %d × %d float32 (%s); each call in a fresh process, medians over processes; baseline alternated\n", r.N, r.Dim, mib(r.N*r.Dim*4))
	fmt.Fprintf(w, "peak = the process's peak resident memory during the call; before = resident when it began (the input, when loaded)\n\n")
	r.writeRows(w)
}

func (r *StoreReport) writeRows(w io.Writer) {
	ingest := len(r.Rows) > 0 && r.Rows[0].BasePeakMiB > 0
	fmt.Fprintf(w, "  %-42s %10s  %-12s %10s  %8s  %9s", "operation", "ms", "baseline", "ms", "÷ base", "peak MiB")
	if ingest {
		fmt.Fprintf(w, "  %10s  %9s", "before MiB", "base peak")
	}
	fmt.Fprintln(w)
	for _, row := range r.Rows {
		ratio := "—"
		if row.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f×", row.Ratio)
		}
		peak := "—"
		if row.PeakMiB > 0 {
			peak = fmt.Sprintf("%.0f", row.PeakMiB)
		}
		fmt.Fprintf(w, "  %-42s %10.3f  %-12s %10.3f  %8s  %9s", row.Name, row.Ms, row.Baseline, row.BaseMs, ratio, peak)
		if ingest {
			fmt.Fprintf(w, "  %10.0f  %9.0f", row.BeforeMiB, row.BasePeakMiB)
		}
		fmt.Fprintf(w, "  %s\n", row.Note)
	}
}
