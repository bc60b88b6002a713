package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/bench/peers"
)

// PrecisionOptions configures RunPrecision: the storage precisions
// compared on the CPU path or on a GPU, on one data set, with FAISS beside
// them.
type PrecisionOptions struct {
	// Device GPU measures every precision on a GPU (software adapters
	// included; Adapter picks one); any other value the CPU path.
	Device     engine.Device
	Adapter    engine.AdapterSelect
	N, Dim, K  int
	Queries    int // distinct single queries, used in turn
	Batch      int // queries in the batch call (0: no batch)
	Precisions []umbra.Precision
	Metric     umbra.Metric
	Runs       int // groups; each keeps the minimum of Repeat calls
	Repeat     int
	BatchRuns  int
	Seed       uint64
	Clustered  bool // rows around 1,000 centres instead of uniform
	Workers    int
	Peers      bool
	Pythons    []string
	Progress   func(string)
	// Breakdown prints each precision's search stage by stage (medians
	// over the traced queries).
	Breakdown bool
}

// PrecisionStages is one precision's search stage by stage: medians over
// the traced queries, in milliseconds, from Trace.
type PrecisionStages struct {
	Upload, Kernel, Readback, Host float64
	KernelClock                    string
	// Rescored and MBRead: median rows rescored and MB read per query;
	// KBBack the KB read back from a device.
	Rescored, MBRead, KBBack float64
}

// PrecisionRow is one precision's (or one FAISS index's) figures.
type PrecisionRow struct {
	Name string
	// Kernel names the kernel set the row ran: the float32 kernels'
	// (Info.CPUKernel) for f32, and for a compressed precision the scan's
	// (Info.QuantKernel, or the GPU) and the float32 rescore's; empty for
	// FAISS.
	Kernel string
	// SearchMS is the median over groups of one search's time; FloorX the
	// median over groups of that time divided by the float32 read floor
	// measured in the same group (ReadPass over the float32 rows).
	SearchMS, FloorX float64
	// Rows rescored per search (mean and worst over the traced queries)
	// and bytes read per search.
	RescoredMean float64
	RescoredMax  int
	BytesRead    float64
	// ApproxMS and ApproxRecall: the Approximate mode's median time and its
	// recall@k against the float32 answer over the batch queries (FAISS's
	// scalar quantisers are approximate too: their recall is here).
	ApproxMS, ApproxRecall float64
	// BatchMS is the median time of one call with Batch queries.
	BatchMS float64
	// KernelMS and HostMS split a GPU search (Trace, mean over the traced
	// queries): the device's scan, and the host's share (bounding the
	// device's sums and the float32 rescore, or selecting).
	KernelMS, HostMS float64
	// Stages is the breakdown (Breakdown).
	Stages PrecisionStages
	// Exact says whether every answer checked equalled the float32 one
	// of the CPU path (IDs and score bits; IDs only for FAISS IndexFlat
	// and umbra f32 on a GPU, whose float32 sums round differently).
	Exact bool
	Note  string
}

// PrecisionReport is RunPrecision's result.
type PrecisionReport struct {
	Opt     PrecisionOptions
	FloorMS float64
	Kernel  string // the fallback's float32 and compressed kernels
	Adapter string // the GPU's, under Device GPU
	Rows    []PrecisionRow
}

// clusteredMatrix returns rows around 1,000 random unit centres with
// Gaussian noise of a third of the centres' scale per component: data whose
// neighbours sit close together, as embeddings do.
func clusteredMatrix(n, dim int, seed, stream uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, stream))
	centres := make([]float32, 1000*dim)
	for i := range centres {
		centres[i] = float32(r.NormFloat64())
	}
	out := make([]float32, n*dim)
	for i := range n {
		c := centres[r.IntN(1000)*dim:]
		for j := range dim {
			out[i*dim+j] = c[j] + float32(r.NormFloat64()/3)
		}
	}
	return out
}

