//go:build js && wasm

package webgpu

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"syscall/js"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/shaders"
)

// chunk is one resident run of rows: a storage buffer of at most
// plan.RowsPerChunk rows and its Params uniform.
type chunk struct {
	capRows, rows int
	data, params  js.Value
}

// Index is the device side of one index, as gpu.Index is wgpu's: the
// resident chunks, searched by the shaders of the device's variant.
// Scratch buffers (queries, scores, select state, hits) are created per
// search and destroyed after it, so a failed search leaves nothing behind.
type Index struct {
	dev                   *Device
	metric                core.Metric
	prec                  core.Precision
	single, batch         shaders.ScoresLayout
	topkSingle, topkBatch []shaders.TopKLayout
	plan                  packed.ChunkPlan
	chunks                []*chunk
	// dead marks deleted rows (bit r of word r/64); a search without a
	// mask sends the live rows as its allow bitmap.
	dead         []uint64
	bind         uint64
	maxChunkRows int
	fault        func(step string) error
	fusedGroups  int // tests: caps the fused scan's workgroups per chunk
}

// BatchQueries is how many queries a batch layout scores per pass.
const batchQT = gpu.BatchQueries

// NewIndex returns an empty index for rows of stride float32 values (a
// multiple of 4) ranked by metric, its shaders compiled now so a shader
// the browser rejects fails here, not in a search.
func (d *Device) NewIndex(stride int, metric core.Metric, maxChunkRows int) (*Index, error) {
	if err := d.checkScope(metric); err != nil {
		return nil, err
	}
	return d.newIndex(stride, metric, core.F32, maxChunkRows)
}

// NewCompressedIndex returns an empty index of compressed codes (F16 or
// Int8), words uint32 words a row; only Sums searches it.
func (d *Device) NewCompressedIndex(words int, prec core.Precision, metric core.Metric, maxChunkRows int) (*Index, error) {
	if prec != core.F16 && prec != core.Int8 {
		return nil, fmt.Errorf("%w: unknown precision %v", gpu.ErrFailed, prec)
	}
	return d.newIndex(words, metric, prec, maxChunkRows)
}

func (d *Device) newIndex(stride int, metric core.Metric, prec core.Precision, maxChunkRows int) (*Index, error) {
	g, err := d.planIndex(stride, metric, prec, maxChunkRows)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	specs, err := g.pipeSpecs()
	if err != nil {
		return nil, err
	}
	if err := d.compile(specs); err != nil {
		return nil, err
	}
	return g, nil
}

// planIndex lays out an index for the variant in use, compiling nothing.
func (d *Device) planIndex(stride int, metric core.Metric, prec core.Precision, maxChunkRows int) (*Index, error) {
	ip, err := gpuplan.PlanIndex(stride, metric, prec, maxChunkRows, gpuplan.Chip{
		MaxStorageBindingBytes: d.lim.MaxStorageBindingBytes, MaxBufferBytes: d.lim.MaxBufferBytes,
		MaxWorkgroupsPerDim: d.lim.MaxWorkgroupsPerDim, MaxInvocations: d.lim.MaxInvocations,
		MaxWorkgroupBytes: d.lim.MaxWorkgroupBytes, Team: d.team, Staged: d.staged,
		Subgroups: d.subgroups, Fused: d.fused, BatchQT: batchQT, TooLarge: gpu.ErrTooLarge,
	})
	if err != nil {
		return nil, err
	}
	plan, single, batch := ip.Chunks, ip.Single, ip.Batch
	g := &Index{dev: d, metric: metric, prec: prec, single: single, batch: batch, plan: plan,
		bind: min(d.lim.MaxStorageBindingBytes, d.lim.MaxBufferBytes), maxChunkRows: maxChunkRows}
	g.topkSingle, g.topkBatch = ip.TopKSingle, ip.TopKBatch
	return g, nil
}

