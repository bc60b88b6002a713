package gpu

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/shaders"
)

// teamCandidates are the team widths tune times (shaders.TeamCandidates,
// which the browser backend shares).
var teamCandidates = shaders.TeamCandidates

// tuneRows × tuneDim float32 (12 MiB) is the slab the teams are timed on
// on a software adapter: rows of the common embedding width, enough of
// them that the scan, not the dispatch, dominates. A hardware adapter
// gets timingRows of them (256 MiB).
const (
	tuneRows = 4096
	tuneDim  = 768
)

// hardwareTimingBytes is the size of the slabs a hardware adapter is timed
// on (tune's and Calibrate's): a scan of a slab that fits in the device's
// last-level cache times the cache, not memory, and every search of an
// index that size or larger streams from memory. 256 MiB is past the L2
// of every current GPU (H100 and H200: 50 MB; RTX 4090: 72 MB; MI300X's
// Infinity Cache: 256 MB) and takes well under a second to build, send
// and scan once per device. A software adapter keeps the small slabs: its
// "device memory" is the host's, its scan a few GB/s, and the tests probe
// it in every process.
const hardwareTimingBytes = 256 << 20

// timingRows is how many rows of dim float32 the slabs d is timed on hold:
// small on a software adapter; on hardware hardwareTimingBytes' worth, or
// the device's largest buffer's where that is less. When a slab that size
// cannot be allocated, tune and Calibrate time the small one instead.
func (d *Device) timingRows(dim, small int) int {
	if d.info.Software() {
		return small
	}
	want := uint64(hardwareTimingBytes)
	if d.timingBytes != 0 {
		want = d.timingBytes
	}
	bytes := min(want, d.lim.MaxBufferBytes)
	return max(small, int(bytes/uint64(dim*4)))
}

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
	var s *packed.Slab
	best, bestTime := uint32(0), time.Duration(0)
	// The large slab first (the small one on a software adapter); if no
	// team could be timed on it (device memory), the small one.
	for _, rows := range slices.Compact([]int{d.timingRows(tuneDim, tuneRows), tuneRows}) {
		s = packed.Synthetic(rows, tuneDim)
		q := [][]float32{s.PaddedRow(0)}
		for _, team := range teamCandidates {
			if !ok(variant{Team: team}) && !ok(variant{Team: team, Staged: true}) {
				continue
			}
			d.team, d.staged = team, false
			took, err := d.timeScores(s, q)
			if err != nil {
				continue
			}
			d.timed(team, took)
			if best == 0 || took < bestTime {
				best, bestTime = team, took
			}
		}
		if best != 0 {
			break
		}
	}
	if best == 0 {
		// Nothing could be timed: the first variant that passed.
		d.team, d.staged = passed[0].Team, passed[0].Staged
		d.choose(d.Variant(), "the first variant to pass (no timing succeeded)", "not timed: no timing succeeded")
		return
	}
	d.team = best
	var batchTimes [2]time.Duration // direct, staged: 0 when not timed
	defer func() {
		staging := "queries read through the cache"
		if d.staged {
			staging = "queries staged in workgroup memory"
		}
		if batchTimes[0] > 0 && batchTimes[1] > 0 {
			staging += fmt.Sprintf(" (a batch: direct %v, staged %v)", batchTimes[0].Round(time.Microsecond), batchTimes[1].Round(time.Microsecond))
		}
		d.choose(d.Variant(), fmt.Sprintf("the fastest team on one query (%v), %s", bestTime.Round(time.Microsecond), staging), "")
		for i := range d.checks {
			c := &d.checks[i]
			if c.Kernel != "scores" || !c.Passed || c.Chosen || c.Why != "" {
				continue
			}
			switch {
			case strings.HasPrefix(c.Variant, fmt.Sprintf("team %d,", best)):
				c.Why = "slower on a batch than the chosen staging"
			case c.Time > 0:
				c.Why = fmt.Sprintf("slower on one query (%v) than the chosen team", c.Time.Round(time.Microsecond))
			default:
				c.Why = "not timed: staging is timed for the fastest team only"
			}
		}
	}()
	if bestTime > 0 {
		d.scanRate = float64(s.Bytes()) / bestTime.Seconds()
	}

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
	stagedTime, err := d.timeScores(s, batch)
	if err != nil || stagedTime >= directTime {
		d.staged = false
	}
	if err == nil {
		batchTimes = [2]time.Duration{directTime, stagedTime}
	}
}

// timed notes the time of team's direct variant with the reduction in
// use in its check.
func (d *Device) timed(team uint32, took time.Duration) {
	name := Variant{Variant: variant{Team: team}, Subgroups: d.subgroups}.brief()
	for i := range d.checks {
		if d.checks[i].Kernel == "scores" && d.checks[i].Variant == name {
			d.checks[i].Time = took
		}
	}
}

// timeScores returns the best of three traced scoring passes of the
// queries q (after a warm-up) over s on an index planned with the device's
// current team and staging.
func (d *Device) timeScores(s *packed.Slab, q [][]float32) (time.Duration, error) {
	if d.failTiming != nil && d.failTiming(s.Rows) {
		return 0, fmt.Errorf("%w: no memory for %d rows (test)", ErrFailed, s.Rows)
	}
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
		if _, _, err := g.run(context.Background(), q, submission{Rows: s.Rows}, &st); err != nil {
			return 0, err
		}
		if i > 0 && (best == 0 || st.Kernel < best) {
			best = st.Kernel
		}
	}
	return best, nil
}

// tuneGemm times a batch of gemmTuneQueries searches (k = 10, selected on
// the device) through gemm.wgsl and the radix select, and through
// scores.wgsl's tiles, or the fused scan where the device passed it: the
// best of three after a warm-up each, timed whole (the same
// queries go up and the same hits come back either way), on the slab tune
// times the teams on (a quarter of it, and one gemm tile of queries, on a
// software adapter, whose scan is arithmetic on the CPU: the ratio is the
// same, and every test process probes).
func (d *Device) tuneGemm() (gemm, tile time.Duration, err error) {
	rows, nq := d.timingRows(tuneDim, tuneRows/4), gemmTuneQueries
	if d.info.Software() {
		nq = GemmTile
	}
	if d.failTiming != nil && d.failTiming(rows) {
		return 0, 0, fmt.Errorf("%w: no memory for %d rows (test)", ErrFailed, rows)
	}
	s := packed.Synthetic(rows, tuneDim)
	g, err := newIndex(d, s.Stride, core.Dot, 0)
	if err != nil {
		return 0, 0, err
	}
	defer g.Release()
	if err := g.Upload(context.Background(), s, 0, nil, nil); err != nil {
		return 0, 0, err
	}
	qs := make([][]float32, nq)
	for i := range qs {
		qs[i] = s.PaddedRow(i)
	}
	timeOf := func(k BatchKernel) (time.Duration, error) {
		ctx := WithBatchKernel(context.Background(), k)
		var best time.Duration
		for i := 0; i < 4; i++ {
			start := time.Now()
			if _, err := g.Search(ctx, qs, 10, s.Rows, nil, nil); err != nil {
				return 0, err
			}
			if took := time.Since(start); i > 0 && (best == 0 || took < best) {
				best = took
			}
		}
		return best, nil
	}
	if tile, err = timeOf(BatchTile); err != nil {
		return 0, 0, err
	}
	gemm, err = timeOf(BatchGemm)
	return gemm, tile, err
}

// gemmTuneQueries is the batch tuneGemm times on hardware: two of
// gemm.wgsl's tiles.
const gemmTuneQueries = 64
