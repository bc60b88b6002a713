package gpu

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/shaders"
)

// growBuffer is a device buffer that is replaced by a larger one when a
// request outgrows it; its contents are scratch, never carried over.
type growBuffer struct {
	buf   gpuplan.Buffer
	size  uint64
	label string
	usage gpuplan.Usage
	// limit caps growth: a buffer bound whole must stay within the
	// device's storage binding size, a staging buffer within its buffer
	// size. A request above it is the caller's to avoid.
	limit uint64
}

// ensure makes the buffer at least size bytes and reports whether it was
// replaced (so bind groups naming it must be rebuilt). Growth doubles, so a
// run of growing requests costs amortised O(1) reallocations, but never
// past the limit.
func (b *growBuffer) ensure(g *Index, size uint64) (bool, error) {
	if size <= b.size && b.buf != nil {
		return false, nil
	}
	size = (size + 3) &^ 3 // a storage binding is a multiple of 4 bytes
	if size > b.limit {
		// The submission was sized wrong: say so rather than let the
		// device reject a binding it cannot hold.
		return false, fmt.Errorf("%w: %s needs %d bytes, the device allows %d in one binding", ErrTooLarge, b.label, size, b.limit)
	}
	// Doubling amortises a run of growing requests, but not past the
	// scratch cap: there the buffer is made just as large as asked.
	if grown := max(size, min(max(2*b.size, 256), b.limit)); grown == size || g.scratchHeld()-b.size+grown <= g.scratchCap() {
		size = grown
	}
	// The old buffer goes first: its contents are scratch, and the two
	// together could pass the budget where the new one alone does not.
	g.free(b.buf)
	b.buf, b.size = nil, 0
	nb, err := g.alloc(b.label, size, b.usage)
	if err != nil {
		return true, err
	}
	b.buf, b.size = nb, size
	return true, nil
}

// drop frees the buffer; the next ensure makes a new one.
func (b *growBuffer) drop(g *Index) {
	g.free(b.buf)
	b.buf, b.size = nil, 0
}

// grid returns the 2-D dispatch for a chunk of rows rows.
func (g *Index) grid(rows int, l shaders.ScoresLayout) (x, y uint32) {
	return gpuplan.Grid(rows, l, g.maxGroups())
}

// resident lists the chunks that hold rows, in order. A chunk whose first
// growth failed has no buffer and is skipped everywhere.
func (g *Index) resident() []*gpuChunk {
	out := make([]*gpuChunk, 0, len(g.chunks))
	for _, ch := range g.chunks {
		if ch.rows > 0 {
			out = append(out, ch)
		}
	}
	return out
}