// pipeSpecs lists every pipeline the index's searches may use: both
// scores layouts, the radix select's entries (float32 rows), and the
// fused top-k plans with their merge where the variant is fused.
func (g *Index) pipeSpecs() ([]pipeSpec, error) {
	var specs []pipeSpec
	for _, l := range []shaders.ScoresLayout{g.single, g.batch} {
		sp, err := g.scoresSpec(l)
		if err != nil {
			return nil, err
		}
		specs = append(specs, sp)
	}
	if g.prec == core.F32 {
		for _, e := range shaders.SelectEntries {
			sp, err := g.selectSpec(e)
			if err != nil {
				return nil, err
			}
			specs = append(specs, sp)
		}
	}
	for _, p := range append(slices.Clone(g.topkSingle), g.topkBatch...) {
		sp, err := g.fusedSpec(p)
		if err != nil {
			return nil, err
		}
		specs = append(specs, sp)
	}
	if len(g.topkSingle)+len(g.topkBatch) > 0 {
		sp, err := g.mergeSpec()
		if err != nil {
			return nil, err
		}
		specs = append(specs, sp)
	}
	return specs, nil
}

func (g *Index) scoresSpec(l shaders.ScoresLayout) (pipeSpec, error) {
	src, err := shaders.Scores(l)
	if err != nil {
		return pipeSpec{}, err
	}
	name := "scores.wgsl"
	if l.Prec != core.F32 {
		name = "quant.wgsl"
	}
	if l.Subgroups {
		src = subgroupSource(src)
	}
	return pipeSpec{name, src, shaders.ScoresEntry, "scores", shaders.ScoresBindings}, nil
}

func (g *Index) selectSpec(entry string) (pipeSpec, error) {
	src, err := shaders.Select(g.metric)
	if err != nil {
		return pipeSpec{}, err
	}
	return pipeSpec{"select.wgsl", src, entry, "select", shaders.SelectBindings}, nil
}

func (g *Index) fusedSpec(l shaders.TopKLayout) (pipeSpec, error) {
	src, err := shaders.TopK(l)
	if err != nil {
		return pipeSpec{}, err
	}
	return pipeSpec{"topk.wgsl", src, shaders.FusedEntry, "fused", shaders.FusedBindings}, nil
}

func (g *Index) mergeSpec() (pipeSpec, error) {
	src, err := shaders.MergeTopK(g.metric)
	if err != nil {
		return pipeSpec{}, err
	}
	return pipeSpec{"topk.wgsl merge", src, shaders.MergeEntry, "merge", shaders.MergeBindings}, nil
}

func (g *Index) scoresPipe(l shaders.ScoresLayout) (js.Value, error) {
	sp, err := g.scoresSpec(l)
	if err != nil {
		return js.Value{}, err
	}
	return g.dev.pipeline(sp)
}

func (g *Index) selectPipe(entry string) (js.Value, error) {
	sp, err := g.selectSpec(entry)
	if err != nil {
		return js.Value{}, err
	}
	return g.dev.pipeline(sp)
}

func (g *Index) fusedPipe(l shaders.TopKLayout) (js.Value, error) {
	sp, err := g.fusedSpec(l)
	if err != nil {
		return js.Value{}, err
	}
	return g.dev.pipeline(sp)
}

func (g *Index) mergePipe() (js.Value, error) {
	sp, err := g.mergeSpec()
	if err != nil {
		return js.Value{}, err
	}
	return g.dev.pipeline(sp)
}

// SetFault makes every step of the index that can fail ask f first (tests).
func (g *Index) SetFault(f func(step string) error) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	g.fault = f
}

func (g *Index) step(name string) error {
	return gpuplan.Step(g.fault, name, gpu.ErrFailed)
}

// Adapter describes the device's adapter.
func (g *Index) Adapter() core.AdapterInfo { return g.dev.info }

// Limits are the device's limits and the variant the index uses.
func (g *Index) Limits() gpu.Limits {
	l := g.dev.Limits()
	l.Team, l.StagedQueries = g.single.Team, g.batch.Slice > 0
	l.FusedK, l.FusedBatchK = gpuplan.MaxK(g.topkSingle), gpuplan.MaxK(g.topkBatch)
	return l
}

// ChunkRows is the most rows one device buffer holds.
func (g *Index) ChunkRows() int { return g.plan.RowsPerChunk }

func (g *Index) rowBytes() uint64   { return uint64(g.plan.Stride) * 4 }
func (g *Index) queryBytes() uint64 { return uint64(g.single.QueryVec4()) * 16 }

// Staged is an upload whose rows are on the device but not yet resident.
type Staged struct{ chunks []struct{ c, rows int } }

