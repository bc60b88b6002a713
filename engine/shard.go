package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/topk"
)

// Sharding: with several Config.Adapters the slab is cut into contiguous segments,
// one per adapter, each resident on its own device side. Segment i holds
// global rows [start_i, start_{i+1}), the last one every row from its start
// on, so a shard's local row r is global row start_i + r: the local order
// is the global one, and the merge of the shards' answers by the device's
// ordering (score, then lower row) is exactly the top k of all rows by
// it, as one device would answer; the engine turns that into the one
// ordering every path shares (score, then lower ID) as it does for one
// device (ties.go). Every start is a multiple of 64, so a
// filter's allow bitmap splits on word boundaries.
//
// The split is chosen whenever the rows are uploaded from row 0 (the first
// add, compaction's and recovery's new device sides, a re-upload after a
// failed write): shares in proportion to each adapter's scan rate as its
// calibration measured it (or equal ones), rounded down to 64 rows. Later
// appends go to the last segment until the rows have doubled since the
// split; the append that doubles them is staged on new device sides with a
// new split instead, published in the same swap, so appends cost amortised
// one extra upload per row and no segment holds more than about 3/4 of the
// rows of two shards.
//
// A search sends each shard its part of the queries' work at once (one
// goroutine per shard) and fails as a whole when any shard fails: under
// Auto the engine then answers on the CPU and recovery rebuilds every
// shard, so an answer is never partial or stale.

// shardPart is one shard: its device side and the first global row it
// holds.
type shardPart struct {
	dev   device
	start int
}

// shards is a device made of several, each holding a contiguous segment.
type shards struct {
	parts []shardPart
	// weights are the shares the split gives each shard (their scan
	// rates, or 1 each).
	weights []float64
	// splitAt is how many rows the last split was made for (0: none).
	splitAt int
	// metric ranks the merge.
	metric core.Metric
	// pending are new device sides a Stage filled with a new split and
	// whose publish was not called (a later step of the write failed):
	// the next Stage, or Release, frees them.
	pending []shardPart
	// dead is the tombstone bitmap over global rows (MarkDead): a new
	// split hands each shard the part in its range.
	dead []uint64
}

// dropPending frees the device sides of a split that was never published.
func (sh *shards) dropPending() {
	for _, p := range sh.pending {
		p.dev.Release()
	}
	sh.pending = nil
}

// openShards opens one device side per entry of cfg.shards(), as openGPU
// does for one adapter, and weighs them by their measured scan rate
// (test.equalShards: equally).
func openShards(ctx context.Context, cfg Config, test *testHooks, allowSoftware bool) (device, string, umbra.Hint, error) {
	sh := &shards{metric: cfg.Metric}
	fail := func(i int, reason string, h umbra.Hint, err error) (device, string, umbra.Hint, error) {
		sh.Release()
		reason = fmt.Sprintf("shard %d (%s): %s", i, cfg.shards()[i].describe(), reason)
		var ae *AdapterError
		if errors.As(err, &ae) {
			return nil, reason, h, &AdapterError{Reason: reason, Hint: h, kind: ae.kind}
		}
		return nil, reason, h, fmt.Errorf("shard %d (%s): %w", i, cfg.shards()[i].describe(), err)
	}
	for i, sel := range cfg.shards() {
		c := cfg
		c.Adapters = []AdapterSelect{sel}
		d, reason, h, err := openGPU(ctx, c, test.chunkRows(), allowSoftware)
		if err != nil {
			return fail(i, reason, h, err)
		}
		w := 1.0
		if test == nil || !test.equalShards {
			_, rate, err := d.Calibrate()
			if err != nil {
				d.Release()
				err = gpuError(err)
				return fail(i, "calibration failed: "+err.Error(), hintFor(umbra.HintProbeFailed, sel), err)
			}
			w = max(rate, 1)
		}
		sh.parts = append(sh.parts, shardPart{dev: d})
		sh.weights = append(sh.weights, w)
	}
	return sh, "", umbra.Hint{}, nil
}

// split returns the first global row of each shard for rows rows: shares
// in proportion to the weights, each start a multiple of 64.
func (sh *shards) split(rows int) []int {
	var total float64
	for _, w := range sh.weights {
		total += w
	}
	starts := make([]int, len(sh.weights))
	var cum float64
	for i := 1; i < len(starts); i++ {
		cum += sh.weights[i-1]
		starts[i] = max(int(float64(rows)*cum/total)&^63, starts[i-1])
	}
	return starts
}

// end is the row after shard i's last for rows published rows.
func (sh *shards) end(i, rows int) int {
	if i+1 < len(sh.parts) {
		return min(sh.parts[i+1].start, rows)
	}
	return rows
}

