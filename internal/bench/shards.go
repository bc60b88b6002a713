package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
)

// ShardOptions configures RunShards: each adapter of Shards alone beside
// all of them sharding one index (several Config.Adapters), on the same data and
// queries, timed in the same groups.
type ShardOptions struct {
	N, Dim, K int
	Batches   []int // queries per SearchBatch call, e.g. 1, 8, 64
	Shards    []engine.AdapterSelect
	Metric    umbra.Metric
	Runs      int // groups; each keeps the minimum of Repeat calls
	Repeat    int
	Seed      uint64
	Progress  func(string)
}

// ShardRow is one index's figures: an adapter alone, or the shards.
type ShardRow struct {
	Name string
	// Split says which rows each shard holds (the sharded row only).
	Split string
	// MS[i] summarises the group times of a Batches[i]-query call.
	MS []Summary
	// VsSharded[i] summarises this row's time over the sharded row's,
	// group by group (above 1: sharding is faster).
	VsSharded []Summary
	// SameIDs says whether every answer's IDs equalled the fallback's for
	// the largest batch.
	SameIDs bool
}

// ShardReport is RunShards' result.
type ShardReport struct {
	Opt  ShardOptions
	Rows []ShardRow
}

// RunShards builds one index per adapter of o.Shards and one sharded over
// all of them (Device GPU), checks their answers against the fallback's,
// and times SearchBatch for every batch size, the indexes taking turns
// within each group so that the machine's drift falls on all alike.
func RunShards(ctx context.Context, o ShardOptions) (*ShardReport, error) {
	say := o.Progress
	if say == nil {
		say = func(string) {}
	}
	if len(o.Shards) < 2 {
		return nil, fmt.Errorf("bench: --shards needs at least two adapters, got %d", len(o.Shards))
	}
	say(fmt.Sprintf("generating %d×%d vectors (seed %d)", o.N, o.Dim, o.Seed))
	data := RandomMatrix(o.N, o.Dim, o.Seed, 1)
	maxB := 0
	for _, b := range o.Batches {
		maxB = max(maxB, b)
	}
	qs := RandomRows(maxB, o.Dim, o.Seed, 2)

	type entry struct {
		row *ShardRow
		ix  *engine.Index
	}
	var all []entry
	defer func() {
		for _, e := range all {
			e.ix.Close()
		}
	}()
	build := func(name string, cfg engine.Config) error {
		say("building " + name)
		cfg.Dim, cfg.Metric, cfg.Device = o.Dim, o.Metric, engine.GPU
		ix, err := engine.New(ctx, cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if _, err := ix.Add(ctx, umbra.Flat(data, ix.Dim())); err != nil {
			ix.Close()
			return fmt.Errorf("%s: %w", name, err)
		}
		row := &ShardRow{Name: name}
		for _, s := range ix.Info().Shards {
			row.Split += fmt.Sprintf("%s rows %d..%d; ", s.Adapter, s.Start, s.Start+s.Rows-1)
		}
		row.Split = strings.TrimSuffix(row.Split, "; ")
		all = append(all, entry{row, ix})
		return nil
	}
	var names []string
	for _, sel := range o.Shards {
		names = append(names, describeSelect(sel))
		if err := build(describeSelect(sel)+" alone", engine.Config{Adapters: []engine.AdapterSelect{sel}}); err != nil {
			return nil, err
		}
	}
	if err := build("sharded "+strings.Join(names, "+"), engine.Config{Adapters: o.Shards}); err != nil {
		return nil, err
	}

	say("checking every index against the fallback")
	cpu, err := engine.New(ctx, engine.Config{Dim: o.Dim, Metric: o.Metric, Device: engine.CPU})
	if err != nil {
		return nil, err
	}
	defer cpu.Close()
	if _, err := cpu.Add(ctx, umbra.Flat(data, cpu.Dim())); err != nil {
		return nil, err
	}
	want, err := cpu.SearchBatch(ctx, qs, o.K)
	if err != nil {
		return nil, err
	}
	for _, e := range all {
		got, err := e.ix.SearchBatch(ctx, qs, o.K)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.row.Name, err)
		}
		e.row.SameIDs = sameAnswers(want, got, false)
	}

	times := make([][][]float64, len(all)) // [index][batch][group]
	for i := range times {
		times[i] = make([][]float64, len(o.Batches))
	}
	for g := 0; g < o.Runs; g++ {
		say(fmt.Sprintf("group %d of %d", g+1, o.Runs))
		for bi, b := range o.Batches {
			for i, e := range all {
				best := 0.0
				for r := 0; r < o.Repeat; r++ {
					t0 := time.Now()
					if _, err := e.ix.SearchBatch(ctx, qs[:b], o.K); err != nil {
						return nil, fmt.Errorf("%s: %w", e.row.Name, err)
					}
					ms := float64(time.Since(t0).Nanoseconds()) / 1e6
					if r == 0 || ms < best {
						best = ms
					}
				}
				times[i][bi] = append(times[i][bi], best)
			}
		}
	}
	rep := &ShardReport{Opt: o}
	sharded := len(all) - 1
	for i, e := range all {
		for bi := range o.Batches {
			e.row.MS = append(e.row.MS, Summarize(times[i][bi]))
			e.row.VsSharded = append(e.row.VsSharded, Summarize(PairedRatios(times[i][bi], times[sharded][bi])))
		}
		rep.Rows = append(rep.Rows, *e.row)
	}
	return rep, nil
}

// describeSelect names an adapter selection as --shards spells it.
func describeSelect(s engine.AdapterSelect) string {
	switch {
	case s.Backend != "" && s.Name != "":
		return s.Backend + ":" + s.Name
	case s.Name != "":
		return s.Name
	case s.Backend != "":
		return s.Backend
	}
	return "any"
}

// Write prints the report as a Markdown table with its premises.
func (r *ShardReport) Write(w io.Writer) {
	o := r.Opt
	fmt.Fprintf(w, "umbra bench --shards · %d×%d uniform random, %v, k=%d, seed %d, Device GPU; %d groups × %d calls, each group's minimum, median over groups (range)\n\n",
		o.N, o.Dim, o.Metric, o.K, o.Seed, o.Runs, o.Repeat)
	fmt.Fprint(w, "| index |")
	for _, b := range o.Batches {
		fmt.Fprintf(w, " %d queries: ms | × sharded |", b)
	}
	fmt.Fprintln(w, " IDs = fallback's |")
	fmt.Fprint(w, "|---|")
	for range o.Batches {
		fmt.Fprint(w, "---:|---:|")
	}
	fmt.Fprintln(w, "---|")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "| %s |", row.Name)
		for i := range o.Batches {
			m, x := row.MS[i], row.VsSharded[i]
			fmt.Fprintf(w, " %.1f (%.1f–%.1f) | %.2f |", m.Median, m.Min, m.Max, x.Median)
		}
		same := "yes"
		if !row.SameIDs {
			same = "no"
		}
		fmt.Fprintf(w, " %s |\n", same)
	}
	for _, row := range r.Rows {
		if row.Split != "" {
			fmt.Fprintf(w, "\n%s: %s\n", row.Name, row.Split)
		}
	}
	fmt.Fprintln(w, "\n× sharded: the index's time over the sharded index's in the same group (above 1: the shards are faster).")
}