// prepare sizes the scratch buffers for one submission and builds the bind
// groups it needs. Replacing any buffer drops every bind group (a replaced
// buffer may be named by the other path's groups too); the groups are
// rebuilt here as a path needs them. The caller resets the scratch state
// if it fails, so a half-done prepare is never used.
func (g *Index) prepare(sub submission) error {
	nq := uint64(sub.NQ)
	type need struct {
		b    *growBuffer
		size uint64
	}
	allowBytes := max(uint64(len(sub.Mask))*8, 16)
	if sub.Tombs {
		// The tombstones sit past the room for an allow bitmap of every
		// resident row, so a filtered search does not overwrite them;
		// when that room grows they move and are written again.
		room := uint64(2)
		for room < 2*uint64((sub.Rows+63)/64) {
			room *= 2
		}
		if room > g.deadAt {
			g.deadAt, g.deadValid = room, 0
		}
		allowBytes = (g.deadAt + 2*uint64((sub.Rows+63)/64)) * 4
	} else if 2*uint64(len(sub.Mask)) > g.deadAt {
		g.deadValid = 0 // this allow bitmap runs into the tombstones
	}
	allow := need{&g.allow, allowBytes}
	var needs []need
	if sub.Fused {
		needs = []need{{&g.query, nq * g.queryBytes()}, {&g.cands, nq * uint64(sub.Lists) * uint64(sub.K) * shaders.HitBytes},
			{&g.hits, nq * uint64(sub.K) * shaders.HitBytes}, {&g.mparams, shaders.MergeParamsBytes}, allow}
	} else {
		needs = []need{{&g.query, nq * g.queryBytes()}, {&g.scoresB, nq * uint64(sub.Rows) * 4},
			{&g.state, nq * shaders.StateBytes}, {&g.hits, nq * uint64(sub.HitsPerQuery()) * shaders.HitBytes}, allow}
	}
	// Scratch this submission does not use, or holds larger than it
	// needs, goes first where keeping it would pass the scratch cap
	// (another shape of search made it).
	readback := sub.ReadbackBytes()
	if g.dev.timestamps {
		readback = gpuplan.StampAt(readback) + gpuplan.StampRoom
	}
	wants := map[*growBuffer]uint64{&g.staging: readback}
	for _, r := range needs {
		wants[r.b] = r.size
	}
	g.makeRoom(wants)
	for _, r := range needs {
		if err := g.step("create " + r.b.label); err != nil {
			return err
		}
		replaced, err := r.b.ensure(g, r.size)
		if replaced && r.b == &g.allow {
			g.deadValid = 0 // a new buffer holds no tombstones
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// makeRoom frees, where the scratch held now and the sizes wants asks
// for together would pass the scratch cap, every scratch buffer wants
// does not name or that holds more than it asks (another shape of search
// made it). The caller holds the device mutex.
func (g *Index) makeRoom(wants map[*growBuffer]uint64) {
	var want uint64
	for _, w := range wants {
		want += w
	}
	if g.scratchHeld()+want <= g.scratchCap() {
		return
	}
	for _, b := range g.scratch() {
		if w, ok := wants[b]; !ok || b.size > w {
			b.drop(g)
			if b == &g.allow {
				g.deadValid = 0
			}
		}
	}
	g.qsel.dropScratch(g)
}

// resetScratch drops every scratch buffer and bind group after a failed
// search, so the next one rebuilds them from nothing instead of trusting
// state a failure may have left half changed (a buffer replaced but the
// bind group naming it not, a readback buffer left mapped). The resident
// rows are untouched. The caller holds the device mutex.
func (g *Index) resetScratch() {
	for _, b := range g.scratch() {
		b.drop(g)
	}
	g.deadValid = 0
}

// scratchHeld is the bytes the index's scratch buffers hold now.
func (g *Index) scratchHeld() uint64 {
	var n uint64
	for _, b := range g.scratch() {
		n += b.size
	}
	if q := g.qsel; q != nil {
		n += q.keys.size + q.coef.size + q.cands.size
	}
	return n
}

// scratch lists the index's scratch buffers a search writes.
func (g *Index) scratch() []*growBuffer {
	return []*growBuffer{&g.query, &g.scoresB, &g.state, &g.hits, &g.allow, &g.staging, &g.cands, &g.mparams, &g.gatherRows}
}

// submission is one pass of a search (gpuplan.Submission).
type submission = gpuplan.Submission

// batchLimit is how many queries one submission of this shape may hold:
// each of its scratch buffers must fit one storage binding, the readback
// one buffer, and the query index is a grid dimension. It is at least 1
// for any index upload accepted (one query's scores fit a binding) and any
// valid dimension (one query fits a binding, as one row did).
func (g *Index) batchLimit(sub submission) int {
	perQuery := max(uint64(sub.Rows)*4, g.queryBytes(), shaders.StateBytes)
	if sub.Fused {
		// No scores buffer: the candidate lists instead.
		perQuery = max(g.queryBytes(), uint64(sub.Lists)*uint64(sub.K)*shaders.HitBytes)
	}
	if sub.DeviceSelect {
		perQuery = max(perQuery, uint64(sub.K)*shaders.HitBytes)
	}
	n := g.bind / perQuery
	sub.NQ = 1
	n = min(n, g.staging.limit/max(sub.ReadbackBytes(), 1))
	// Every scratch buffer together within the scratch cap (and what the
	// budget leaves beside the rows), read under the device mutex: a
	// search under way moves the tombstones (prepare sets deadAt).
	g.dev.mu.Lock()
	room := g.scratchRoom()
	fixed := g.allowBytes(sub) + shaders.MergeParamsBytes + 2*gpuplan.StampRoom
	g.dev.mu.Unlock()
	n = min(n, (room-min(fixed, room))/max(scratchPerQuery(sub, g.queryBytes()), 1))
	return int(max(min(n, g.maxGroups(), 1024), 1))
}

// scratchRoom is the most bytes the index's scratch may hold: the scratch
// cap, within what the budget leaves beside the rows. The caller holds
// the device mutex.
func (g *Index) scratchRoom() uint64 {
	if g.mem.budget == 0 {
		return g.scratchCap()
	}
	return min(g.scratchCap(), g.mem.budget-min(g.rowCapBytes(), g.mem.budget))
}

// scratchPerQuery is the scratch one query of sub takes: its query, then
// the fused path's candidate lists and hits, or the scores, select state
// and hits, and its share of the read back.
func scratchPerQuery(sub submission, queryBytes uint64) uint64 {
	sub.NQ = 1
	if sub.Fused {
		return queryBytes + uint64(sub.Lists)*uint64(sub.K)*shaders.HitBytes + uint64(sub.K)*shaders.HitBytes + sub.ReadbackBytes()
	}
	return queryBytes + uint64(sub.Rows)*4 + shaders.StateBytes + uint64(sub.HitsPerQuery())*shaders.HitBytes + sub.ReadbackBytes()
}

// allowBytes is the allow buffer a submission needs: its bitmap, or, with
// the tombstones, room for a bitmap of every row and the tombstones
// past it. The caller holds the device mutex (deadAt).
func (g *Index) allowBytes(sub submission) uint64 {
	if !sub.Tombs {
		return max(uint64(len(sub.Mask))*8, 16)
	}
	room := uint64(2)
	for room < 2*uint64((sub.Rows+63)/64) {
		room *= 2
	}
	return (max(room, g.deadAt) + 2*uint64((sub.Rows+63)/64)) * 4
}

// submitBudget is about how long one submission may keep the device busy,
// by its estimated work at the device's scan rate. A batch is cut into
// submissions of about this much so that none nears a watchdog (Windows
// resets a GPU whose work runs past 2 s), the device is not held for
// seconds at a time, and a cancelled context stops the batch between two
// submissions.
const submitBudget = 100 * time.Millisecond

// defaultScanRate (bytes a second) is assumed where the probe could not
// time a scan: a small GPU's.
const defaultScanRate = 20e9

// workLimit is how many queries of this shape one submission may hold
// within submitBudget: whole tiles of queries, each a pass over the rows,
// plus what selecting or reading back each query's scores adds (the radix
// select reads every score about ten times: eight histogram rounds, the
// compaction, the sort), estimated at the device's scan rate. It is at
// least one tile: a tile's pass cannot be split.
func (g *Index) workLimit(sub submission, qt int) int {
	rate := g.dev.scanRate
	if rate <= 0 {
		rate = defaultScanRate
	}
	qt = max(qt, 1)
	perQuery := 0.0
	switch {
	case !sub.DeviceSelect:
		perQuery = float64(sub.Rows) * 4 // every score read back
	case !sub.Fused:
		perQuery = float64(sub.Rows) * 4 * 10
	}
	tile := float64(sub.Rows)*float64(g.rowBytes()) + perQuery*float64(qt)
	tiles := int(min(rate*submitBudget.Seconds()/max(tile, 1), 1<<20))
	return max(tiles, 1) * qt
}

// perSubmission is how many queries of this shape one submission takes:
// what its buffers hold (batchLimit, sized as the radix select's, which
// holds the fused path's too) and its estimated work allows (workLimit,
// the fused path's where a batch would take it), in whole tiles of the
// batch kernel (gemm.wgsl's when gemm) wherever one tile fits: a
// submission's last tile partly filled does a whole tile's work for
// fewer queries (134 queries fit one 2 GiB binding at 4,000,000 rows: 4
// tiles of 32 and 6 queries in a fifth).
func (g *Index) perSubmission(sub submission, gemm bool) int {
	n := g.batchLimit(sub)
	qt := g.batch.QT
	if gemm {
		qt = g.gemm.QT
	} else if sub.DeviceSelect {
		_, sub.Fused = g.fusedPlan(sub.K, batchQT, sub.Radix)
	}
	return gpuplan.WholeTiles(min(n, g.workLimit(sub, int(qt))), int(qt))
}

// gemmFor reports whether a submission of nq queries is scored by
// gemm.wgsl under kernel k: always for a batch under BatchGemm, never
// under BatchTile, and under BatchAuto for GemmMinBatch queries or more
// where the device chose it. Compressed rows have no gemm layout.
func (g *Index) gemmFor(nq int, k BatchKernel) bool {
	if g.gemm.RM == 0 || nq < 2 {
		return false
	}
	switch k {
	case BatchGemm:
		return true
	case BatchTile:
		return false
	}
	return g.dev.gemm && nq >= GemmMinBatch
}

// maxGroups is the device's workgroups per grid dimension.
func (g *Index) maxGroups() uint64 { return gpuplan.MaxGroups(g.dev.lim.MaxWorkgroupsPerDim) }

// writeInputs queues the writes a search needs before its dispatches: the
// queries, each chunk's parameters and, when selecting on the device, every
// query's select state reset to k (radix) or the merge's parameters
// (fused), and the allow bitmap. c counts the bytes.
func (g *Index) writeInputs(qs [][]float32, sub submission, layout shaders.ScoresLayout, c *core.Stages) error {
	nq := len(qs)
	flat := qs[0] // a single query is written as it is, without a copy
	if nq > 1 {
		flat = make([]float32, 0, nq*g.plan.Stride)
		for _, q := range qs {
			flat = append(flat, q...)
		}
	}
	if err := g.write(c, "write queries", g.query.buf, bytesOf(flat)); err != nil {
		return err
	}
	if sub.Tombs {
		// Tombstone words the device lacks (rows added or marked since
		// they were last written, or all of them after the buffer was
		// replaced) go up before the search reads them.
		words := (sub.Rows + 63) / 64
		if g.deadValid < words {
			b := make([]uint64, words-g.deadValid)
			if g.deadValid < len(g.dead) {
				copy(b, g.dead[g.deadValid:min(words, len(g.dead))])
			}
			if err := g.writeAt(c, "write tombstones", g.allow.buf, (g.deadAt+2*uint64(g.deadValid))*4, bytesOf(b)); err != nil {
				return err
			}
			g.deadValid = words
		}
	}
	masked := shaders.MaskedWith(sub.Mask != nil, 0)
	if sub.Tombs {
		masked = shaders.MaskedWith(sub.Mask != nil, uint32(g.deadAt))
	}
	list := 0
	for i, ch := range g.chunks {
		if ch.rows == 0 {
			continue
		}
		x, _ := g.grid(ch.rows, layout)
		p := shaders.Params{Rows: uint32(ch.rows), GroupsX: x, Base: uint32(i * g.plan.RowsPerChunk),
			Total: uint32(sub.Rows), Queries: uint32(nq)}
		if sub.Fused {
			p.K, p.Masked, p.ListBase, p.Lists = uint32(sub.K), masked, uint32(list), uint32(sub.Lists)
			list += sub.Groups
		}
		if err := g.write(c, "write params", ch.params, p.Encode()); err != nil {
			return err
		}
	}
	switch {
	case sub.Fused:
		if err := g.write(c, "write merge params", g.mparams.buf, shaders.MergeParams(sub.K, sub.Lists)); err != nil {
			return err
		}
	case sub.DeviceSelect:
		if err := g.write(c, "write select state", g.state.buf, shaders.SelectState(nq, sub.Rows, sub.K, masked)); err != nil {
			return err
		}
	}
	if sub.DeviceSelect && sub.Mask != nil {
		if err := g.write(c, "write allow", g.allow.buf, bytesOf(sub.Mask)); err != nil {
			return err
		}
	}
	return nil
}

// write queues b into buf at offset 0 and counts its bytes into c: every
// byte a search sends goes through here (or writeAt).
func (g *Index) write(c *core.Stages, step string, buf gpuplan.Buffer, b []byte) error {
	return g.writeAt(c, step, buf, 0, b)
}

// writeAt is write at byte offset off.
func (g *Index) writeAt(c *core.Stages, step string, buf gpuplan.Buffer, off uint64, b []byte) error {
	if err := g.step(step); err != nil {
		return err
	}
	if err := g.api().Write(buf, off, b); err != nil {
		return err
	}
	c.BytesUp += int64(len(b))
	return nil
}

// pass is a compute pass being recorded: its dispatches, counted into c.
type pass struct {
	list []gpuplan.Dispatch
	c    *core.Stages
}

// dispatch records one dispatch of p over bufs and counts it.
func (ps *pass) dispatch(p gpuplan.Pipeline, x, y, z uint32, bufs ...gpuplan.Buffer) {
	ps.list = append(ps.list, gpuplan.Dispatch{Pipe: p, Buffers: bufs, X: x, Y: y, Z: z})
	ps.c.Dispatches++
}

// fusedPlan returns the plan a device selection of k for nq queries
// takes, if it takes the fused path: the device passed the fused
// self-test, the call did not force the radix select (radix; a self-test
// ignores that), and a plan's limit covers k.
func (g *Index) fusedPlan(k, nq int, radix bool) (shaders.TopKLayout, bool) {
	if !g.dev.fused || radix && !g.selfTest {
		return shaders.TopKLayout{}, false
	}
	return gpuplan.FusedPlan(g.topkSingle, g.topkBatch, k, nq)
}

// planSelect decides, once the number of queries is known, whether a
// device selection takes the fused path: the device passed its self-test,
// no caller forced the radix select, and k is within a compiled plan's
// limit for this many queries. The fused scan then runs groups workgroups
// per resident chunk: enough to fill a large GPU (512) for small k, fewer
// as k grows so the merge reads at most about 8,192 candidates per query
// (at least 16 lists, and no more than the chunk has steps of rows; 32 at
// most on a software adapter).
func (g *Index) planSelect(sub *submission, gemm bool) {
	sub.Fused = false
	if !sub.DeviceSelect || gemm {
		// gemm.wgsl writes scores, which the radix select reads.
		return
	}
	p, ok := g.fusedPlan(sub.K, sub.NQ, sub.Radix)
	if !ok {
		return
	}
	most, chunks := 0, 0
	for _, ch := range g.resident() {
		most = max(most, ch.rows)
		chunks++
	}
	gpuplan.PlanFused(sub, p, most, chunks, g.dev.info.Software(), g.fusedGroups)
}

// encodeSearch records a search's dispatches into pass: fused, one scan
// per chunk and the merge; otherwise the scores of every chunk for every
// tile of queries, then, when selecting on the device, the eight
// radix-select rounds (hist, scan) and the compaction of the k hits. c
// counts the dispatches.
func (g *Index) encodeSearch(ps *pass, layout shaders.ScoresLayout, sub submission) {
	c := ps.c
	if sub.Fused {
		scan := g.dev.pipes.fused[sub.Plan]
		tiles := uint32((sub.NQ + int(sub.Plan.Scores.QT) - 1) / int(sub.Plan.Scores.QT))
		for _, ch := range g.resident() {
			ps.dispatch(scan, uint32(sub.Groups), 1, tiles, ch.data, g.query.buf, g.cands.buf, ch.params, g.allow.buf)
			g.countRead(c, ch.rows, tiles)
		}
		ps.dispatch(g.dev.pipes.merges[g.metric == core.L2], uint32(sub.NQ), 1, 1, g.cands.buf, g.hits.buf, g.mparams.buf)
		return
	}
	g.encodeScores(ps, layout, sub.NQ, g.query.buf, g.scoresB.buf)
	if !sub.DeviceSelect {
		return
	}
	sp := g.dev.pipes.selects[g.metric == core.L2]
	gx := gpuplan.SelectGroups(sub.Rows)
	sel := []gpuplan.Buffer{g.scoresB.buf, g.state.buf, g.hits.buf, g.allow.buf}
	for round := 0; round < 8; round++ {
		ps.dispatch(sp.hist, gx, uint32(sub.NQ), 1, sel...)
		ps.dispatch(sp.scan, uint32(sub.NQ), 1, 1, sel...)
	}
	ps.dispatch(sp.compact, gx, uint32(sub.NQ), 1, sel...)
	if sub.DeviceSorted() {
		ps.dispatch(sp.sort, uint32(sub.NQ), 1, 1, sel...)
	}
}

// encodeScores records the scores pass of layout over every resident
// chunk for nq queries in query, into scores.
func (g *Index) encodeScores(ps *pass, layout shaders.ScoresLayout, nq int, query, scores gpuplan.Buffer) {
	p := g.dev.pipes.scores[layout]
	tiles := uint32((nq + int(layout.QT) - 1) / int(layout.QT))
	for _, ch := range g.resident() {
		x, y := g.grid(ch.rows, layout)
		ps.dispatch(p, x, y, tiles, ch.data, query, scores, ch.params)
		g.countRead(ps.c, ch.rows, tiles)
	}
}

// countRead counts into c the row bytes one scan dispatch
// reads: each of rows rows once per tile of queries. The scan kernels read
// every row they cover, whatever the mask or tombstones (those only keep a
// row out of the selection).
func (g *Index) countRead(c *core.Stages, rows int, tiles uint32) {
	c.BytesRead += int64(rows) * int64(g.rowBytes()) * int64(tiles)
}

// run scores qs against the first sub.Rows rows in one submission and one
// map, and reads back either each query's k best (selected on the device)
// or every score (then, for k > 0, selected on the host). A traced call (t
// not nil) issues exactly what an untraced one does, so its counts are the
// search's: Upload times the queued writes, Kernel the submission until
// the device is idle (the GPU's own clock for the dispatches where it has
// timestamps, the rest of that wait then counting as Readback), Readback
// the map and copy. Any failure resets the scratch state, so the next call
// starts clean.
func (g *Index) run(ctx context.Context, qs [][]float32, sub submission, t *core.Stages) (hits [][]core.Hit, all []float32, err error) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if g.lost != nil {
		return nil, nil, g.lost
	}
	sub.NQ = len(qs)
	qs, scale, err := g.flushScale(qs)
	if err != nil {
		return nil, nil, err
	}
	layout := g.single
	if sub.NQ > 1 {
		layout = g.batch
	}
	gemm := g.gemmFor(sub.NQ, BatchKernelOf(ctx))
	if gemm {
		layout = g.gemm
	}
	g.planSelect(&sub, gemm)
	c := core.Stages{Path: sub.Path()}
	start := time.Now()
	var raw []byte
	size := sub.ReadbackBytes()
	err = g.dev.scoped("search", func() error {
		if gemm {
			// Compiled here on first use when the probe did not choose
			// it (a caller forced BatchGemm).
			if _, err := g.dev.scoresPipeline(layout); err != nil {
				return err
			}
		}
		if err := g.prepare(sub); err != nil {
			return err
		}
		err := g.writeInputs(qs, sub, layout, &c)
		if err != nil {
			return err
		}
		if t != nil {
			start = lap(&c.Upload, start)
		}
		if err := g.step("encode"); err != nil {
			return err
		}
		ps := &pass{c: &c}
		g.encodeSearch(ps, layout, sub)
		src := g.hits.buf
		if !sub.DeviceSelect {
			src = g.scoresB.buf
		}
		raw, err = g.submitAndRead(&c, ps.list, src, size, t != nil, &start)
		return err
	})
	if err != nil {
		g.resetScratch()
		return nil, nil, err
	}
	switch {
	case sub.DeviceSelect:
		hits = gpuplan.Decode(raw, sub.NQ, sub.K, !sub.Fused && !sub.DeviceSorted(), g.metric)
		if err := unscaleHits(hits, scale); err != nil {
			return nil, nil, err
		}
	case sub.K == 0:
		t.Add(&c)
		scores := floatsOf(raw)
		unscaleScores(scores, sub.Rows, scale)
		return nil, scores, nil
	default:
		scores := floatsOf(raw)
		unscaleScores(scores, sub.Rows, scale)
		hits = gpuplan.HostSelect(scores, sub, g.metric)
	}
	if t != nil {
		lap(&c.Select, start)
	}
	t.Add(&c)
	return hits, nil, nil
}

// flushScale returns the queries as the device scores them, so that no
// score depends on whether the device flushes subnormals (flushPlan): each
// one that needs it scaled by a power of two, whose exponent scale holds
// (nil when none is scaled). ErrSubnormal: no scaling can promise it for
// some query, and the CPU must score the search. A compressed index's sums
// are bounded for flushing instead (internal/exact).
func (g *Index) flushScale(qs [][]float32) ([][]float32, []int, error) {
	if g.prec != core.F32 {
		return qs, nil, nil
	}
	rows := g.rows.get()
	var scale []int
	var out [][]float32
	for j, q := range qs {
		s, ok := flushPlan(rows, rangeOf(q), g.metric == core.L2, g.plan.Stride)
		if !ok {
			return nil, nil, fmt.Errorf("%w: query %d against rows of exponents %d to %d (%v)", ErrSubnormal, j, rows.min, rows.max, g.metric)
		}
		if s == 0 {
			continue
		}
		if scale == nil {
			scale, out = make([]int, len(qs)), slices.Clone(qs)
		}
		scaled := make([]float32, len(q))
		for i, v := range q {
			scaled[i] = scaleBy(v, s)
		}
		scale[j], out[j] = s, scaled
	}
	if scale == nil {
		return qs, nil, nil
	}
	return out, scale, nil
}

// unscaleScores undoes flushScale on every row's score (rows a query).
func unscaleScores(scores []float32, rows int, scale []int) {
	for j, s := range scale {
		if s == 0 {
			continue
		}
		for i := j * rows; i < (j+1)*rows; i++ {
			scores[i] = scaleBy(scores[i], -s)
		}
	}
}

// unscaleHits undoes flushScale on the hits the device selected. Scaling
// by 2^s keeps the order of the scores and their ties, and so does
// unscaling wherever the result is a normal float32 (it is exact there);
// two scores that unscale to the same subnormal, or to zero, would tie
// where the device ranked them apart, and the lower row might lie past the
// k the device kept. A scaled query with such a hit is therefore refused
// (ErrSubnormal): its scores are tiny enough for the CPU.
func unscaleHits(hits [][]core.Hit, scale []int) error {
	for j, s := range scale {
		if s == 0 {
			continue
		}
		for i := range hits[j] {
			u := scaleBy(hits[j][i].Score, -s)
			if math.Abs(float64(u)) < 0x1p-126 {
				return fmt.Errorf("%w: query %d scores %v, below the normal float32 range", ErrSubnormal, j, u)
			}
			hits[j][i].Score = u
		}
	}
	return nil
}

// Search returns each query's top k (k at most rows, the rows resident),
// best first, in as few submissions as the device's bindings allow; st
// (may be nil) records where the time went. The device selects the k best where that reads back
// less than every score; from k = rows/2 on, every score is read back and
// the host selects, so no k up to the index's size is too large.
//
// mask, when not nil, is a bitmap over rows (bit r of word r/64, at least
// rows bits): only rows whose bit is set take part, inside the device's
// selection (rows a filter leaves out; the caller clears deleted rows in
// it too); k is capped at how many it holds. With mask nil the rows marked
// by MarkDead are skipped instead, from the tombstones resident on the
// device: no bitmap goes up with the search.
func (g *Index) Search(ctx context.Context, qs [][]float32, k, rows int, mask []uint64, st *core.Stages) ([][]core.Hit, error) {
	allowed := rows
	tombs := false
	if mask != nil {
		if len(mask)*64 < rows {
			return nil, fmt.Errorf("%w: an allow bitmap of %d words for %d rows", ErrFailed, len(mask), rows)
		}
		// Bits past rows do not count: no search returns those rows, and
		// a k past the rows it can return would leave hit slots unfilled.
		allowed = gpuplan.Allowed(mask, rows)
	} else {
		g.dev.mu.Lock()
		if dead := g.deadIn(rows); dead > 0 {
			allowed, tombs = rows-dead, true
		}
		g.dev.mu.Unlock()
	}
	if g.prec != core.F32 {
		return nil, fmt.Errorf("%w: an index of compressed rows is searched through Sums", ErrFailed)
	}
	if rows == 0 || allowed == 0 {
		return gpuplan.EmptyLists(len(qs)), nil
	}
	k = min(k, allowed)
	sub := submission{K: k, Rows: rows, DeviceSelect: 2*k < rows, Mask: mask, Tombs: tombs,
		Radix: SelectPathOf(ctx) == SelectRadix}
	if tombs && !sub.DeviceSelect {
		// The host selects from every score: it reads the tombstones
		// itself, and nothing goes up.
		g.dev.mu.Lock()
		sub.Mask, sub.Tombs = g.liveMask(rows), false
		g.dev.mu.Unlock()
	}
	per := g.perSubmission(sub, g.gemmFor(len(qs), BatchKernelOf(ctx)))
	return gpuplan.SearchBatches(qs, per, func(part [][]float32) ([][]core.Hit, error) {
		hits, _, err := g.run(ctx, part, sub, st)
		return hits, err
	})
}

// Sums returns, for an index of compressed rows (NewCompressedIndex), every
// one of the first rows rows' raw sum against each query, query j's at
// j*rows: a float32 (float16 codes) or an int32 (int8 codes, without the
// fallback's offset of 128) by its bits. Each query is given as the
// words the shader reads (exact.DeviceQuery), as float32 elements; st
// (may be nil) records where the time went. scans is how many passes over
// the codes it took (one per tile of queries).
func (g *Index) Sums(ctx context.Context, qs [][]float32, rows int, st *core.Stages) (sums []float32, scans int, err error) {
	if g.prec == core.F32 {
		return nil, 0, fmt.Errorf("%w: Sums needs an index of compressed rows", ErrFailed)
	}
	if err := gpuplan.QueryWords(qs, int(g.queryBytes()/4), ErrFailed); err != nil {
		return nil, 0, err
	}
	sub := submission{Rows: rows}
	return gpuplan.SumBatches(qs, rows, func() int { return g.perSubmission(sub, false) }, g.single.QT, g.batch.QT,
		func(part [][]float32) ([]float32, error) {
			_, all, err := g.run(ctx, part, sub, st)
			return all, err
		})
}

// scores returns every row's score for q, unranked: the device's self-test
// checks each against float64.
func (g *Index) scores(ctx context.Context, q []float32, rows int) ([]float32, error) {
	if rows == 0 {
		return []float32{}, nil
	}
	_, all, err := g.run(ctx, [][]float32{q}, submission{Rows: rows}, nil)
	return all, err
}

// Scores returns every resident row's score for one padded query, read
// back whole (4 bytes a row): what a range search filters on the host.
func (g *Index) Scores(ctx context.Context, q []float32, rows int) ([]float32, error) {
	if g.prec != core.F32 {
		return nil, fmt.Errorf("%w: an index of compressed rows is searched through Sums", ErrFailed)
	}
	return g.scores(ctx, q, rows)
}

// submitAndRead submits the dispatches of list, copies the first size
// bytes of src into the readback buffer and reads them back, counting the
// submission and the map into c. Untraced, the map is the one wait: it
// returns once the submission is done. Traced, the device is waited for
// at the submission so Kernel (from *start, on the wall clock, or the
// GPU's own clock for the dispatches where it has timestamps, the rest of
// that wait then counting as Readback) ends when the work does, and
// Readback covers the map; *start moves on with them.
func (g *Index) submitAndRead(c *core.Stages, list []gpuplan.Dispatch, src gpuplan.Buffer, size uint64, traced bool, start *time.Time) ([]byte, error) {
	timed := traced && g.dev.timestamps
	room := size
	if timed {
		room = gpuplan.StampAt(size) + gpuplan.StampRoom
	}
	if err := g.step("create " + g.staging.label); err != nil {
		return nil, err
	}
	if _, err := g.staging.ensure(g, room); err != nil {
		return nil, err
	}
	if err := g.step("submit"); err != nil {
		return nil, err
	}
	if err := g.step("map readback"); err != nil {
		return nil, err
	}
	done, err := g.api().Submit(gpuplan.Work{Pass: list, Copies: []gpuplan.Copy{{Src: src, Dst: g.staging.buf, Size: size}},
		Map: g.staging.buf, MapBytes: size, Time: timed}, traced)
	if err != nil {
		return nil, err
	}
	c.Submissions++
	c.Maps++
	c.BytesDown += int64(room) // a traced search's timestamps ride in the same map
	if traced {
		// Kernel runs from the end of the writes to the end of the work
		// (encoding and submitting included), Readback is the map.
		now := time.Now()
		kernel := max(now.Sub(*start)-done.Readback, 0)
		c.KernelClock = "wall"
		if d := done.GPU; d > 0 && d <= kernel {
			c.Readback += kernel - d
			kernel, c.KernelClock = d, "gpu"
		}
		c.Kernel += kernel
		c.Readback += done.Readback
		*start = now
	}
	return done.Data, nil
}
