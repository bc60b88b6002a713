package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/bench/peers"
)

// ConcurrencyOptions sizes the --concurrency measurement.
type ConcurrencyOptions struct {
	N, Dim, K int
	Metric    umbra.Metric
	Levels    []int         // concurrent callers, e.g. 1, 8, 64, 256
	Duration  time.Duration // per cell
	Device    engine.Device // CPU: the fallback only; GPU: the fallback and the GPU, software adapters too; Auto: the GPU if a hardware one works
	Adapter   engine.AdapterSelect
	Seed      uint64
	// BatchQueries and BatchWait configure coalescing in the "on" rows
	// (0: the engine's defaults).
	BatchQueries int
	BatchWait    time.Duration
	Peers        bool     // chromem-go from the same number of goroutines, FAISS from as many threads
	Pythons      []string // interpreters to look for FAISS in
	Progress     func(string)
}

// ConcurrencyRow is one cell: Callers goroutines (or threads) each calling
// Search with one query in a loop for the cell's duration.
type ConcurrencyRow struct {
	Engine   string // "umbra fallback", "umbra gpu", "chromem-go", "faiss"
	Batching string // "on" or "off" for umbra; "" for peers
	Callers  int
	Searches int
	QPS      float64
	P50Ms    float64
	P99Ms    float64
	Wrong    int // answers unlike the exact one (umbra and chromem-go are checked)
	Errors   int
	Note     string
}

// ConcurrencyReport is one --concurrency run.
type ConcurrencyReport struct {
	N, Dim, K int
	Metric    string
	Duration  time.Duration
	Adapter   string
	// Coalescing is the "on" rows' configuration, in words.
	Coalescing string
	Rows       []ConcurrencyRow
	Skipped    []string
}

// RunConcurrency measures queries per second and latency percentiles of
// single searches from many callers at once: umbra with coalescing on and
// off, on the fallback and (where asked and available) the GPU, next to
// chromem-go and FAISS called from as many goroutines or threads. Every
// umbra answer is compared with the exact answer computed up front.
// defaultCoalesce is what engine.Coalesce.MaxQueries 0 means, for the
// report's description of the setting.
const defaultCoalesce = 256