// Upload makes rows [from, s.Rows) resident.
func (g *Index) Upload(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) error {
	staged, err := g.Stage(ctx, s, from, st, progress)
	if err != nil {
		return err
	}
	g.Publish(staged)
	return nil
}

// Stage writes rows [from, s.Rows) to the device without making them
// resident; on error nothing past the resident rows counts as resident.
func (g *Index) Stage(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) (*Staged, error) {
	staged := &Staged{}
	if from >= s.Rows {
		return staged, nil
	}
	if uint64(s.Rows)*4 > g.bind || s.Rows >= math.MaxUint32 {
		return nil, fmt.Errorf("%w: %d rows need a %d-byte scores binding, the device allows %d",
			gpu.ErrTooLarge, s.Rows, uint64(s.Rows)*4, g.bind)
	}
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	var sent int64
	first, last := from/g.plan.RowsPerChunk, (s.Rows-1)/g.plan.RowsPerChunk
	err := g.dev.scoped("upload rows", func() error {
		for c := first; c <= last; c++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			start, n := g.plan.Span(c, s.Rows)
			if err := g.grow(c, n); err != nil {
				return err
			}
			lo := max(from, start)
			if err := g.step("write rows"); err != nil {
				return err
			}
			b := bytesOf(s.Data[lo*s.Stride : (start+n)*s.Stride])
			g.dev.write(g.chunks[c].data, uint64(lo-start)*g.rowBytes(), b)
			sent += int64(len(b))
			if progress != nil {
				progress(start+n-from, s.Rows-from)
			}
			staged.chunks = append(staged.chunks, struct{ c, rows int }{c, n})
		}
		if err := g.step("finish upload"); err != nil {
			return err
		}
		return g.dev.done()
	})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if st != nil {
		st.BytesUp += sent
	}
	return staged, nil
}

// grow gives chunk c room for need rows, copying its resident rows to the
// new buffer on the device. The caller holds d.mu inside a scope.
func (g *Index) grow(c, need int) error {
	for len(g.chunks) <= c {
		g.chunks = append(g.chunks, &chunk{})
	}
	ch := g.chunks[c]
	if need <= ch.capRows {
		return nil
	}
	if err := g.step("create rows buffer"); err != nil {
		return err
	}
	capRows := min(max(need, 2*ch.capRows, 256), g.plan.RowsPerChunk)
	data := g.dev.buffer(fmt.Sprintf("umbra rows %d", c), uint64(capRows)*g.rowBytes(), usageStorage|usageCopyDst|usageCopySrc)
	if ch.params.IsUndefined() {
		ch.params = g.dev.buffer(fmt.Sprintf("umbra params %d", c), shaders.ParamsBytes, usageUniform|usageCopyDst)
	}
	if ch.rows > 0 {
		enc := g.dev.device.Call("createCommandEncoder")
		enc.Call("copyBufferToBuffer", ch.data, 0, data, 0, float64(uint64(ch.rows)*g.rowBytes()))
		g.dev.queue.Call("submit", arr(enc.Call("finish")))
	}
	if !ch.data.IsUndefined() {
		ch.data.Call("destroy")
	}
	ch.data, ch.capRows = data, capRows
	return nil
}

// Publish makes a staged upload's rows resident.
func (g *Index) Publish(s *Staged) {
	if s == nil {
		return
	}
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	for _, d := range s.chunks {
		g.chunks[d.c].rows = d.rows
	}
}

// Truncate forgets every resident row from row rows on; with 0 the
// deletion marks go too.
func (g *Index) Truncate(rows int) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if rows == 0 {
		g.dead = nil
	}
	for c, ch := range g.chunks {
		ch.rows = min(ch.rows, max(rows-c*g.plan.RowsPerChunk, 0))
	}
}

// Rewrite writes the given resident rows again from s.
func (g *Index) Rewrite(ctx context.Context, s *packed.Slab, rows []int) error {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	return g.dev.scoped("rewrite rows", func() error {
		for _, r := range rows {
			c := r / g.plan.RowsPerChunk
			if c >= len(g.chunks) || r-c*g.plan.RowsPerChunk >= g.chunks[c].rows {
				return fmt.Errorf("%w: row %d is not resident", gpu.ErrFailed, r)
			}
			if err := g.step("write rows"); err != nil {
				return err
			}
			g.dev.write(g.chunks[c].data, uint64(r-c*g.plan.RowsPerChunk)*g.rowBytes(), bytesOf(s.PaddedRow(r)))
		}
		if err := g.step("finish upload"); err != nil {
			return err
		}
		return g.dev.done()
	})
}

