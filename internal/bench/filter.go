package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/umbravec/umbra"

	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/meta"
)

// FilterOptions are --filter's: what a filtered search costs beside the
// unfiltered search and beside an index that holds only the rows the
// filter admits.
type FilterOptions struct {
	Device    engine.Device // CPU or GPU (any adapter, software ones too)
	Adapter   engine.AdapterSelect
	N, Dim, K int
	// Fractions are the shares of the rows a Where admits, one filter each
	// (each a disjoint group of rows, chosen at random).
	Fractions []float64
	Metric    umbra.Metric
	Precision umbra.Precision
	// Runs groups of Repeat calls of every search, interleaved: each
	// group calls the unfiltered search, and every filtered search and its
	// subset-only index, in turn.
	Runs, Repeat int
	Seed         uint64
	Workers      int
	Progress     func(string)
	// Data, when not nil, is the N × Dim rows (row by row) to index
	// instead of generated ones: the device check's, made once.
	Data []float32
}

// FilterRow is one filter: the rows it admits and its searches' times
// (medians over groups of each group's fastest call, in milliseconds).
type FilterRow struct {
	Fraction float64 `json:"fraction"`
	Admitted int     `json:"admitted"`
	// Filtered is Search with the Where filter on the whole index; Subset
	// is Search without a filter on an index of the admitted rows alone.
	Filtered Timing `json:"filtered"`
	Subset   Timing `json:"subset"`
	// XSubset is Filtered over Subset, and Speedup the unfiltered search
	// over Filtered, each paired by group (median, min, max).
	XSubset Summary `json:"x_subset"`
	Speedup Summary `json:"speedup"`
	// FilterMS is the traced Filter stage (the bitmap, its count and the
	// list of a gather), median over groups; Path is the trace's Subset
	// ("gather" or "scan") and Device where the search ran.
	FilterMS float64 `json:"filter_ms"`
	Path     string  `json:"path"`
	Device   string  `json:"device"`
	// Exact: every filtered answer equalled the subset index's (IDs and
	// score bits); Checked is how many were compared.
	Exact   bool `json:"exact"`
	Checked int  `json:"checked"`
}

// FilterReport is --filter's result.
type FilterReport struct {
	N, Dim, K    int
	Metric       string
	Precision    string
	Device       string
	Adapter      string
	Runs, Repeat int
	Seed         uint64
	// Unfiltered is Search on the whole index without a filter.
	Unfiltered Timing
	Rows       []FilterRow
	// LoadBefore and LoadAfter are /proc/loadavg around the timed part.
	LoadBefore, LoadAfter string
}