func RunConcurrency(ctx context.Context, o ConcurrencyOptions) (*ConcurrencyReport, error) {
	say := func(s string) {
		if o.Progress != nil {
			o.Progress(s)
		}
	}
	rep := &ConcurrencyReport{N: o.N, Dim: o.Dim, K: o.K, Metric: o.Metric.String(), Duration: o.Duration,
		Coalescing: fmt.Sprintf("at most %d queries a batch, wait %v", cmp.Or(o.BatchQueries, defaultCoalesce), o.BatchWait)}
	data := RandomMatrix(o.N, o.Dim, o.Seed, 1)
	queries := RandomRows(256, o.Dim, o.Seed, 2)

	// The exact answers, from the fallback with coalescing off.
	say("computing the exact answers")
	ref, err := engine.New(ctx, engine.Config{Dim: o.Dim, Metric: o.Metric, Device: engine.CPU, Coalesce: engine.Coalesce{MaxQueries: 1}})
	if err != nil {
		return nil, err
	}
	if _, err := ref.Add(ctx, umbra.Flat(data, ref.Dim())); err != nil {
		ref.Close()
		return nil, err
	}
	want, err := ref.SearchBatch(ctx, queries, o.K)
	ref.Close()
	if err != nil {
		return nil, err
	}

	type target struct {
		name   string
		device engine.Device
	}
	targets := []target{{"umbra fallback", engine.CPU}}
	if o.Device != engine.CPU {
		targets = append(targets, target{"umbra gpu", o.Device})
	}
	for _, tg := range targets {
		for _, batching := range []string{"on", "off"} {
			cfg := engine.Config{Dim: o.Dim, Metric: o.Metric, Device: tg.device, Adapters: adapterFor(tg.device, o.Adapter),
				Coalesce: engine.Coalesce{MaxQueries: o.BatchQueries, Wait: o.BatchWait}}
			if batching == "off" {
				cfg.Coalesce.MaxQueries = 1
			}
			say(fmt.Sprintf("%s, coalescing %s: adding %d×%d", tg.name, batching, o.N, o.Dim))
			ix, err := engine.New(ctx, cfg)
			if err != nil {
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %v", tg.name, err))
				break
			}
			info := ix.Info()
			if tg.device != engine.CPU && info.Device != engine.GPU {
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: no GPU (%s)", tg.name, info.Reason))
				ix.Close()
				break
			}
			if tg.device != engine.CPU {
				rep.Adapter = info.Adapter.String()
			}
			if _, err := ix.Add(ctx, umbra.Flat(data, ix.Dim())); err != nil {
				ix.Close()
				return nil, err
			}
			tol := 0.0
			if tg.device != engine.CPU {
				tol = 1e-4 // the GPU's float32 sums differ from the fallback's in the last bits
			}
			for _, c := range o.Levels {
				say(fmt.Sprintf("%s, coalescing %s, %d callers", tg.name, batching, c))
				row := callers(ctx, c, o.Duration, len(queries), func(ctx context.Context, qi int) (bool, error) {
					hits, err := ix.Search(ctx, queries[qi], o.K)
					if err != nil {
						return false, err
					}
					return sameAnswer(want[qi], hits, tol), nil
				})
				row.Engine, row.Batching = tg.name, batching
				rep.Rows = append(rep.Rows, row)
				if ctx.Err() != nil {
					ix.Close()
					return nil, ctx.Err()
				}
			}
			ix.Close()
		}
	}
	if !o.Peers {
		return rep, nil
	}
	if o.Metric == umbra.Cosine {
		say("chromem-go: adding the vectors")
		ch, err := peers.NewChromem(ctx, data, o.Dim)
		if err != nil {
			rep.Skipped = append(rep.Skipped, "chromem-go: "+err.Error())
		} else {
			for _, c := range o.Levels {
				say(fmt.Sprintf("chromem-go, %d callers", c))
				row := callers(ctx, c, o.Duration, len(queries), func(ctx context.Context, qi int) (bool, error) {
					hits, err := ch.Search(ctx, queries[qi], o.K)
					if err != nil {
						return false, err
					}
					return sameAnswer(want[qi], hits, 1e-4), nil
				})
				row.Engine = "chromem-go"
				rep.Rows = append(rep.Rows, row)
			}
		}
	} else {
		rep.Skipped = append(rep.Skipped, "chromem-go: cosine only")
	}
	python, err := peers.FindFAISS(ctx, o.Pythons)
	if err != nil {
		rep.Skipped = append(rep.Skipped, "faiss: "+err.Error())
		return rep, nil
	}
	say("faiss: concurrent callers")
	res, err := peers.RunFAISSConcurrent(ctx, python, data, o.Dim, queries, o.Metric, o.K, o.Levels, o.Duration)
	if err != nil {
		rep.Skipped = append(rep.Skipped, "faiss: "+err.Error())
		return rep, nil
	}
	for _, l := range res.Levels {
		rep.Rows = append(rep.Rows, ConcurrencyRow{Engine: "faiss", Callers: l.Threads, Searches: l.Searches,
			QPS: l.QPS, P50Ms: l.P50Ms, P99Ms: l.P99Ms, Note: res.Index + " " + res.Version})
	}
	return rep, nil
}

