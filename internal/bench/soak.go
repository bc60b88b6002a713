package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
)

// SoakOptions sizes a --soak run.
type SoakOptions struct {
	N, Dim, K  int
	Duration   time.Duration
	Device     engine.Device
	Adapter    engine.AdapterSelect
	Seed       uint64
	Searchers  int // goroutines searching (single, batch, filtered)
	Writers    int // goroutines adding, upserting and deleting their own IDs
	SampleEach time.Duration
	Progress   func(string)
}

// SoakSample is the process's memory at one moment of a soak.
type SoakSample struct {
	At          time.Duration
	RSSMiB      float64 // resident memory (Linux; 0 elsewhere)
	HeapMiB     float64 // Go heap in use
	Rows        int     // vectors the index holds (Len)
	DeviceBytes int64   // bytes of device buffers the rows occupy (0 off the GPU)
	Backend     string
}

// SoakReport is what a soak found: the counts must show no error and no
// wrong answer, and the samples flat memory.
type SoakReport struct {
	N, Dim, K         int
	Duration          time.Duration
	Info              string
	Searches, Writes  int64
	Errors, Wrong     int64
	FirstProblems     []string
	Samples           []SoakSample
	RSSGrowthMiB      float64 // last sample minus the first (taken after a warm-up)
	HeapGrowthMiB     float64
	DeviceGrowthBytes int64
}