// each runs f for every shard at once and returns the first error in
// shard order, naming the shard. A panic in f is an ErrGPU error.
func (sh *shards) each(f func(i int, p shardPart) error) error {
	errs := make([]error, len(sh.parts))
	var wg sync.WaitGroup
	for i, p := range sh.parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs[i] = fmt.Errorf("%w: %v", ErrGPU, r)
				}
			}()
			errs[i] = f(i, p)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("shard %d (%s): %w", i, sh.parts[i].dev.Adapter(), err)
		}
	}
	return nil
}

// tally adds the shards' stages into st: counts and bytes sum, times take
// the slowest shard's (they run at once).
func tally(st *core.Stages, parts []*core.Stages) {
	if st == nil {
		return
	}
	var slow core.Stages
	for _, p := range parts {
		if p == nil {
			continue
		}
		slow.Upload, slow.Kernel = max(slow.Upload, p.Upload), max(slow.Kernel, p.Kernel)
		slow.Readback, slow.Select = max(slow.Readback, p.Readback), max(slow.Select, p.Select)
		c := *p
		c.Upload, c.Kernel, c.Readback, c.Select = 0, 0, 0, 0
		st.Add(&c)
	}
	st.Add(&slow)
}

// stages returns one Stages per shard when st is set.
func (sh *shards) stages(st *core.Stages) []*core.Stages {
	out := make([]*core.Stages, len(sh.parts))
	if st != nil {
		for i := range out {
			out[i] = &core.Stages{}
		}
	}
	return out
}

func (sh *shards) Adapter() core.AdapterInfo { return sh.parts[0].dev.Adapter() }
func (sh *shards) Limits() gpu.Limits        { return sh.parts[0].dev.Limits() }

// ChunkRows is the smallest of the shards'.
func (sh *shards) ChunkRows() int {
	n := sh.parts[0].dev.ChunkRows()
	for _, p := range sh.parts[1:] {
		n = min(n, p.dev.ChunkRows())
	}
	return n
}