// MarkDead marks resident rows deleted: no later search returns them.
func (g *Index) MarkDead(rows []int) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	for _, r := range rows {
		w := r >> 6
		if w >= len(g.dead) {
			g.dead = append(g.dead, make([]uint64, w+1-len(g.dead))...)
		}
		g.dead[w] |= 1 << (uint(r) & 63)
	}
}

// liveMask is the allow bitmap of the first rows rows not marked deleted,
// or nil when none is. The caller holds d.mu.
func (g *Index) liveMask(rows int) []uint64 {
	any := false
	for i, w := range g.dead {
		if i*64 < rows && w != 0 {
			any = true
		}
	}
	if !any {
		return nil
	}
	return gpuplan.LiveMask(rows, g.dead)
}

// Sibling returns a new, empty index like g on the same device.
func (g *Index) Sibling() (*Index, error) {
	return g.dev.newIndex(g.plan.Stride, g.metric, g.prec, g.maxChunkRows)
}

// Renew returns a new, empty index like g once the device passes its
// self-test again; a lost device cannot come back in this page (its
// adapter is spent), so that is an error and the engine stays on the CPU.
func (g *Index) Renew(ctx context.Context, timeout time.Duration) (*Index, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := g.dev.lostErr(); err != nil {
		return nil, err
	}
	if err := g.dev.SelfTest(); err != nil {
		return nil, err
	}
	return g.Sibling()
}

// Release frees the index's buffers; the device stays.
func (g *Index) Release() {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	_ = try("release", func() error {
		for _, ch := range g.chunks {
			if !ch.data.IsUndefined() {
				ch.data.Call("destroy")
				ch.params.Call("destroy")
			}
		}
		g.chunks = nil
		return nil
	})
}

// Floor is not measured in the browser.
func (g *Index) Floor(ctx context.Context) (time.Duration, int64, string, error) {
	return 0, 0, "", fmt.Errorf("%w: the read floor is not measured on WebGPU", gpu.ErrFailed)
}

// Calibrate measures, once per device, Auto's routing inputs: a search's
// latency on a one-row index and the scan rate on gpu.CalibrationSlab.
func (g *Index) Calibrate() (time.Duration, float64, error) {
	d := g.dev
	d.routeOnce.Do(func() {
		d.routeErr = func() error {
			ctx := context.Background()
			s := gpu.CalibrationSlab()
			tiny := packed.NewSlab(gpu.CalibrationDim)
			tiny.Append([][]float32{s.Row(0)}, false)
			for _, c := range []struct {
				slab *packed.Slab
				out  *time.Duration
			}{{tiny, &d.latency}, {s, new(time.Duration)}} {
				ix, err := d.NewIndex(c.slab.Stride, core.Dot, 0)
				if err != nil {
					return err
				}
				defer ix.Release()
				if err := ix.Upload(ctx, c.slab, 0, nil, nil); err != nil {
					return err
				}
				q := [][]float32{c.slab.PaddedRow(0)}
				if *c.out, err = gpu.MedianOf(3, func() error {
					_, err := ix.Search(ctx, q, 10, c.slab.Rows, nil, nil)
					return err
				}); err != nil {
					return err
				}
				if c.slab == s {
					d.bytesPerSec = float64(s.Bytes()) / max(*c.out-d.latency, time.Microsecond).Seconds()
				}
			}
			return nil
		}()
	})
	return d.latency, d.bytesPerSec, d.routeErr
}

// submission is one pass of a search, as internal/gpu's.
type submission = gpuplan.Submission

// resident lists the chunks that hold rows, in order.
func (g *Index) resident() []*chunk {
	var out []*chunk
	for _, ch := range g.chunks {
		if ch.rows > 0 {
			out = append(out, ch)
		}
	}
	return out
}

func (g *Index) maxGroups() uint64 { return gpuplan.MaxGroups(g.dev.lim.MaxWorkgroupsPerDim) }

