//go:build cgo && !nogpu

package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra/fallback"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/shaders"
)

const (
	// writePiece bounds one queue write so the driver's staging copy of a
	// large upload stays small.
	writePiece = 16 << 20
	// batchQT is how many queries a batch scores per pass over the slab.
	batchQT = batchQueriesPerPass
	// paramsBytes is the size of scores.wgsl's Params uniform.
	paramsBytes = 32
)

// gpuChunk is one resident run of rows: a storage buffer of at most
// plan.RowsPerChunk rows, its dispatch parameters and its bind group.
type gpuChunk struct {
	capRows int
	rows    int // rows resident and valid
	data    *wgpu.Buffer
	params  *wgpu.Buffer
	bind    *wgpu.BindGroup // nil when a buffer it names was replaced
}

// growBuffer is a device buffer that is replaced by a larger one when a
// request outgrows it; its contents are scratch, never carried over.
type growBuffer struct {
	buf   *wgpu.Buffer
	size  uint64
	label string
	usage wgpu.BufferUsage
	// limit caps growth: a buffer bound whole must stay within the
	// device's storage binding size, a staging buffer within its buffer
	// size. A request above it is the caller's to avoid.
	limit uint64
}

// ensure makes the buffer at least size bytes and reports whether it was
// replaced (so bind groups naming it must be rebuilt). Growth doubles, so a
// run of growing requests costs amortised O(1) reallocations, but never
// past the limit.
func (b *growBuffer) ensure(dev *wgpu.Device, size uint64) (bool, error) {
	if size <= b.size && b.buf != nil {
		return false, nil
	}
	size = max(size, min(max(2*b.size, 256), b.limit))
	nb, err := dev.TryCreateBuffer(&wgpu.BufferDescriptor{Label: b.label, Size: size, Usage: b.usage})
	if err != nil {
		return false, err
	}
	b.buf.Release()
	b.buf, b.size = nb, size
	return true, nil
}

// wgpuIndex is the device side of one Index: the resident chunks, and the
// scratch buffers a search writes (queries, scores, select state, hits) and
// reads back.
type wgpuIndex struct {
	dev     *gpuDevice
	metric  uint32
	single  shaders.ScoresLayout // one query per pass
	batch   shaders.ScoresLayout // batchQT queries per pass
	plan    host.ChunkPlan
	chunks  []*gpuChunk
	query   growBuffer
	scoresB growBuffer
	state   growBuffer
	hits    growBuffer
	staging growBuffer
	selBind *wgpu.BindGroup
	// stamps and resolved time a traced search's kernels on the GPU clock
	// where the device allows timestamps inside passes.
	stamps   *wgpu.QuerySet
	resolved *wgpu.Buffer
}