// RunPrecision measures each precision in turn (one index at a time, so
// 1,000,000×768 fits in memory): single searches in groups paired with the
// float32 read floor, a batch call, the rows rescored and bytes read (from
// Trace), and the Approximate mode's recall; every exact answer is checked
// against the float32 index's, bit for bit. Then FAISS IndexFlatIP and
// IndexScalarQuantizer fp16/8bit on the same data, when --peers asks.
func RunPrecision(ctx context.Context, o PrecisionOptions) (*PrecisionReport, error) {
	say := o.Progress
	if say == nil {
		say = func(string) {}
	}
	say(fmt.Sprintf("generating %d×%d vectors (seed %d)", o.N, o.Dim, o.Seed))
	var data []float32
	var qs, batch [][]float32
	if o.Clustered {
		data = clusteredMatrix(o.N, o.Dim, o.Seed, 1)
		// Queries near stored rows, as a real query is near its answers.
		q := clusteredMatrix(o.Queries+o.Batch, o.Dim, o.Seed, 1) // the same centres
		noise := RandomMatrix(o.Queries+o.Batch, o.Dim, o.Seed, 2)
		for i := range q {
			q[i] += noise[i] / 10
		}
		for i := range o.Queries + o.Batch {
			row := q[i*o.Dim : (i+1)*o.Dim : (i+1)*o.Dim]
			if i < o.Queries {
				qs = append(qs, row)
			} else {
				batch = append(batch, row)
			}
		}
	} else {
		data = RandomMatrix(o.N, o.Dim, o.Seed, 1)
		qs = RandomRows(o.Queries, o.Dim, o.Seed, 2)
		batch = RandomRows(o.Batch, o.Dim, o.Seed, 3)
	}
	// The float32 floor is a plain read of the rows by the CPU path, timed
	// by an F32 index over them (engine.Index.ReadFloor); on a GPU the same
	// index gives the answers every row is checked against (a GPU's
	// float32 sums round otherwise).
	say("f32 on the CPU: the floor and the float32 answers")
	fx, err := engine.New(ctx, engine.Config{Dim: o.Dim, Metric: o.Metric, Device: engine.CPU, Workers: o.Workers})
	if err != nil {
		return nil, err
	}
	defer fx.Close()
	if _, err := fx.Add(ctx, umbra.Flat(data, o.Dim)); err != nil {
		return nil, err
	}
	rep := &PrecisionReport{Opt: o, Kernel: fx.Info().CPUKernel}
	// recallBase is the float32 answer to the batch (or the single
	// queries): what exactness and recall are measured against.
	probe := batch
	if len(probe) == 0 {
		probe = qs
	}
	var want [][]umbra.Hit
	timeIt := func(f func() error) (float64, error) {
		t0 := time.Now()
		err := f()
		return float64(time.Since(t0).Nanoseconds()) / 1e6, err
	}
	onGPU := o.Device == engine.GPU
	device := engine.CPU
	if onGPU {
		device = engine.GPU
		if want, err = fx.SearchBatch(ctx, probe, o.K); err != nil {
			return nil, err
		}
	}
	var floors []float64
	for _, p := range o.Precisions {
		say(fmt.Sprintf("%v: building the index", p))
		ix, err := engine.New(ctx, engine.Config{Dim: o.Dim, Metric: o.Metric, Device: device, Adapters: adapterFor(device, o.Adapter), Precision: p, Workers: o.Workers})
		if err != nil {
			return nil, err
		}
		if onGPU {
			rep.Adapter = ix.Info().Adapter.String()
		}
		if qk := ix.Info().QuantKernel; qk != "" && !strings.Contains(rep.Kernel, ", ") {
			rep.Kernel += ", " + qk
		}
		if _, err := ix.Add(ctx, umbra.Flat(data, ix.Dim())); err != nil {
			ix.Close()
			return nil, err
		}
		row := PrecisionRow{Name: "umbra " + p.String() + " exact", Exact: true, Kernel: rowKernel(ix.Info(), onGPU)}
		var times, ratios, approx []float64
		slot := 0
		say(fmt.Sprintf("%v: %d groups of %d searches", p, o.Runs, o.Repeat))
		for g := 0; g < o.Runs; g++ {
			floor, search, ap := math.Inf(1), math.Inf(1), math.Inf(1)
			for range o.Repeat {
				ms, err := timeIt(func() error { _, err := fx.ReadFloor(ctx); return err })
				if err != nil {
					ix.Close()
					return nil, err
				}
				floor = min(floor, ms)
				q := qs[slot%len(qs)]
				slot++
				ms, err = timeIt(func() error { _, err := ix.Search(ctx, q, o.K); return err })
				if err != nil {
					ix.Close()
					return nil, err
				}
				search = min(search, ms)
				if p != umbra.F32 {
					ms, err = timeIt(func() error { _, err := ix.Search(ctx, q, o.K, umbra.Approximate()); return err })
					if err != nil {
						ix.Close()
						return nil, err
					}
					ap = min(ap, ms)
				}
			}
			floors = append(floors, floor)
			times = append(times, search)
			ratios = append(ratios, search/floor)
			approx = append(approx, ap)
		}
		row.SearchMS, row.FloorX = Median(times), Median(ratios)
		if p != umbra.F32 {
			row.ApproxMS = Median(approx)
		}
		// Cost and exactness over the probe queries, one search each.
		var tr diag.Trace
		got := make([][]umbra.Hit, len(probe))
		var up, kern, back, host, resc, mb, kb []float64
		for j, q := range probe {
			var one diag.Trace
			if got[j], err = ix.Search(diag.WithTrace(ctx, &one), q, o.K); err != nil {
				ix.Close()
				return nil, err
			}
			ms := func(d time.Duration) float64 { return d.Seconds() * 1e3 }
			up, kern, back, host = append(up, ms(one.Upload)), append(kern, ms(one.Kernel)), append(back, ms(one.Readback)), append(host, ms(one.Select))
			resc, mb, kb = append(resc, float64(one.Rescored)), append(mb, float64(one.BytesRead)/1e6), append(kb, float64(one.BytesDown)/1e3)
			row.Stages.KernelClock = one.KernelClock
			tr.Searches += one.Searches
			tr.Rescored += one.Rescored
			tr.MaxRescored = max(tr.MaxRescored, one.MaxRescored)
			tr.BytesRead += one.BytesRead
			tr.Kernel += one.Kernel
			tr.Select += one.Select
		}
		row.Stages.Upload, row.Stages.Kernel, row.Stages.Readback, row.Stages.Host = Median(up), Median(kern), Median(back), Median(host)
		row.Stages.Rescored, row.Stages.MBRead, row.Stages.KBBack = Median(resc), Median(mb), Median(kb)
		row.RescoredMean = float64(tr.Rescored) / float64(max(1, tr.Searches))
		row.RescoredMax = tr.MaxRescored
		row.BytesRead = float64(tr.BytesRead) / float64(max(1, tr.Searches))
		if onGPU {
			n := float64(max(1, len(probe)))
			row.KernelMS, row.HostMS = tr.Kernel.Seconds()*1e3/n, tr.Select.Seconds()*1e3/n
		}
		if p == umbra.F32 && onGPU {
			row.Name = "umbra f32"
			row.Exact = want != nil && sameAnswers(want, got, false)
		} else if p == umbra.F32 {
			want = got
			row.Name = "umbra f32"
		} else if want != nil {
			row.Exact = sameAnswers(want, got, true)
			ap, err := ix.SearchBatch(ctx, probe, o.K, umbra.Approximate())
			if err != nil {
				ix.Close()
				return nil, err
			}
			row.ApproxRecall = recall(want, ap)
		}
		if len(batch) > 0 {
			say(fmt.Sprintf("%v: %d batch calls of %d queries", p, o.BatchRuns, len(batch)))
			var bt []float64
			for range o.BatchRuns {
				var res [][]umbra.Hit
				ms, err := timeIt(func() error { var err error; res, err = ix.SearchBatch(ctx, batch, o.K); return err })
				if err != nil {
					ix.Close()
					return nil, err
				}
				bt = append(bt, ms)
				if want != nil && !sameAnswers(want, res, !(onGPU && p == umbra.F32)) {
					row.Exact = false
				}
			}
			row.BatchMS = Median(bt)
		}
		if want == nil {
			row.Note = "no float32 answer to check against (put f32 first)"
		}
		rep.Rows = append(rep.Rows, row)
		ix.Close()
	}
	rep.FloorMS = Median(floors)
	if o.Peers {
		py, err := peers.FindFAISS(ctx, o.Pythons)
		if err != nil {
			rep.Rows = append(rep.Rows, PrecisionRow{Name: "FAISS", Note: "not run: " + err.Error()})
			return rep, nil
		}
		for _, idx := range []string{"flat", "sq_fp16", "sq_8bit"} {
			say("FAISS " + idx)
			res, err := peers.RunFAISS(ctx, peers.FAISSRun{Python: py, Metric: o.Metric, K: o.K, Repeat: o.Repeat,
				Runs: o.Runs, Warmup: 1, BatchRepeat: 1, BatchRuns: o.BatchRuns, Index: idx}, data, o.Dim, qs, probe)
			if err != nil {
				rep.Rows = append(rep.Rows, PrecisionRow{Name: "FAISS " + idx, Note: "failed: " + err.Error()})
				continue
			}
			note := fmt.Sprintf("faiss %s, %d OpenMP threads", res.Version, res.Threads)
			if blas := peers.DescribeBLAS(res.BLAS); blas != "" {
				note += ", " + blas
			}
			row := PrecisionRow{Name: "FAISS " + res.Index, SearchMS: Median(res.GroupsMS),
				FloorX: Median(res.GroupsMS) / rep.FloorMS, BatchMS: Median(res.BatchGroupsMS),
				Note: note + "; floor ratio against the median floor"}
			if want != nil {
				row.Exact = sameAnswers(want, res.BatchTop, false)
				row.ApproxRecall = recall(want, res.BatchTop)
			}
			rep.Rows = append(rep.Rows, row)
		}
	}
	return rep, nil
}