// grid returns the 2-D dispatch for a chunk of rows rows.
func (g *Index) grid(rows int, l shaders.ScoresLayout) (uint32, uint32) {
	return gpuplan.Grid(rows, l, g.maxGroups())
}

// planSelect decides whether a device selection takes the fused path, and
// with how many workgroups per chunk (internal/gpu's rule).
func (g *Index) planSelect(sub *submission) {
	if !sub.DeviceSelect || !g.dev.fused {
		return
	}
	p, ok := gpuplan.FusedPlan(g.topkSingle, g.topkBatch, sub.K, sub.NQ)
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

// batchLimit is how many queries one submission may hold: every scratch
// buffer within one binding, the query index within a grid dimension.
func (g *Index) batchLimit(sub submission) int {
	perQuery := max(uint64(sub.Rows)*4, g.queryBytes(), shaders.StateBytes, uint64(sub.K)*shaders.HitBytes)
	if g.dev.fused && sub.DeviceSelect {
		perQuery = max(perQuery, 512*uint64(max(sub.K, 1))*shaders.HitBytes)
	}
	return int(max(min(g.bind/perQuery, g.maxGroups(), 1024), 1))
}

// Search returns each query's top k (k at most rows), best first, ties by
// lower row; mask (bit r of word r/64) restricts the rows, else the rows
// MarkDead marked are left out.
func (g *Index) Search(ctx context.Context, qs [][]float32, k, rows int, mask []uint64, st *core.Stages) ([][]core.Hit, error) {
	if g.prec != core.F32 {
		return nil, fmt.Errorf("%w: an index of compressed rows is searched through Sums", gpu.ErrFailed)
	}
	if mask == nil {
		g.dev.mu.Lock()
		mask = g.liveMask(rows)
		g.dev.mu.Unlock()
	}
	allowed := rows
	if mask != nil {
		if len(mask)*64 < rows {
			return nil, fmt.Errorf("%w: an allow bitmap of %d words for %d rows", gpu.ErrFailed, len(mask), rows)
		}
		allowed = 0
		for _, w := range mask[:(rows+63)/64] {
			allowed += bits.OnesCount64(w)
		}
	}
	if rows == 0 || allowed == 0 {
		return gpuplan.EmptyLists(len(qs)), nil
	}
	k = min(k, allowed)
	sub := submission{K: k, Rows: rows, DeviceSelect: 2*k < rows, Mask: mask}
	return gpuplan.SearchBatches(qs, g.batchLimit(sub), func(part [][]float32) ([][]core.Hit, error) {
		hits, _, err := g.run(ctx, part, sub, st)
		return hits, err
	})
}

// Scores returns every resident row's score for one padded query.
func (g *Index) Scores(ctx context.Context, q []float32, rows int) ([]float32, error) {
	if g.prec != core.F32 {
		return nil, fmt.Errorf("%w: an index of compressed rows is searched through Sums", gpu.ErrFailed)
	}
	if rows == 0 {
		return []float32{}, nil
	}
	_, all, err := g.run(ctx, [][]float32{q}, submission{Rows: rows}, nil)
	return all, err
}

// Sums returns, for an index of compressed rows, every one of the first
// rows rows' raw sum against each query (exact.DeviceQuery's words),
// query j's at j*rows, and how many passes over the codes it took.
func (g *Index) Sums(ctx context.Context, qs [][]float32, rows int, st *core.Stages) ([]float32, int, error) {
	if g.prec == core.F32 {
		return nil, 0, fmt.Errorf("%w: Sums needs an index of compressed rows", gpu.ErrFailed)
	}
	if err := gpuplan.QueryWords(qs, int(g.queryBytes()/4), gpu.ErrFailed); err != nil {
		return nil, 0, err
	}
	sub := submission{Rows: rows}
	return gpuplan.SumBatches(qs, rows, func() int { return g.batchLimit(sub) }, g.single.QT, g.batch.QT,
		func(part [][]float32) ([]float32, error) {
			_, all, err := g.run(ctx, part, sub, st)
			return all, err
		})
}

// run scores qs against the first sub.Rows rows in one submission and
// reads back each query's k best (selected on the device) or every score
// (selected on the host for k > 0, returned as they are for k = 0).
func (g *Index) run(ctx context.Context, qs [][]float32, sub submission, t *core.Stages) (hits [][]core.Hit, all []float32, err error) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	sub.NQ = len(qs)
	layout := g.single
	if sub.NQ > 1 {
		layout = g.batch
	}
	g.planSelect(&sub)
	c := core.Stages{Path: sub.Path()}
	start := time.Now()
	var raw []byte
	var size uint64
	err = g.dev.scoped("search", func() error {
		var scratch []js.Value
		defer func() {
			for _, b := range scratch {
				b.Call("destroy")
			}
		}()
		newBuf := func(label string, n uint64, usage int) (js.Value, error) {
			if n > g.bind {
				return js.Value{}, fmt.Errorf("%w: %s needs %d bytes, the device allows %d in one binding", gpu.ErrTooLarge, label, n, g.bind)
			}
			if err := g.step("create " + label); err != nil {
				return js.Value{}, err
			}
			b := g.dev.buffer(label, n, usage)
			scratch = append(scratch, b)
			return b, nil
		}
		write := func(step string, buf js.Value, b []byte) error {
			if err := g.step(step); err != nil {
				return err
			}
			g.dev.write(buf, 0, b)
			c.BytesUp += int64(len(b))
			return nil
		}
		nq := uint64(sub.NQ)
		query, err := newBuf("umbra queries", nq*g.queryBytes(), usageStorage|usageCopyDst)
		if err != nil {
			return err
		}
		flat := make([]float32, 0, sub.NQ*len(qs[0]))
		for _, q := range qs {
			flat = append(flat, q...)
		}
		if err := write("write queries", query, bytesOf(flat)); err != nil {
			return err
		}
		allow, err := newBuf("umbra allow", uint64(len(sub.Mask))*8, usageStorage|usageCopyDst)
		if err != nil {
			return err
		}
		if sub.Mask != nil && sub.DeviceSelect {
			if err := write("write allow", allow, bytesOf(sub.Mask)); err != nil {
				return err
			}
		}
		masked := shaders.MaskedWith(sub.Mask != nil, 0)
		var hitsBuf, scoresBuf, cands, mparams, state js.Value
		if sub.Fused {
			if cands, err = newBuf("umbra candidates", nq*uint64(sub.Lists)*uint64(sub.K)*shaders.HitBytes, usageStorage); err != nil {
				return err
			}
			if mparams, err = newBuf("umbra merge params", shaders.MergeParamsBytes, usageUniform|usageCopyDst); err != nil {
				return err
			}
			if err := write("write merge params", mparams, shaders.MergeParams(sub.K, sub.Lists)); err != nil {
				return err
			}
		} else {
			if scoresBuf, err = newBuf("umbra scores", nq*uint64(sub.Rows)*4, usageStorage|usageCopySrc); err != nil {
				return err
			}
			if state, err = newBuf("umbra select state", nq*shaders.StateBytes, usageStorage|usageCopyDst); err != nil {
				return err
			}
			if sub.DeviceSelect {
				if err := write("write select state", state, shaders.SelectState(sub.NQ, sub.Rows, sub.K, masked)); err != nil {
					return err
				}
			}
		}
		if hitsBuf, err = newBuf("umbra hits", nq*uint64(sub.HitsPerQuery())*shaders.HitBytes, usageStorage|usageCopySrc); err != nil {
			return err
		}
		list := 0
		for i, ch := range g.chunks {
			if ch.rows == 0 {
				continue
			}
			x, _ := g.grid(ch.rows, layout)
			p := shaders.Params{Rows: uint32(ch.rows), GroupsX: x, Base: uint32(i * g.plan.RowsPerChunk),
				Total: uint32(sub.Rows), Queries: uint32(sub.NQ)}
			if sub.Fused {
				p.K, p.Masked, p.ListBase, p.Lists = uint32(sub.K), masked, uint32(list), uint32(sub.Lists)
				list += sub.Groups
			}
			if err := write("write params", ch.params, p.Encode()); err != nil {
				return err
			}
		}
		if t != nil {
			start = lap(&c.Upload, start)
		}
		if err := g.step("encode"); err != nil {
			return err
		}
		bind := func(name string, bs []shaders.Binding, bufs ...js.Value) js.Value {
			entries := arr()
			for i, b := range bufs {
				entries.Call("push", obj("binding", bs[i].Binding, "resource", obj("buffer", b)))
			}
			return g.dev.device.Call("createBindGroup", obj("layout", g.dev.layout(name, bs), "entries", entries))
		}
		dispatch := func(pass js.Value, x, y, z uint32) {
			pass.Call("dispatchWorkgroups", x, y, z)
			c.Dispatches++
		}
		enc := g.dev.device.Call("createCommandEncoder")
		pass := enc.Call("beginComputePass")
		src := hitsBuf
		if sub.Fused {
			scan, err := g.fusedPipe(sub.Plan)
			if err != nil {
				return err
			}
			merge, err := g.mergePipe()
			if err != nil {
				return err
			}
			pass.Call("setPipeline", scan)
			tiles := uint32((sub.NQ + int(sub.Plan.Scores.QT) - 1) / int(sub.Plan.Scores.QT))
			for _, ch := range g.resident() {
				pass.Call("setBindGroup", 0, bind("fused", shaders.FusedBindings, ch.data, query, cands, ch.params, allow))
				dispatch(pass, uint32(sub.Groups), 1, tiles)
			}
			pass.Call("setPipeline", merge)
			pass.Call("setBindGroup", 0, bind("merge", shaders.MergeBindings, cands, hitsBuf, mparams))
			dispatch(pass, uint32(sub.NQ), 1, 1)
		} else {
			scores, err := g.scoresPipe(layout)
			if err != nil {
				return err
			}
			pass.Call("setPipeline", scores)
			tiles := uint32((sub.NQ + int(layout.QT) - 1) / int(layout.QT))
			for _, ch := range g.resident() {
				x, y := g.grid(ch.rows, layout)
				pass.Call("setBindGroup", 0, bind("scores", shaders.ScoresBindings, ch.data, query, scoresBuf, ch.params))
				dispatch(pass, x, y, tiles)
			}
			if sub.DeviceSelect {
				var pipes [4]js.Value
				for i, e := range shaders.SelectEntries {
					if pipes[i], err = g.selectPipe(e); err != nil {
						return err
					}
				}
				gx := gpuplan.SelectGroups(sub.Rows)
				pass.Call("setBindGroup", 0, bind("select", shaders.SelectBindings, scoresBuf, state, hitsBuf, allow))
				for round := 0; round < 8; round++ {
					pass.Call("setPipeline", pipes[0])
					dispatch(pass, gx, uint32(sub.NQ), 1)
					pass.Call("setPipeline", pipes[1])
					dispatch(pass, uint32(sub.NQ), 1, 1)
				}
				pass.Call("setPipeline", pipes[2])
				dispatch(pass, gx, uint32(sub.NQ), 1)
				if sub.DeviceSorted() {
					pass.Call("setPipeline", pipes[3])
					dispatch(pass, uint32(sub.NQ), 1, 1)
				}
			} else {
				src = scoresBuf
			}
		}
		pass.Call("end")
		size = uint64(sub.NQ) * uint64(sub.Rows) * 4
		if sub.DeviceSelect {
			size = uint64(sub.NQ) * uint64(sub.K) * shaders.HitBytes
		}
		if err := g.step("map readback"); err != nil {
			return err
		}
		c.Submissions++
		raw, err = g.dev.read(enc, src, size)
		if err != nil {
			return err
		}
		c.Maps++
		c.BytesDown += int64(size)
		if t != nil {
			start = lap(&c.Kernel, start)
			c.KernelClock = "wall"
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	raw = raw[:size]
	switch {
	case sub.DeviceSelect:
		hits = gpuplan.Decode(raw, sub.NQ, sub.K, !sub.DeviceSorted(), g.metric)
	case sub.K == 0:
		t.Add(&c)
		return nil, floatsOf(raw), nil
	default:
		scores := floatsOf(raw)
		hits = gpuplan.HostSelect(scores, sub, g.metric)
	}
	if t != nil {
		lap(&c.Select, start)
	}
	t.Add(&c)
	return hits, nil, nil
}

func lap(d *time.Duration, start time.Time) time.Time {
	now := time.Now()
	*d += now.Sub(start)
	return now
}