// Stage writes rows [from, s.Rows): from row 0 (every shard empty) with a
// new split; otherwise onto the last shard, or, when the rows have doubled
// since the last split, onto new device sides with a new split (falling
// back to the last shard if that fails for any reason but ctx).
func (sh *shards) Stage(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) (func(), error) {
	sh.dropPending()
	if from >= s.Rows {
		return func() {}, nil
	}
	if from == 0 {
		return sh.stageSplit(ctx, sh.parts, s, st, progress)
	}
	last := len(sh.parts) - 1
	lo := sh.parts[last].start
	// An undone append (Truncate) may have left the rows below the last
	// shard's start: then only a new split can take them.
	if behind := from < lo; behind || len(sh.parts) > 1 && s.Rows >= 2*sh.splitAt {
		fresh, err := sh.siblings()
		if err == nil {
			var publish func()
			if publish, err = sh.stageSplit(ctx, fresh, s, st, progress); err == nil {
				sh.pending = fresh
				return publish, nil
			}
			for _, p := range fresh {
				p.dev.Release()
			}
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if behind {
			return nil, err
		}
	}
	publish, err := sh.parts[last].dev.Stage(ctx, s.Part(lo, s.Rows), from-lo, st, progress)
	if err != nil {
		return nil, fmt.Errorf("shard %d (%s): %w", last, sh.parts[last].dev.Adapter(), err)
	}
	return publish, nil
}

// stageSplit stages every row of s on parts (empty) with a new split; the
// returned call makes parts and the split the published ones.
func (sh *shards) stageSplit(ctx context.Context, parts []shardPart, s *packed.Slab, st *core.Stages, progress func(done, total int)) (func(), error) {
	starts := sh.split(s.Rows)
	publishes := make([]func(), len(parts))
	var mu sync.Mutex
	done := make([]int, len(parts))
	report := func(i, n int) {
		if progress == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		done[i] = n
		sum := 0
		for _, d := range done {
			sum += d
		}
		progress(sum, s.Rows)
	}
	sts := sh.stages(st)
	if len(parts) > 0 && len(sh.parts) > 0 && &parts[0] == &sh.parts[0] {
		// The shards restage every row: drop tombstones they hold at
		// the old split's rows (publish gives them the new split's).
		for _, p := range parts {
			p.dev.Truncate(0)
		}
	}
	staging := &shards{parts: parts}
	err := staging.each(func(i int, p shardPart) error {
		hi := s.Rows
		if i+1 < len(starts) {
			hi = starts[i+1]
		}
		var err error
		publishes[i], err = p.dev.Stage(ctx, s.Part(starts[i], hi), 0, sts[i], func(d, _ int) { report(i, d) })
		return err
	})
	if err != nil {
		return nil, err
	}
	tally(st, sts)
	old := sh.parts
	return func() {
		for i, publish := range publishes {
			publish()
			parts[i].start = starts[i]
		}
		sh.parts, sh.splitAt = parts, s.Rows
		for i, p := range parts {
			if local := sh.deadIn(p.start, sh.end(i, math.MaxInt)); len(local) > 0 {
				p.dev.MarkDead(local)
			}
		}
		if &old[0] != &parts[0] {
			sh.pending = nil
			for _, p := range old {
				p.dev.Release()
			}
		}
	}, nil
}

// siblings returns a new, empty device side beside every shard's.
func (sh *shards) siblings() ([]shardPart, error) {
	out := make([]shardPart, 0, len(sh.parts))
	for _, p := range sh.parts {
		d, err := p.dev.Sibling()
		if err != nil {
			for _, q := range out {
				q.dev.Release()
			}
			return nil, err
		}
		out = append(out, shardPart{dev: d})
	}
	return out, nil
}

func (sh *shards) Upload(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) error {
	publish, err := sh.Stage(ctx, s, from, st, progress)
	if err != nil {
		return err
	}
	publish()
	return nil
}

// Truncate keeps the first rows rows resident.
func (sh *shards) Truncate(rows int) {
	for _, p := range sh.parts {
		p.dev.Truncate(max(rows-p.start, 0))
	}
	if rows == 0 {
		sh.splitAt, sh.dead = 0, nil
	}
}

// MarkDead records the rows' tombstones and marks each on the shard that
// holds it.
func (sh *shards) MarkDead(rows []int) {
	for _, r := range rows {
		if w := r >> 6; w >= len(sh.dead) {
			sh.dead = append(sh.dead, make([]uint64, w+1-len(sh.dead))...)
		}
		sh.dead[r>>6] |= 1 << (uint(r) & 63)
	}
	for i, p := range sh.parts {
		hi := sh.end(i, math.MaxInt)
		var local []int
		for _, r := range rows {
			if r >= p.start && r < hi {
				local = append(local, r-p.start)
			}
		}
		if len(local) > 0 {
			p.dev.MarkDead(local)
		}
	}
}

// deadIn is the tombstoned rows in [lo, hi), numbered from lo.
func (sh *shards) deadIn(lo, hi int) []int {
	var out []int
	for w := lo >> 6; w < len(sh.dead) && w<<6 < hi; w++ {
		for b := sh.dead[w]; b != 0; b &= b - 1 {
			if r := w<<6 + bits.TrailingZeros64(b); r >= lo && r < hi {
				out = append(out, r-lo)
			}
		}
	}
	return out
}

// Rewrite writes each row again on the shard that holds it.
func (sh *shards) Rewrite(ctx context.Context, s *packed.Slab, rows []int) error {
	local := make([][]int, len(sh.parts))
	for _, r := range rows {
		i := len(sh.parts) - 1
		for i > 0 && r < sh.parts[i].start {
			i--
		}
		local[i] = append(local[i], r-sh.parts[i].start)
	}
	return sh.each(func(i int, p shardPart) error {
		if len(local[i]) == 0 {
			return nil
		}
		return p.dev.Rewrite(ctx, s.Part(p.start, sh.end(i, s.Rows)), local[i])
	})
}

// Search searches every shard's rows below rows at once, each with its
// part of mask, and merges their answers.
func (sh *shards) Search(ctx context.Context, qs [][]float32, k, rows int, mask []uint64, st *core.Stages) ([][]core.Hit, error) {
	res := make([][][]core.Hit, len(sh.parts))
	sts := sh.stages(st)
	err := sh.each(func(i int, p shardPart) error {
		hi := sh.end(i, rows)
		if hi <= p.start {
			return nil
		}
		var part []uint64
		if mask != nil {
			part = mask[p.start/64 : (hi+63)/64]
		}
		var err error
		res[i], err = p.dev.Search(ctx, qs, k, hi-p.start, part, sts[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	tally(st, sts)
	m := sh.metric
	out := make([][]core.Hit, len(qs))
	for q := range qs {
		out[q] = []core.Hit{}
		for i, r := range res {
			if r != nil {
				out[q] = mergeHits(out[q], r[q], sh.parts[i].start, k, m, nil)
			}
		}
	}
	return out, nil
}

// Scores returns every row's score below rows, each shard scoring its own.
func (sh *shards) Scores(ctx context.Context, q []float32, rows int) ([]float32, error) {
	out := make([]float32, rows)
	err := sh.each(func(i int, p shardPart) error {
		hi := sh.end(i, rows)
		if hi <= p.start {
			return nil
		}
		s, err := p.dev.Scores(ctx, q, hi-p.start)
		if err != nil {
			return err
		}
		if len(s) != hi-p.start {
			return fmt.Errorf("%w: %d scores for %d rows", ErrGPU, len(s), hi-p.start)
		}
		copy(out[p.start:hi], s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Floor reads every shard's rows at once: the time is the slowest
// shard's, the bytes all of theirs.
func (sh *shards) Floor(ctx context.Context) (time.Duration, int64, string, error) {
	times := make([]time.Duration, len(sh.parts))
	bytes := make([]int64, len(sh.parts))
	clocks := make([]string, len(sh.parts))
	err := sh.each(func(i int, p shardPart) error {
		var err error
		times[i], bytes[i], clocks[i], err = p.dev.Floor(ctx)
		return err
	})
	if err != nil {
		return 0, 0, "", err
	}
	var d time.Duration
	var b int64
	clock := clocks[0]
	for i := range times {
		d, b = max(d, times[i]), b+bytes[i]
		if clocks[i] != clock {
			clock = "wall"
		}
	}
	return d, b, clock, nil
}

// Calibrate is the shards together, as Auto's routing sees them: the
// slowest one's latency and the sum of their scan rates.
func (sh *shards) Calibrate() (time.Duration, float64, error) {
	var lat time.Duration
	var rate float64
	for i, p := range sh.parts {
		l, r, err := p.dev.Calibrate()
		if err != nil {
			return 0, 0, fmt.Errorf("shard %d (%s): %w", i, p.dev.Adapter(), err)
		}
		lat, rate = max(lat, l), rate+r
	}
	return lat, rate, nil
}

// Sibling is a new, empty shard set on the same devices.
func (sh *shards) Sibling() (device, error) {
	parts, err := sh.siblings()
	if err != nil {
		return nil, err
	}
	return &shards{parts: parts, weights: sh.weights, metric: sh.metric}, nil
}

// Renew renews every shard's device (recovery): all of them pass the
// self-test again, or the attempt fails.
func (sh *shards) Renew(ctx context.Context, timeout time.Duration) (device, error) {
	out := &shards{weights: sh.weights, metric: sh.metric}
	for i, p := range sh.parts {
		d, err := p.dev.Renew(ctx, timeout)
		if err != nil {
			out.Release()
			return nil, fmt.Errorf("shard %d (%s): %w", i, p.dev.Adapter(), err)
		}
		out.parts = append(out.parts, shardPart{dev: d})
	}
	return out, nil
}

func (sh *shards) SetFault(f func(step string) error) {
	for _, p := range sh.parts {
		p.dev.SetFault(f)
	}
}

func (sh *shards) Release() {
	sh.dropPending()
	for _, p := range sh.parts {
		p.dev.Release()
	}
}

// info describes the shards for Info: each one's adapter, first row and
// rows, of rows published rows.
func (sh *shards) info(rows int) []ShardInfo {
	out := make([]ShardInfo, len(sh.parts))
	for i, p := range sh.parts {
		out[i] = ShardInfo{Adapter: p.dev.Adapter(), Start: min(p.start, rows), Rows: max(sh.end(i, rows)-p.start, 0)}
	}
	return out
}

// mergeHits returns the best k of a (global rows) and b (rows numbered
// from off), each ranked best first, ties by lower ID, ids[row] (nil: by
// lower row, a device's order).
func mergeHits(a, b []core.Hit, off, k int, m core.Metric, ids []uint64) []core.Hit {
	out := make([]core.Hit, 0, min(k, len(a)+len(b)))
	i, j := 0, 0
	for len(out) < k && (i < len(a) || j < len(b)) {
		var h core.Hit
		if j < len(b) {
			h = b[j]
			h.Row += off
		}
		if i < len(a) && (j >= len(b) || topk.Worse(h, a[i], m, ids)) {
			out, i = append(out, a[i]), i+1
		} else {
			out, j = append(out, h), j+1
		}
	}
	return out
}

// Sums refuses: shards hold float32 rows only (validateShards
// refuses a compressed precision), so no shard holds codes to sum.
func (sh *shards) Sums(ctx context.Context, qs [][]float32, rows int, st *core.Stages) ([]float32, int, error) {
	return nil, 0, fmt.Errorf("%w: sharded indexes hold float32 rows; compressed sums are not sharded", gpu.ErrFailed)
}