// rowKernel names the kernels a precision's searches ran on: see
// PrecisionRow.Kernel.
func rowKernel(info engine.Info, onGPU bool) string {
	scan := info.QuantKernel
	if onGPU {
		scan = "gpu"
	}
	if info.Precision == umbra.F32 {
		if onGPU {
			return "gpu"
		}
		return info.CPUKernel
	}
	return scan + ", rescore " + info.CPUKernel
}

// sameAnswers reports whether got equals want query by query: IDs, and
// with bits set the score bits too.
func sameAnswers(want, got [][]umbra.Hit, bits bool) bool {
	if len(want) != len(got) {
		return false
	}
	for j := range want {
		if len(want[j]) != len(got[j]) {
			return false
		}
		for i := range want[j] {
			if want[j][i].ID != got[j][i].ID || bits && math.Float32bits(want[j][i].Score) != math.Float32bits(got[j][i].Score) {
				return false
			}
		}
	}
	return true
}

// recall is the mean fraction of want's IDs that got holds, per query.
func recall(want, got [][]umbra.Hit) float64 {
	if len(want) == 0 || len(want) != len(got) {
		return math.NaN()
	}
	var sum float64
	for j := range want {
		in := map[uint64]bool{}
		for _, h := range want[j] {
			in[h.ID] = true
		}
		n := 0
		for _, h := range got[j] {
			if in[h.ID] {
				n++
			}
		}
		sum += float64(n) / float64(max(1, len(want[j])))
	}
	return sum / float64(len(want))
}