func newGPUIndex(dev *gpuDevice, stride int, metric uint32, maxChunkRows int) (*wgpuIndex, error) {
	plan, err := host.PlanChunks(stride, host.Limits{
		MaxStorageBindingBytes: dev.lim.MaxStorageBindingBytes,
		MaxBufferBytes:         dev.lim.MaxBufferBytes,
		MaxWorkgroupsPerDim:    dev.lim.MaxWorkgroupsPerDim,
		MaxChunkRows:           maxChunkRows,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	target := shaders.Target{MaxInvocations: dev.lim.MaxInvocations, MaxWorkgroupBytes: dev.lim.MaxWorkgroupBytes,
		MaxTeam: dev.team, StageQueries: dev.staged}
	single, err := shaders.PlanScores(stride, metric, 1, target)
	if err != nil {
		return nil, err
	}
	batch, err := shaders.PlanScores(stride, metric, batchQT, target)
	if err != nil {
		return nil, err
	}
	single.Subgroups, batch.Subgroups = dev.subgroups, dev.subgroups
	bind := min(dev.lim.MaxStorageBindingBytes, dev.lim.MaxBufferBytes)
	g := &wgpuIndex{
		dev: dev, metric: metric, single: single, batch: batch, plan: plan,
		query:   growBuffer{label: "umbra queries", usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopyDst, limit: bind},
		scoresB: growBuffer{label: "umbra scores", usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopySrc, limit: bind},
		state:   growBuffer{label: "umbra select state", usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopyDst | wgpu.BufferUsageCopySrc, limit: bind},
		hits:    growBuffer{label: "umbra hits", usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopySrc, limit: bind},
		staging: growBuffer{label: "umbra readback", usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst, limit: dev.lim.MaxBufferBytes},
	}
	dev.mu.Lock()
	defer dev.mu.Unlock()
	// Compile everything now so a broken shader fails New, not a search.
	for _, l := range []shaders.ScoresLayout{single, batch} {
		if _, err := dev.scoresPipeline(l); err != nil {
			return nil, err
		}
	}
	if _, err := dev.selectPipeline(metric); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *wgpuIndex) adapter() AdapterInfo { return g.dev.info }
func (g *wgpuIndex) limits() DeviceLimits {
	l := g.dev.lim
	l.Subgroups = g.dev.subgroups
	l.Timestamps = g.dev.timestamps
	l.Team = g.single.Team
	l.StagedQueries = g.batch.Slice > 0
	return l
}
func (g *wgpuIndex) chunkRows() int       { return g.plan.RowsPerChunk }
func (g *wgpuIndex) rowBytes() uint64     { return uint64(g.plan.Stride) * 4 }
func (g *wgpuIndex) device() *wgpu.Device { return g.dev.device }
func (g *wgpuIndex) queue() *wgpu.Queue   { return g.dev.queue }

// grow gives chunk c room for need rows. A grown chunk gets a new buffer;
// the rows already resident are copied device to device, never re-sent from
// the host. Capacity doubles so a run of small Adds costs amortised O(1)
// copies.
func (g *wgpuIndex) grow(c, need int) error {
	for len(g.chunks) <= c {
		g.chunks = append(g.chunks, &gpuChunk{})
	}
	ch := g.chunks[c]
	if need <= ch.capRows {
		return nil
	}
	capRows := min(max(need, 2*ch.capRows, 256), g.plan.RowsPerChunk)
	dev := g.device()
	return scoped(dev, "grow device buffers", func() error {
		data, err := dev.TryCreateBuffer(&wgpu.BufferDescriptor{
			Label: fmt.Sprintf("umbra rows %d", c),
			Size:  uint64(capRows) * g.rowBytes(),
			Usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopyDst | wgpu.BufferUsageCopySrc,
		})
		if err != nil {
			return err
		}
		if ch.params == nil {
			if ch.params, err = dev.TryCreateBuffer(&wgpu.BufferDescriptor{
				Label: fmt.Sprintf("umbra params %d", c),
				Size:  paramsBytes,
				Usage: wgpu.BufferUsageUniform | wgpu.BufferUsageCopyDst,
			}); err != nil {
				data.Release()
				return err
			}
		}
		if ch.rows > 0 {
			enc, err := dev.TryCreateCommandEncoder(nil)
			if err != nil {
				data.Release()
				return err
			}
			defer enc.Release()
			if err := enc.TryCopyBufferToBuffer(ch.data, 0, data, 0, uint64(ch.rows)*g.rowBytes()); err != nil {
				data.Release()
				return err
			}
			if err := g.dev.submit(enc, false); err != nil {
				data.Release()
				return err
			}
		}
		ch.data.Release()
		ch.bind.Release()
		ch.data, ch.bind, ch.capRows = data, nil, capRows
		return nil
	})
}

// upload makes rows [from, s.Rows) resident, sending only those rows.
func (g *wgpuIndex) upload(ctx context.Context, s *host.Slab, from int) error {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if from >= s.Rows {
		return nil
	}
	// The select shader sees every query's scores in one binding.
	if uint64(s.Rows)*4 > g.dev.lim.MaxStorageBindingBytes || s.Rows >= math.MaxUint32 {
		return fmt.Errorf("%w: %d rows need a %d-byte scores binding, the device allows %d",
			ErrTooLarge, s.Rows, uint64(s.Rows)*4, g.dev.lim.MaxStorageBindingBytes)
	}
	first, last := from/g.plan.RowsPerChunk, (s.Rows-1)/g.plan.RowsPerChunk
	report, total := progressFrom(ctx), s.Rows-from
	type done struct{ c, rows int }
	var commit []done
	for c := first; c <= last; c++ {
		start, n := g.plan.Span(c, s.Rows)
		if err := g.grow(c, n); err != nil {
			return err
		}
		lo := max(from, start)
		rest := s.Data[lo*s.Stride : (start+n)*s.Stride]
		off := uint64(lo-start) * g.rowBytes()
		err := scoped(g.device(), "upload rows", func() error {
			for len(rest) > 0 {
				piece := rest[:min(len(rest), writePiece/4)]
				if err := g.queue().TryWriteBuffer(g.chunks[c].data, off, wgpu.ToBytes(piece)); err != nil {
					return err
				}
				off += uint64(len(piece)) * 4
				rest = rest[len(piece):]
				report("upload", start+int(off/g.rowBytes())-from, total)
			}
			return nil
		})
		if err != nil {
			return err
		}
		commit = append(commit, done{c, n})
	}
	// Wait for the writes so a failure surfaces here, not in a search.
	if err := scoped(g.device(), "finish upload", func() error { g.queue().Submit(); g.device().Poll(true, nil); return nil }); err != nil {
		return err
	}
	for _, d := range commit {
		g.chunks[d.c].rows = d.rows
	}
	if t := traceFrom(ctx); t != nil {
		t.UploadBytes += int64(s.Rows-from) * int64(g.rowBytes())
	}
	return nil
}

// grid returns the 2-D dispatch for a chunk of rows rows.
func (g *wgpuIndex) grid(rows int, l shaders.ScoresLayout) (x, y uint32) {
	groups := (uint64(rows) + uint64(l.Rows) - 1) / uint64(l.Rows)
	gx := min(max(groups, 1), g.maxGroups())
	gy := (groups + gx - 1) / gx
	return uint32(gx), uint32(gy)
}

// selectGroups is the x extent of the select shader's hist and compact
// dispatches: enough workgroups to keep a GPU busy, each striding over
// several rows.
func selectGroups(rows int) uint32 {
	return uint32(min(max((rows+1023)/1024, 1), 1024))
}

// prepare sizes the scratch buffers for nq queries over rows rows with k
// hits each, rebuilding the bind groups that named a replaced buffer.
func (g *wgpuIndex) prepare(nq, rows, k int) error {
	dev := g.device()
	rebind := false
	for _, r := range []struct {
		b    *growBuffer
		size uint64
	}{
		{&g.query, uint64(nq) * g.rowBytes()},
		{&g.scoresB, uint64(nq) * uint64(rows) * 4},
	} {
		replaced, err := r.b.ensure(dev, r.size)
		if err != nil {
			return err
		}
		rebind = rebind || replaced
	}
	selRebind := rebind
	for _, r := range []struct {
		b    *growBuffer
		size uint64
	}{
		{&g.state, uint64(nq) * shaders.StateBytes},
		{&g.hits, uint64(nq) * uint64(k) * 8},
	} {
		replaced, err := r.b.ensure(dev, r.size)
		if err != nil {
			return err
		}
		selRebind = selRebind || replaced
	}
	if g.selBind == nil || selRebind {
		bg, err := dev.TryCreateBindGroup(&wgpu.BindGroupDescriptor{
			Label:  "umbra select",
			Layout: g.dev.pipelines.selectBGL,
			Entries: []wgpu.BindGroupEntry{
				{Binding: 0, Buffer: g.scoresB.buf, Size: wgpu.WholeSize},
				{Binding: 1, Buffer: g.state.buf, Size: wgpu.WholeSize},
				{Binding: 2, Buffer: g.hits.buf, Size: wgpu.WholeSize},
			},
		})
		if err != nil {
			return err
		}
		g.selBind.Release()
		g.selBind = bg
	}
	for c, ch := range g.chunks {
		if ch.bind != nil && !rebind {
			continue
		}
		bg, err := dev.TryCreateBindGroup(&wgpu.BindGroupDescriptor{
			Label:  fmt.Sprintf("umbra scores %d", c),
			Layout: g.dev.pipelines.scoresBGL,
			Entries: []wgpu.BindGroupEntry{
				{Binding: 0, Buffer: ch.data, Size: wgpu.WholeSize},
				{Binding: 1, Buffer: g.query.buf, Size: wgpu.WholeSize},
				{Binding: 2, Buffer: g.scoresB.buf, Size: wgpu.WholeSize},
				{Binding: 3, Buffer: ch.params, Size: wgpu.WholeSize},
			},
		})
		if err != nil {
			return err
		}
		ch.bind.Release()
		ch.bind = bg
	}
	return nil
}

// batchLimit is how many queries one submission may hold for rows rows:
// all their scores must fit one storage binding, and the query index is a
// grid dimension.
func (g *wgpuIndex) batchLimit(rows int) int {
	perQuery := uint64(max(rows, 1)) * 4
	n := g.dev.lim.MaxStorageBindingBytes / perQuery
	return int(max(min(n, g.maxGroups(), 1024), 1))
}

// maxGroups is the device's workgroups per grid dimension, WebGPU's
// guaranteed 65,535 where a limit was not reported.
func (g *wgpuIndex) maxGroups() uint64 {
	if n := g.dev.lim.MaxWorkgroupsPerDim; n != 0 {
		return uint64(n)
	}
	return 65535
}

// writeInputs queues the writes a search needs before its dispatches: the
// queries, each chunk's parameters and, when selecting on the device, every
// query's select state reset to k. It returns the bytes of queries written.
func (g *wgpuIndex) writeInputs(qs [][]float32, k, rows int, layout shaders.ScoresLayout) (int64, error) {
	queue, nq := g.queue(), len(qs)
	flat := qs[0] // a single query is written as it is, without a copy
	if nq > 1 {
		flat = make([]float32, 0, nq*g.plan.Stride)
		for _, q := range qs {
			flat = append(flat, q...)
		}
	}
	if err := queue.TryWriteBuffer(g.query.buf, 0, wgpu.ToBytes(flat)); err != nil {
		return 0, err
	}
	var params [paramsBytes]byte
	for c, ch := range g.chunks {
		x, _ := g.grid(ch.rows, layout)
		for i, v := range []uint32{uint32(ch.rows), x, uint32(c * g.plan.RowsPerChunk), uint32(rows), uint32(nq)} {
			binary.LittleEndian.PutUint32(params[4*i:], v)
		}
		if err := queue.TryWriteBuffer(ch.params, 0, params[:]); err != nil {
			return 0, err
		}
	}
	if k > 0 {
		state := make([]byte, nq*shaders.StateBytes)
		for i := 0; i < nq; i++ {
			s := state[i*shaders.StateBytes:]
			binary.LittleEndian.PutUint32(s[8:], uint32(k))     // remaining
			binary.LittleEndian.PutUint32(s[20:], uint32(rows)) // n
			binary.LittleEndian.PutUint32(s[24:], uint32(k))    // k
		}
		if err := queue.TryWriteBuffer(g.state.buf, 0, state); err != nil {
			return 0, err
		}
	}
	return int64(len(flat)) * 4, nil
}

// encodeSearch records a search's dispatches into pass: the scores of every
// chunk for every tile of queries, then, with k > 0, the eight radix-select
// rounds (hist, scan) and the compaction of the k hits.
func (g *wgpuIndex) encodeSearch(pass *wgpu.ComputePassEncoder, layout shaders.ScoresLayout, nq, k, rows int) {
	pass.SetPipeline(g.dev.pipelines.scores[layout])
	tiles := uint32((nq + int(layout.QT) - 1) / int(layout.QT))
	for _, ch := range g.chunks {
		if ch.rows == 0 {
			continue
		}
		x, y := g.grid(ch.rows, layout)
		pass.SetBindGroup(0, ch.bind, nil)
		pass.DispatchWorkgroups(x, y, tiles)
	}
	if k == 0 {
		return
	}
	sp := g.dev.pipelines.selects[g.metric]
	gx := selectGroups(rows)
	pass.SetBindGroup(0, g.selBind, nil)
	for round := 0; round < 8; round++ {
		pass.SetPipeline(sp.hist)
		pass.DispatchWorkgroups(gx, uint32(nq), 1)
		pass.SetPipeline(sp.scan)
		pass.DispatchWorkgroups(uint32(nq), 1, 1)
	}
	pass.SetPipeline(sp.compact)
	pass.DispatchWorkgroups(gx, uint32(nq), 1)
}

// run scores qs against the first rows rows in one submission. With k > 0 it
// then selects each query's top k on the device and reads back only those;
// with k == 0 it reads back every score of the single query instead.
func (g *wgpuIndex) run(ctx context.Context, qs [][]float32, k, rows int) (hits [][]fallback.Hit, all []float32, err error) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	nq := len(qs)
	layout := g.single
	if nq > 1 {
		layout = g.batch
	}
	dev := g.device()
	t := traceFrom(ctx)
	start := time.Now()
	// flush submits what is queued and blocks until the device is idle; a
	// traced search calls it between stages so each stage is timed alone.
	flush := func(enc *wgpu.CommandEncoder) error { return g.dev.submit(enc, true) }
	err = scoped(dev, "search", func() error {
		if err := g.prepare(nq, rows, max(k, 1)); err != nil {
			return err
		}
		upBytes, err := g.writeInputs(qs, k, rows, layout)
		if err != nil {
			return err
		}
		timed := false
		if t != nil {
			if err := flush(nil); err != nil {
				return err
			}
			start = lap(&t.Upload, start)
			t.UploadBytes += upBytes
			timed = g.dev.timestamps && g.ensureStamps() == nil
		}

		enc, err := dev.TryCreateCommandEncoder(nil)
		if err != nil {
			return err
		}
		defer func() { enc.Release() }()
		pass := enc.BeginComputePass(nil)
		if timed {
			writeTimestamp(pass, g.stamps, 0)
		}
		g.encodeSearch(pass, layout, nq, k, rows)
		if timed {
			writeTimestamp(pass, g.stamps, 1)
		}
		err = pass.TryEnd()
		pass.Release()
		if err != nil {
			return err
		}
		if timed {
			if err := enc.TryResolveQuerySet(g.stamps, 0, 2, g.resolved, 0); err != nil {
				return err
			}
		}
		if t != nil {
			if err := flush(enc); err != nil {
				return err
			}
			enc.Release()
			wall := time.Since(start)
			start = lap(&t.Kernel, start)
			t.KernelClock = "wall"
			if timed {
				if d, err := g.readStamps(); err == nil && d > 0 && d <= wall {
					t.Kernel += d - wall
					t.KernelClock = "gpu"
				}
			}
			if enc, err = dev.TryCreateCommandEncoder(nil); err != nil {
				return err
			}
		}

		src, size := g.hits.buf, uint64(nq)*uint64(k)*8
		if k == 0 {
			src, size = g.scoresB.buf, uint64(rows)*4
		}
		if _, err := g.staging.ensure(dev, size); err != nil {
			return err
		}
		if err := enc.TryCopyBufferToBuffer(src, 0, g.staging.buf, 0, size); err != nil {
			return err
		}
		if err := flush(enc); err != nil {
			return err
		}
		raw, err := g.readback(size)
		if err != nil {
			return err
		}
		if t != nil {
			start = lap(&t.Readback, start)
			t.ReadbackBytes += int64(size)
		}
		if k == 0 {
			all = wgpu.FromBytes[float32](raw)
			return nil
		}
		hits = g.decode(raw, nq, k)
		if t != nil {
			lap(&t.Select, start)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return hits, all, nil
}

// decode turns the read-back (score bits, row) pairs into best-first lists.
// The device returns each query's k hits unordered; sorting k of them is the
// host's only selection work.
func (g *wgpuIndex) decode(raw []byte, nq, k int) [][]fallback.Hit {
	higher := g.metric == shaders.MetricDot
	out := make([][]fallback.Hit, nq)
	for q := range out {
		hs := make([]fallback.Hit, k)
		for i := range hs {
			off := (q*k + i) * 8
			hs[i] = fallback.Hit{
				Score: math.Float32frombits(binary.LittleEndian.Uint32(raw[off:])),
				Row:   int(binary.LittleEndian.Uint32(raw[off+4:])),
			}
		}
		sort.Slice(hs, func(a, b int) bool {
			if hs[a].Score != hs[b].Score {
				return (hs[a].Score > hs[b].Score) == higher
			}
			return hs[a].Row < hs[b].Row
		})
		out[q] = hs
	}
	return out
}

// ensureStamps creates the two-entry timestamp query set and the buffer it
// resolves into. The caller holds the device mutex.
func (g *wgpuIndex) ensureStamps() error {
	if g.stamps != nil {
		return nil
	}
	dev := g.device()
	qs, err := dev.TryCreateQuerySet(&wgpu.QuerySetDescriptor{Label: "umbra kernel time", Type: wgpu.QueryTypeTimestamp, Count: 2})
	if err != nil {
		return err
	}
	buf, err := dev.TryCreateBuffer(&wgpu.BufferDescriptor{
		Label: "umbra kernel time",
		Size:  16,
		Usage: wgpu.BufferUsageQueryResolve | wgpu.BufferUsageCopySrc,
	})
	if err != nil {
		qs.Release()
		return err
	}
	g.stamps, g.resolved = qs, buf
	return nil
}

// readStamps reads the two resolved timestamps back through the staging
// buffer and returns the time between them on the GPU's clock.
func (g *wgpuIndex) readStamps() (time.Duration, error) {
	if _, err := g.staging.ensure(g.device(), 16); err != nil {
		return 0, err
	}
	enc, err := g.device().TryCreateCommandEncoder(nil)
	if err != nil {
		return 0, err
	}
	defer enc.Release()
	if err := enc.TryCopyBufferToBuffer(g.resolved, 0, g.staging.buf, 0, 16); err != nil {
		return 0, err
	}
	if err := g.dev.submit(enc, false); err != nil {
		return 0, err
	}
	raw, err := g.readback(16)
	if err != nil {
		return 0, err
	}
	t0, t1 := binary.LittleEndian.Uint64(raw), binary.LittleEndian.Uint64(raw[8:])
	if t1 < t0 {
		return 0, fmt.Errorf("%w: timestamps went backwards", ErrGPU)
	}
	return time.Duration(float64(t1-t0) * timestampPeriod(g.queue())), nil
}

// readback maps the first size bytes of the staging buffer and returns a
// copy of them.
func (g *wgpuIndex) readback(size uint64) ([]byte, error) {
	status := wgpu.MapAsyncStatus(0)
	if err := g.staging.buf.TryMapAsync(wgpu.MapModeRead, 0, size, func(s wgpu.MapAsyncStatus) { status = s }); err != nil {
		return nil, err
	}
	g.device().Poll(true, nil)
	if status != wgpu.MapAsyncStatusSuccess {
		return nil, fmt.Errorf("%w: mapping the readback buffer failed: %v", ErrGPU, status)
	}
	out := make([]byte, size)
	copy(out, g.staging.buf.GetMappedRange(0, uint(size)))
	return out, g.staging.buf.TryUnmap()
}

// search selects each query's top k on the device, in as few submissions as
// the scores binding allows.
func (g *wgpuIndex) search(ctx context.Context, qs [][]float32, k, rows int) ([][]fallback.Hit, error) {
	if rows == 0 {
		return make([][]fallback.Hit, len(qs)), nil
	}
	k = min(k, rows)
	out := make([][]fallback.Hit, 0, len(qs))
	step := g.batchLimit(rows)
	for lo := 0; lo < len(qs); lo += step {
		hits, _, err := g.run(ctx, qs[lo:min(lo+step, len(qs))], k, rows)
		if err != nil {
			return nil, err
		}
		out = append(out, hits...)
	}
	return out, nil
}

// scores returns every row's score for q: benchmarks compare all of them
// with a float64 reference.
func (g *wgpuIndex) scores(ctx context.Context, q []float32, rows int) ([]float32, error) {
	if rows == 0 {
		return []float32{}, nil
	}
	_, all, err := g.run(ctx, [][]float32{q}, 0, rows)
	return all, err
}

func (g *wgpuIndex) release() {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	_ = gpuCall("release", func() error {
		for _, ch := range g.chunks {
			ch.bind.Release()
			ch.data.Release()
			ch.params.Release()
		}
		g.chunks = nil
		g.selBind.Release()
		g.stamps.Release()
		g.resolved.Release()
		for _, b := range []*growBuffer{&g.query, &g.scoresB, &g.state, &g.hits, &g.staging} {
			b.buf.Release()
			b.buf, b.size = nil, 0
		}
		return nil
	})
}