// callers runs n goroutines, each calling search with queries in turn
// (caller i starts at query i) until d has passed, and reports throughput
// and latency.
func callers(ctx context.Context, n int, d time.Duration, nq int, search func(ctx context.Context, qi int) (bool, error)) ConcurrencyRow {
	var wg sync.WaitGroup
	lat := make([][]time.Duration, n)
	var wrong, errs atomic.Int64
	start := time.Now()
	end := start.Add(d)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; time.Now().Before(end) && ctx.Err() == nil; j++ {
				t0 := time.Now()
				ok, err := search(ctx, j%nq)
				lat[i] = append(lat[i], time.Since(t0))
				switch {
				case err != nil:
					errs.Add(1)
				case !ok:
					wrong.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lat...)
	slices.Sort(all)
	row := ConcurrencyRow{Callers: n, Searches: len(all), Wrong: int(wrong.Load()), Errors: int(errs.Load())}
	row.QPS = float64(len(all)) / elapsed.Seconds()
	row.P50Ms, row.P99Ms = percentileMs(all, 0.50), percentileMs(all, 0.99)
	return row
}

func percentileMs(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := min(int(math.Ceil(p*float64(len(sorted))))-1, len(sorted)-1)
	return float64(sorted[max(i, 0)].Microseconds()) / 1e3
}

// sameAnswer reports whether got is want: the same IDs in order, except
// that IDs may swap between scores within tol of each other, and every
// score within tol of want's.
func sameAnswer(want, got []umbra.Hit, tol float64) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		d := math.Abs(float64(want[i].Score - got[i].Score))
		scale := math.Max(1, math.Abs(float64(want[i].Score)))
		if d > tol*scale {
			return false
		}
		if want[i].ID != got[i].ID {
			near := (i > 0 && math.Abs(float64(want[i-1].Score-want[i].Score)) <= 2*tol*scale) ||
				(i+1 < len(want) && math.Abs(float64(want[i+1].Score-want[i].Score)) <= 2*tol*scale)
			if !near {
				return false
			}
		}
	}
	return true
}

// Write prints the report as a table, with umbra's coalescing speed-up per
// level beside it.
func (r *ConcurrencyReport) Write(w io.Writer) {
	fmt.Fprintf(w, "concurrent single searches: %d × %d %s, k=%d, %v per cell; each caller loops Search(one query)\n",
		r.N, r.Dim, r.Metric, r.K, r.Duration)
	fmt.Fprintf(w, "coalescing on: %s\n", r.Coalescing)
	if r.Adapter != "" {
		fmt.Fprintf(w, "gpu: %s\n", r.Adapter)
	}
	fmt.Fprintf(w, "\n  %-16s %-9s %8s %10s %10s %10s %9s %7s %7s  %s\n",
		"engine", "batching", "callers", "searches", "q/s", "p50 ms", "p99 ms", "wrong", "errors", "")
	for _, row := range r.Rows {
		note := row.Note
		if row.Batching == "on" {
			for _, off := range r.Rows {
				if off.Engine == row.Engine && off.Batching == "off" && off.Callers == row.Callers && off.QPS > 0 {
					note = fmt.Sprintf("%.2f× the q/s of coalescing off", row.QPS/off.QPS)
				}
			}
		}
		b := row.Batching
		if b == "" {
			b = "-"
		}
		wrong, errs := strconv.Itoa(row.Wrong), strconv.Itoa(row.Errors)
		if row.Engine == "faiss" { // timed in its own process; its answers are checked by --peers
			wrong, errs = "-", "-"
		}
		fmt.Fprintf(w, "  %-16s %-9s %8d %10d %10.0f %10.2f %9.2f %7s %7s  %s\n",
			row.Engine, b, row.Callers, row.Searches, row.QPS, row.P50Ms, row.P99Ms, wrong, errs, note)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "  skipped: %s\n", s)
	}
}

// Failed reports whether any umbra answer was wrong or any umbra call
// failed.
func (r *ConcurrencyReport) Failed() bool {
	for _, row := range r.Rows {
		if strings.HasPrefix(row.Engine, "umbra") && (row.Wrong > 0 || row.Errors > 0) {
			return true
		}
	}
	return false
}
