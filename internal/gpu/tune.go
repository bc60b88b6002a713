//go:build cgo && !nogpu

package gpu

import (
	"context"
	"slices"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/shaders"
)

// teamCandidates are the team widths tune times (shaders.TeamCandidates,
// which the browser backend shares).
var teamCandidates = shaders.TeamCandidates

// tuneRows × tuneDim float32 (12 MiB) is the slab the teams are timed on:
// rows of the common embedding width, enough of them that the scan, not
// the dispatch, dominates.
const (
	tuneRows = 4096
	tuneDim  = 768
)

// variant is one scoring configuration the tuning may choose between.
type variant = shaders.Variant

// tuneVariants lists every variant tune may choose; verify self-tests each
// before tune may time it.
func tuneVariants() []variant { return shaders.Variants() }

// tune times one single-query scoring pass for each team among the
// variants that passed the self-test and keeps the fastest, then times a
// batch with and without its queries staged in workgroup memory, once per
// device, as part of the probe. It uses GPU timestamps where the device has
// them. A failed timing skips that variant: tuning can make a device
// faster, never unusable, and never picks a variant that failed its test.
func (d *Device) tune(passed []variant) {
	ok := func(v variant) bool { return slices.Contains(passed, v) }
	s := packed.Synthetic(tuneRows, tuneDim)
	q := [][]float32{s.PaddedRow(0)}
	best, bestTime := uint32(0), time.Duration(0)
	for _, team := range teamCandidates {
		if !ok(variant{Team: team}) && !ok(variant{Team: team, Staged: true}) {
			continue
		}
		d.team, d.staged = team, false
		took, err := d.timeScores(s, q)
		if err != nil {
			continue
		}
		if best == 0 || took < bestTime {
			best, bestTime = team, took
		}
	}
	if best == 0 {
		// Nothing could be timed: the first variant that passed.
		d.team, d.staged = passed[0].Team, passed[0].Staged
		return
	}
	d.team = best

	// Batches: queries staged in workgroup memory, or read through the
	// cache by every team. Which wins depends on the device's workgroup
	// memory and barrier cost; keep the staging only if it is faster.
	direct, staged := ok(variant{Team: best}), ok(variant{Team: best, Staged: true})
	d.staged = staged && !direct
	if !direct || !staged {
		return
	}
	batch := make([][]float32, batchQT)
	for i := range batch {
		batch[i] = s.PaddedRow(i)
	}
	d.staged = false
	directTime, err := d.timeScores(s, batch)
	if err != nil {
		return
	}
	d.staged = true
	if stagedTime, err := d.timeScores(s, batch); err != nil || stagedTime >= directTime {
		d.staged = false
	}
}

// timeScores returns the best of three traced scoring passes of the
// queries q (after a warm-up) over s on an index planned with the device's
// current team and staging.
func (d *Device) timeScores(s *packed.Slab, q [][]float32) (time.Duration, error) {
	g, err := newIndex(d, s.Stride, core.Dot, 0)
	if err != nil {
		return 0, err
	}
	defer g.Release()
	if err := g.Upload(context.Background(), s, 0, nil, nil); err != nil {
		return 0, err
	}
	var best time.Duration
	for i := 0; i < 4; i++ {
		var st core.Stages
		if _, _, err := g.run(context.Background(), q, submission{rows: s.Rows}, &st); err != nil {
			return 0, err
		}
		if i > 0 && (best == 0 || st.Kernel < best) {
			best = st.Kernel
		}
	}
	return best, nil
}