// RunSoak runs mixed searches and writes on one index for the duration,
// checking every answer while writes race with it: N stable rows are never
// written, so a search filtered to a subset of them has one exact answer,
// and in an unfiltered search the stable hits must be exactly the best
// stable rows, in order. The writers keep their own rows near N/10 (adding,
// upserting, deleting), so the data does not grow and memory must not
// either.
func RunSoak(ctx context.Context, o SoakOptions) (*SoakReport, error) {
	say := func(s string) {
		if o.Progress != nil {
			o.Progress(s)
		}
	}
	o.Searchers, o.Writers = max(o.Searchers, 1), max(o.Writers, 1)
	if o.SampleEach <= 0 {
		o.SampleEach = max(o.Duration/10, time.Second)
	}
	ix, err := engine.New(ctx, engine.Config{Dim: o.Dim, Metric: umbra.Dot, Device: o.Device, Adapters: adapterFor(o.Device, o.Adapter)})
	if err != nil {
		return nil, err
	}
	defer ix.Close()
	ref, err := engine.New(ctx, engine.Config{Dim: o.Dim, Metric: umbra.Dot, Device: engine.CPU, Coalesce: engine.Coalesce{MaxQueries: 1}})
	if err != nil {
		return nil, err
	}
	say(fmt.Sprintf("soak: adding %d×%d stable rows", o.N, o.Dim))
	stable := RandomMatrix(o.N, o.Dim, o.Seed, 1)
	ids := make([]uint64, o.N)
	for i := range ids {
		ids[i] = uint64(i)
	}
	rows := make([][]float32, o.N)
	for i := range rows {
		rows[i] = stable[i*o.Dim : (i+1)*o.Dim]
	}
	for _, x := range []*engine.Index{ix, ref} {
		if _, err := x.Add(ctx, umbra.Vectors(rows), umbra.WithIDs(ids...)); err != nil {
			ref.Close()
			return nil, err
		}
	}
	queries := RandomRows(64, o.Dim, o.Seed, 2)
	subset := ids[:max(o.N/3, 1)]
	top, err := ref.SearchBatch(ctx, queries, o.K)
	if err != nil {
		ref.Close()
		return nil, err
	}
	filtered, err := ref.SearchBatch(ctx, queries, o.K, umbra.Allow(subset...))
	ref.Close()
	if err != nil {
		return nil, err
	}

	rep := &SoakReport{N: o.N, Dim: o.Dim, K: o.K, Duration: o.Duration, Info: ix.Info().String()}
	var errs, wrong, searches, writes atomic.Int64
	var pmu sync.Mutex
	problem := func(count *atomic.Int64, format string, args ...any) {
		count.Add(1)
		pmu.Lock()
		if len(rep.FirstProblems) < 10 {
			rep.FirstProblems = append(rep.FirstProblems, fmt.Sprintf(format, args...))
		}
		pmu.Unlock()
	}
	stablePrefix := func(qi int, hits []umbra.Hit) bool {
		j := 0
		for _, h := range hits {
			if h.ID >= uint64(o.N) {
				continue
			}
			if j >= len(top[qi]) || !sameAnswer(top[qi][j:j+1], []umbra.Hit{h}, 1e-4) {
				return false
			}
			j++
		}
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var wg sync.WaitGroup
	for s := 0; s < o.Searchers; s++ {
		r := rand.New(rand.NewPCG(o.Seed, uint64(100+s)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				qi := r.IntN(len(queries))
				var err error
				switch s % 3 {
				case 0:
					var hits []umbra.Hit
					if hits, err = ix.Search(ctx, queries[qi], o.K); err == nil && !stablePrefix(qi, hits) {
						problem(&wrong, "search, query %d: the stable hits are not the best stable rows", qi)
					}
				case 1:
					var hits []umbra.Hit
					if hits, err = ix.Search(ctx, queries[qi], o.K, umbra.Allow(subset...)); err == nil && !sameAnswer(filtered[qi], hits, 1e-4) {
						problem(&wrong, "filtered search, query %d: not the exact answer", qi)
					}
				default:
					qj := r.IntN(len(queries))
					var all [][]umbra.Hit
					if all, err = ix.SearchBatch(ctx, [][]float32{queries[qi], queries[qj]}, o.K); err == nil &&
						(!stablePrefix(qi, all[0]) || !stablePrefix(qj, all[1])) {
						problem(&wrong, "batch search, queries %d and %d: the stable hits are not the best stable rows", qi, qj)
					}
				}
				if err != nil && ctx.Err() == nil {
					problem(&errs, "search: %v", err)
				}
				if err == nil {
					searches.Add(1)
				}
			}
		}()
	}
	keep := max(o.N/10/o.Writers, 16)
	for w := 0; w < o.Writers; w++ {
		r := rand.New(rand.NewPCG(o.Seed, uint64(1000+w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := uint64(1<<40) + uint64(w)<<32
			var mine []uint64
			for ctx.Err() == nil {
				var err error
				switch op := r.IntN(3); {
				case len(mine) > keep || (op == 0 && len(mine) > 0):
					n := min(len(mine), 1+r.IntN(32))
					err = ix.Delete(ctx, umbra.WithIDs(mine[:n]...))
					if err == nil {
						mine = mine[n:]
					}
				case op == 1 && len(mine) > 0:
					n := min(len(mine), 1+r.IntN(8))
					vs := RandomRows(n, o.Dim, r.Uint64(), 4)
					_, err = ix.Upsert(ctx, umbra.Vectors(vs), umbra.WithIDs(mine[len(mine)-n:]...))
				default:
					n := 1 + r.IntN(32)
					add := make([]uint64, n)
					for i := range add {
						add[i] = next + uint64(i)
					}
					_, err = ix.Add(ctx, umbra.Vectors(RandomRows(n, o.Dim, r.Uint64(), 5)), umbra.WithIDs(add...))
					if err == nil {
						mine, next = append(mine, add...), next+uint64(n)
					}
				}
				switch {
				case err == nil:
					writes.Add(1)
				case ctx.Err() != nil && errors.Is(err, ctx.Err()):
				default:
					problem(&errs, "write: %v", err)
				}
			}
		}()
	}
	start := time.Now()
	sample := func() {
		info := ix.Info()
		s := SoakSample{At: time.Since(start).Round(time.Millisecond), RSSMiB: rssMiB(), Rows: ix.Len(), Backend: info.Device.String()}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s.HeapMiB = float64(ms.HeapInuse) / (1 << 20)
		if info.Device == engine.GPU {
			s.DeviceBytes = int64(info.Chunks) * int64(info.ChunkRows) * int64((o.Dim+3)&^3) * 4
		}
		rep.Samples = append(rep.Samples, s)
		say(fmt.Sprintf("soak: %v, %d searches, %d writes, %d errors, %d wrong, RSS %.0f MiB",
			s.At, searches.Load(), writes.Load(), errs.Load(), wrong.Load(), s.RSSMiB))
	}
	tick := time.NewTicker(o.SampleEach)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			sample()
		}
	}
	wg.Wait()
	sample()
	rep.Searches, rep.Writes, rep.Errors, rep.Wrong = searches.Load(), writes.Load(), errs.Load(), wrong.Load()
	if n := len(rep.Samples); n >= 2 {
		first, last := rep.Samples[0], rep.Samples[n-1]
		rep.RSSGrowthMiB, rep.HeapGrowthMiB = last.RSSMiB-first.RSSMiB, last.HeapMiB-first.HeapMiB
		rep.DeviceGrowthBytes = last.DeviceBytes - first.DeviceBytes
	}
	return rep, nil
}

// rssMiB is the process's resident memory now (Linux; 0 elsewhere).
func rssMiB() float64 { return procStatusMiB("VmRSS:") }

// Failed reports an error or a wrong answer.
func (r *SoakReport) Failed() bool { return r.Errors > 0 || r.Wrong > 0 }

// Write prints the report.
func (r *SoakReport) Write(w io.Writer) {
	fmt.Fprintf(w, "soak: %d × %d dot, k=%d, %v of mixed searches and writes\n%s\n\n", r.N, r.Dim, r.K, r.Duration, r.Info)
	fmt.Fprintf(w, "  %10s %10s %10s %12s %8s %14s  %s\n", "at", "RSS MiB", "heap MiB", "rows", "backend", "device bytes", "")
	for _, s := range r.Samples {
		fmt.Fprintf(w, "  %10v %10.1f %10.1f %12d %8s %14d\n", s.At, s.RSSMiB, s.HeapMiB, s.Rows, s.Backend, s.DeviceBytes)
	}
	fmt.Fprintf(w, "\n  searches %d, writes %d, errors %d (must be 0), wrong answers %d (must be 0)\n", r.Searches, r.Writes, r.Errors, r.Wrong)
	fmt.Fprintf(w, "  growth from the first sample to the last: RSS %+.1f MiB, Go heap %+.1f MiB, device buffers %+d bytes\n",
		r.RSSGrowthMiB, r.HeapGrowthMiB, r.DeviceGrowthBytes)
	for _, p := range r.FirstProblems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
}