// Write prints the report as a Markdown table with its premises.
func (r *PrecisionReport) Write(w io.Writer) {
	o := r.Opt
	data := "uniform random in [-1, 1)"
	if o.Clustered {
		data = "clustered (1,000 Gaussian centres)"
	}
	path := "CPU path (" + r.Kernel + ")"
	if o.Device == engine.GPU {
		path = "GPU " + r.Adapter + "; the float32 floor and the answers checked against are the CPU path's (" + r.Kernel + ")"
	}
	fmt.Fprintf(w, "umbra bench --precision · %d×%d %s, %v, k=%d, seed %d, %s\n", o.N, o.Dim, data, o.Metric, o.K, o.Seed, path)
	fmt.Fprintf(w, "float32 read floor (ReadFloor of an f32 CPU index, median of groups): %.2f ms; single searches: %d groups × %d, each group's minimum, median over groups; batch: %d queries, median of %d calls\n\n",
		r.FloorMS, o.Runs, o.Repeat, o.Batch, o.BatchRuns)
	fmt.Fprintln(w, "| index | kernel | ms/search | × f32 floor | rescored/search (mean, max) | MB read/search | approx ms | recall@k | batch ms | exact |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, row := range r.Rows {
		if row.Note != "" && row.SearchMS == 0 {
			fmt.Fprintf(w, "| %s | %s | %s |  |  |  |  |  |  |  |\n", row.Name, row.Kernel, row.Note)
			continue
		}
		resc, mb, apms, rec := "", "", "", ""
		if row.BytesRead > 0 {
			resc = fmt.Sprintf("%.1f, %d", row.RescoredMean, row.RescoredMax)
			mb = fmt.Sprintf("%.1f", row.BytesRead/1e6)
		}
		if row.ApproxMS > 0 {
			apms = fmt.Sprintf("%.2f", row.ApproxMS)
		}
		if row.ApproxRecall > 0 && !math.IsNaN(row.ApproxRecall) {
			rec = fmt.Sprintf("%.3f", row.ApproxRecall)
		}
		exact := "yes"
		if !row.Exact {
			exact = "no"
		}
		batch := ""
		if row.BatchMS > 0 {
			batch = fmt.Sprintf("%.1f", row.BatchMS)
		}
		fmt.Fprintf(w, "| %s | %s | %.2f | %.2f | %s | %s | %s | %s | %s | %s |\n", row.Name, row.Kernel, row.SearchMS, row.FloorX, resc, mb, apms, rec, batch, exact)
	}
	for _, row := range r.Rows {
		if row.Note != "" && row.SearchMS != 0 {
			fmt.Fprintf(w, "\n%s: %s", row.Name, row.Note)
		}
	}
	if o.Breakdown {
		fmt.Fprintf(w, "\n\nbreakdown: one search stage by stage (Trace, medians over the %d checked queries); host is the selection, or for a compressed precision the bounds and the float32 rescore (on the CPU path the scan's kernel does both)\n", max(o.Batch, o.Queries))
		fmt.Fprintln(w, "\n| index | upload ms | kernel ms | readback ms | host ms | kernel clock | rescored | MB read | KB back |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|---:|---:|---:|")
		for _, row := range r.Rows {
			if !strings.HasPrefix(row.Name, "umbra") {
				continue
			}
			st := row.Stages
			fmt.Fprintf(w, "| %s | %.3f | %.3f | %.3f | %.3f | %s | %.0f | %.1f | %.1f |\n", row.Name, st.Upload, st.Kernel, st.Readback, st.Host, st.KernelClock, st.Rescored, st.MBRead, st.KBBack)
		}
	}
	if o.Device == engine.GPU {
		fmt.Fprintln(w, "\n\nwhere a GPU search's time goes (Trace, mean over the checked queries): the device's scan and the host's share (bounds and float32 rescore, or selection)")
		for _, row := range r.Rows {
			if strings.HasPrefix(row.Name, "umbra") {
				fmt.Fprintf(w, "\n%s: device %.2f ms, host %.2f ms", row.Name, row.KernelMS, row.HostMS)
			}
		}
	}
	fmt.Fprintln(w)
}
