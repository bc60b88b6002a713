package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
)

// Tier is one way of answering a query, timed end to end as a user would
// run it. Each has a premise that must be printed beside its figure.
type Tier string

const (
	// TierFallback is the pure-Go path on a slab resident in host memory.
	TierFallback Tier = "fallback"
	// TierKernel is the scoring dispatch alone, data resident on the
	// device: what a search costs with nothing around the kernel.
	TierKernel Tier = "kernel"
	// TierResident is the engine's Search on a GPU index whose data was
	// uploaded once.
	TierResident Tier = "resident"
	// TierContiguous builds a GPU index from a contiguous slice, searches
	// and closes it, every call: what a caller pays who keeps no index.
	TierContiguous Tier = "contiguous"
	// TierList builds a GPU index from one slice per row, searches and
	// closes it, every call: the per-call path from the layout an
	// application that gathers vectors from its records usually has.
	TierList Tier = "list"
)

// AllTiers lists every tier, baseline first, in the order they are
// reported.
var AllTiers = []Tier{TierFallback, TierKernel, TierResident, TierContiguous, TierList}

// GPU reports whether the tier needs a GPU index.
func (t Tier) GPU() bool { return t != TierFallback }

// Premise says what one timed call of the tier includes and what it
// leaves out.
func (t Tier) Premise() string {
	switch t {
	case TierFallback:
		return "pure Go on the packed slab, resident in host memory: prepare the query, scan all rows, top-k (CPU)"
	case TierKernel:
		return "data resident on the device; the compute passes alone (engine Trace.Kernel: scoring, and top-k where the " +
			"engine selects on the device), timed by GPU timestamps where the device writes them inside passes, " +
			"else on the wall clock from submit to done (kernel_clock says which); " +
			"no query upload, no readback: a limit, not an everyday figure"
	case TierResident:
		return "the engine's Search on a GPU index: data uploaded once at Add; per call the query goes up, " +
			"every row is scored on the device, the results come back, top-k out"
	case TierContiguous:
		return "every call from one contiguous []float32: new index, Add of Flat (validate and pack N rows, upload them all), " +
			"Search, Close; the device and the compiled shader are cached per process"
	case TierList:
		return "every call from [][]float32, one heap allocation per row: new index, Add (marshal the scattered rows " +
			"into the slab, upload them all), Search, Close; the device and the compiled shader are cached per process"
	}
	return ""
}

// ParseTiers parses a comma-separated list of tier names ("all" for every
// tier). The result is in AllTiers order without duplicates.
func ParseTiers(s string) ([]Tier, error) {
	want := map[Tier]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		switch {
		case f == "":
			continue
		case f == "all":
			for _, t := range AllTiers {
				want[t] = true
			}
		case slices.Contains(AllTiers, Tier(f)):
			want[Tier(f)] = true
		default:
			return nil, fmt.Errorf("unknown tier %q (want a comma list of %s, or all)", f, tierNames())
		}
	}
	var out []Tier
	for _, t := range AllTiers {
		if want[t] {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no tier named in %q (want a comma list of %s, or all)", s, tierNames())
	}
	return out, nil
}

func tierNames() string {
	names := make([]string, len(AllTiers))
	for i, t := range AllTiers {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// runner performs a tier's timed operation.
type runner interface {
	// call runs the operation once for q and returns the time it is
	// charged and the hits it found.
	call(ctx context.Context, q []float32, k int) (time.Duration, []umbra.Hit, error)
	// check builds (or reuses) an index the way the tier does and returns
	// its top-k for q and its scores of all rows (k = N), outside timing.
	check(ctx context.Context, q []float32, k int) (top, all []umbra.Hit, err error)
	close()
}

// residentRunner searches an index built once. With kernelOnly it charges
// only the Kernel stage of a traced search.
type residentRunner struct {
	ix         *engine.Index
	kernelOnly bool
	owned      bool
	clock      string // KernelClock of the last traced call
}

func (r *residentRunner) call(ctx context.Context, q []float32, k int) (time.Duration, []umbra.Hit, error) {
	if r.kernelOnly {
		var tr diag.Trace
		hits, err := r.ix.Search(diag.WithTrace(ctx, &tr), q, k)
		r.clock = tr.KernelClock
		return tr.Kernel, hits, err
	}
	start := time.Now()
	hits, err := r.ix.Search(ctx, q, k)
	return time.Since(start), hits, err
}

func (r *residentRunner) check(ctx context.Context, q []float32, k int) (top, all []umbra.Hit, err error) {
	if top, err = r.ix.Search(ctx, q, k); err != nil {
		return nil, nil, err
	}
	all, err = r.ix.Search(ctx, q, r.ix.Len())
	return top, all, err
}

func (r *residentRunner) close() {
	if r.owned {
		r.ix.Close()
	}
}

// rebuildRunner creates, fills, searches and closes an index every call,
// from the contiguous slice (flat) or the per-row slices.
type rebuildRunner struct {
	cfg  engine.Config
	w    *Workload
	flat bool
}

// once builds an index, runs search on it and closes it.
func (r *rebuildRunner) once(ctx context.Context, search func(*engine.Index) error) error {
	ix, err := engine.New(ctx, r.cfg)
	if err != nil {
		return err
	}
	defer ix.Close()
	if r.flat {
		_, err = ix.Add(ctx, umbra.Flat(r.w.Data, ix.Dim()))
	} else {
		_, err = ix.Add(ctx, umbra.Vectors(r.w.Rows()))
	}
	if err != nil {
		return err
	}
	if r.cfg.Device != engine.CPU && ix.Info().Device != engine.GPU {
		return fmt.Errorf("index fell back to the CPU: %s", ix.Info().Reason)
	}
	return search(ix)
}

func (r *rebuildRunner) call(ctx context.Context, q []float32, k int) (time.Duration, []umbra.Hit, error) {
	var hits []umbra.Hit
	start := time.Now()
	err := r.once(ctx, func(ix *engine.Index) (err error) {
		hits, err = ix.Search(ctx, q, k)
		return err
	})
	return time.Since(start), hits, err
}

func (r *rebuildRunner) check(ctx context.Context, q []float32, k int) (top, all []umbra.Hit, err error) {
	err = r.once(ctx, func(ix *engine.Index) (err error) {
		if top, err = ix.Search(ctx, q, k); err != nil {
			return err
		}
		all, err = ix.Search(ctx, q, ix.Len())
		return err
	})
	return top, all, err
}

func (r *rebuildRunner) close() {}