// RunFilter builds an index of N random rows whose metadata puts a
// disjoint random share of them (each of Fractions) under a user of its
// own, and an index of each share alone (same vectors, same IDs), then
// times the unfiltered search, each filtered one and each subset index's,
// interleaved in every group, and checks every filtered answer against
// the subset index's.
func RunFilter(ctx context.Context, o FilterOptions) (*FilterReport, error) {
	o.Runs, o.Repeat = max(o.Runs, 1), max(o.Repeat, 1)
	if o.K < 1 || o.N < 1 || o.Dim < 1 {
		return nil, fmt.Errorf("filter bench: n %d, dim %d and k %d must be at least 1", o.N, o.Dim, o.K)
	}
	total := 0.0
	for _, f := range o.Fractions {
		if !(f > 0 && f <= 1) {
			return nil, fmt.Errorf("filter bench: fraction %g out of range (0, 1]", f)
		}
		total += f
	}
	if o.Data != nil && len(o.Data) != o.N*o.Dim {
		return nil, fmt.Errorf("filter bench: %d values of data for %d × %d rows", len(o.Data), o.N, o.Dim)
	}
	if total > 1 {
		return nil, fmt.Errorf("filter bench: the fractions add up to %g, more than every row", total)
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, args...))
		}
	}
	rep := &FilterReport{N: o.N, Dim: o.Dim, K: o.K, Metric: o.Metric.String(), Precision: o.Precision.String(),
		Device: o.Device.String(), Runs: o.Runs, Repeat: o.Repeat, Seed: o.Seed}
	cfg := engine.Config{Dim: o.Dim, Metric: o.Metric, Device: o.Device, Precision: o.Precision, Workers: o.Workers}
	if o.Device == engine.GPU {
		cfg.Adapters = []engine.AdapterSelect{o.Adapter}
	}

	// Which share each row belongs to (-1: none), chosen at random.
	r := rand.New(rand.NewPCG(o.Seed, 21))
	group := make([]int, o.N)
	for i := range group {
		group[i] = -1
	}
	perm := r.Perm(o.N)
	at := 0
	members := make([][]int, len(o.Fractions))
	for g, f := range o.Fractions {
		n := max(1, int(math.Round(f*float64(o.N))))
		for _, row := range perm[at:min(at+n, o.N)] {
			group[row] = g
		}
		at += n
	}
	for row, g := range group {
		if g >= 0 {
			members[g] = append(members[g], row)
		}
	}
	user := func(g int) string { return fmt.Sprintf("share%d", g) }

	progress("generating %d × %d rows", o.N, o.Dim)
	ix, err := engine.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer ix.Close()
	if o.Device == engine.GPU {
		info := ix.Info()
		rep.Adapter = info.Adapter.Name + " (" + info.Adapter.API + ")"
	}
	// Rows go in in pieces, so the input never holds more than a piece.
	const piece = 1 << 16
	ids := make([]uint64, o.N)
	for i := range ids {
		ids[i] = uint64(i)
	}
	rowsOf := func(lo, hi int) []float32 {
		if o.Data != nil {
			return o.Data[lo*o.Dim : hi*o.Dim]
		}
		return RandomMatrix(hi-lo, o.Dim, o.Seed, uint64(1000+lo/piece))
	}
	for lo := 0; lo < o.N; lo += piece {
		hi := min(lo+piece, o.N)
		progress("adding rows %d–%d of %d", lo, hi, o.N)
		fields := make([]meta.Fields, hi-lo)
		for i := range fields {
			u := "rest"
			if g := group[lo+i]; g >= 0 {
				u = user(g)
			}
			fields[i] = meta.Fields{"user": meta.KeywordOf(u)}
		}
		if _, err := ix.Add(ctx, umbra.Flat(rowsOf(lo, hi), o.Dim), umbra.WithIDs(ids[lo:hi]...), umbra.WithMeta(fields...)); err != nil {
			return nil, err
		}
	}
	// The subset indexes: the same rows, IDs and order.
	subs := make([]*engine.Index, len(o.Fractions))
	for g, rows := range members {
		progress("building the index of share %d (%d rows)", g, len(rows))
		sub, err := engine.New(ctx, cfg)
		if err != nil {
			return nil, err
		}
		defer sub.Close()
		flat := make([]float32, 0, len(rows)*o.Dim)
		subIDs := make([]uint64, len(rows))
		cur, curLo := []float32(nil), -1
		for i, row := range rows {
			if lo := row / piece * piece; lo != curLo {
				cur, curLo = rowsOf(lo, min(lo+piece, o.N)), lo
			}
			off := (row - curLo) * o.Dim
			flat = append(flat, cur[off:off+o.Dim]...)
			subIDs[i] = uint64(row)
		}
		if _, err := sub.Add(ctx, umbra.Flat(flat, o.Dim), umbra.WithIDs(subIDs...)); err != nil {
			return nil, err
		}
		subs[g] = sub
	}
	queries := RandomRows(8, o.Dim, o.Seed, 999)
	rep.Rows = make([]FilterRow, len(o.Fractions))
	wheres := make([]umbra.SearchOption, len(o.Fractions))
	for g, f := range o.Fractions {
		rep.Rows[g] = FilterRow{Fraction: f, Admitted: len(members[g]), Exact: true}
		wheres[g] = umbra.Where(meta.Eq("user", meta.KeywordOf(user(g))))
	}

	// The check, before timing: every filtered answer is the subset's.
	for g := range o.Fractions {
		for qi, q := range queries {
			var tr diag.Trace
			got, err := ix.Search(diag.WithTrace(ctx, &tr), q, o.K, wheres[g])
			if err != nil {
				return nil, err
			}
			want, err := subs[g].Search(ctx, q, o.K)
			if err != nil {
				return nil, err
			}
			rep.Rows[g].Checked++
			if !sameHits(got, want) {
				rep.Rows[g].Exact = false
				progress("share %d query %d: the filtered answer differs from the subset index's", g, qi)
			}
			if qi > 0 && rep.Rows[g].Device != tr.Device {
				tr.Device = "mixed: " + rep.Rows[g].Device + ", " + tr.Device
			}
			rep.Rows[g].Path, rep.Rows[g].Device = tr.Subset, tr.Device
		}
	}

	type series struct {
		call   func(slot int) (time.Duration, float64, error)
		groups []float64
		filter []float64
	}
	search := func(x *engine.Index, opt umbra.SearchOption) func(int) (time.Duration, float64, error) {
		return func(slot int) (time.Duration, float64, error) {
			var tr diag.Trace
			c := ctx
			var opts []umbra.SearchOption
			if opt != nil {
				c = diag.WithTrace(ctx, &tr)
				opts = []umbra.SearchOption{opt}
			}
			start := time.Now()
			_, err := x.Search(c, queries[slot%len(queries)], o.K, opts...)
			return time.Since(start), float64(tr.Filter.Microseconds()) / 1e3, err
		}
	}
	all := []*series{{call: search(ix, nil)}}
	for g := range o.Fractions {
		all = append(all, &series{call: search(ix, wheres[g])}, &series{call: search(subs[g], nil)})
	}
	rep.LoadBefore = loadAvg()
	progress("timing %d groups × %d repeats of %d searches", o.Runs, o.Repeat, len(all))
	for _, s := range all { // warm-up
		if _, _, err := s.call(0); err != nil {
			return nil, err
		}
	}
	slot := 0
	for g := 0; g < o.Runs; g++ {
		best := make([]float64, len(all))
		filt := make([]float64, len(all))
		for i := range best {
			best[i] = math.Inf(1)
		}
		for rp := 0; rp < o.Repeat; rp++ {
			// The order rotates, so drift touches every search alike.
			for j := range all {
				i := (j + g + rp) % len(all)
				d, fms, err := all[i].call(slot)
				if err != nil {
					return nil, err
				}
				if ms := float64(d.Nanoseconds()) / 1e6; ms < best[i] {
					best[i], filt[i] = ms, fms
				}
			}
			slot++
		}
		for i, s := range all {
			s.groups = append(s.groups, best[i])
			s.filter = append(s.filter, filt[i])
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	rep.LoadAfter = loadAvg()
	rep.Unfiltered = timingOf(all[0].groups)
	for g := range o.Fractions {
		fl, sub := all[1+2*g], all[2+2*g]
		row := &rep.Rows[g]
		row.Filtered, row.Subset = timingOf(fl.groups), timingOf(sub.groups)
		row.XSubset = Summarize(PairedRatios(fl.groups, sub.groups))
		row.Speedup = Summarize(PairedRatios(all[0].groups, fl.groups))
		row.FilterMS = Median(fl.filter)
	}
	return rep, nil
}

// sameHits reports whether two answers hold the same IDs with the same
// score bits, in the same order.
func sameHits(a, b []umbra.Hit) bool {
	return slices.EqualFunc(a, b, func(x, y umbra.Hit) bool {
		return x.ID == y.ID && math.Float32bits(x.Score) == math.Float32bits(y.Score)
	})
}

// loadAvg is /proc/loadavg's first three fields, or "" where there is none.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Write prints the report as a table with its premises.
func (r *FilterReport) Write(w io.Writer) {
	fmt.Fprintf(w, "filtered search · %d × %d · %s · %s · k=%d · device %s", r.N, r.Dim, r.Metric, r.Precision, r.K, r.Device)
	if r.Adapter != "" {
		fmt.Fprintf(w, " (%s)", r.Adapter)
	}
	fmt.Fprintf(w, " · seed %d\n", r.Seed)
	fmt.Fprintf(w, "method   %d groups × %d repeats, each group's fastest call; every search below called in turn in every group (order rotating); median (min–max) over groups\n", r.Runs, r.Repeat)
	fmt.Fprintf(w, "load     %s before, %s after (1, 5, 15 min)\n\n", orDash(r.LoadBefore), orDash(r.LoadAfter))
	fmt.Fprintf(w, "unfiltered search: %s ms (%s–%s)\n\n", ms(*r.Unfiltered.MedianMS), ms(*r.Unfiltered.MinMS), ms(*r.Unfiltered.MaxMS))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "admitted\trows\tfiltered ms\tsubset-only ms\tfiltered ÷ subset\tunfiltered ÷ filtered\tfilter stage ms\tpath\texact\t")
	for _, row := range r.Rows {
		ex := "yes"
		if !row.Exact {
			ex = "NO"
		}
		fmt.Fprintf(tw, "%.3g%%\t%d\t%s (%s–%s)\t%s (%s–%s)\t%.2f× (%.2f–%.2f)\t%.1f× (%.1f–%.1f)\t%.3f\t%s on %s\t%s\t\n",
			100*row.Fraction, row.Admitted,
			ms(*row.Filtered.MedianMS), ms(*row.Filtered.MinMS), ms(*row.Filtered.MaxMS),
			ms(*row.Subset.MedianMS), ms(*row.Subset.MinMS), ms(*row.Subset.MaxMS),
			row.XSubset.Median, row.XSubset.Min, row.XSubset.Max,
			row.Speedup.Median, row.Speedup.Min, row.Speedup.Max,
			row.FilterMS, orDash(row.Path), orDash(row.Device), ex)
	}
	tw.Flush()
	fmt.Fprintln(w, "\npremises")
	fmt.Fprintln(w, "  filtered        Search(q, k, Where(user = the share's own)) on the index of every row")
	fmt.Fprintln(w, "  subset-only     Search(q, k) on an index holding only that share's rows (the same vectors and IDs)")
	fmt.Fprintln(w, "  unfiltered      Search(q, k) on the index of every row")
	fmt.Fprintln(w, "  ratios          paired by group: each group's filtered time over its subset-only time, and its unfiltered time over its filtered time")
	fmt.Fprintln(w, "  filter stage    diag.Trace.Filter of the filtered search: the bitmap of the admitted rows, its count, and for a gather their list")
	fmt.Fprintln(w, "  path            diag.Trace.Subset and Device: gather (only the admitted rows read) or scan (every row read)")
	fmt.Fprintln(w, "  exact           the filtered answer equalled the subset index's (IDs and score bits) for each of the 8 queries")
}
