package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/shaders"
)

const (
	// writePiece bounds one queue write so the driver's staging copy of a
	// large upload stays small.
	writePiece = 16 << 20
	// uploadFlush is how many bytes an upload writes between submissions.
	// wgpu copies every queue write into a staging buffer of its own and
	// frees it only once a later submission has completed (gfx-rs/wgpu
	// #7114): without a submission now and then, a whole upload sits in
	// staging (pinned host memory on NVIDIA) until the end.
	uploadFlush = 256 << 20
	// bindAlign: every storage binding, and so every limit a scratch
	// buffer grows to, is a multiple of it. wgpu requires storage
	// bindings to be a multiple of 4 bytes, and hardware reports limits
	// such as 2,147,483,647 (i32::MAX); 256 also keeps every offset
	// within a buffer aligned for any binding.
	bindAlign = 256
	// batchQT is how many queries a batch scores per pass over the slab.
	batchQT = BatchQueries
)

// gpuChunk is one resident run of rows: a storage buffer of at most
// plan.RowsPerChunk rows and its dispatch parameters.
type gpuChunk struct {
	capRows int
	rows    int // rows resident and valid
	data    gpuplan.Buffer
	params  gpuplan.Buffer
}

// Index is the device side of one Index: the resident chunks, and the
// scratch buffers a search writes (queries, scores, select state, hits) and
// reads back.
type Index struct {
	dev    *Device
	metric core.Metric
	// prec is F32, or the compressed codes the rows hold
	// (NewCompressedIndex): then only Sums searches them.
	prec   core.Precision
	single shaders.ScoresLayout // one query per pass
	batch  shaders.ScoresLayout // batchQT queries per pass
	// gemm is gemm.wgsl's layout for batches (zero for compressed rows),
	// compiled on first use unless the device chose it (Device.gemm).
	gemm    shaders.ScoresLayout
	plan    packed.ChunkPlan
	chunks  []*gpuChunk
	query   growBuffer
	scoresB growBuffer
	state   growBuffer
	hits    growBuffer
	allow   growBuffer // the rows a masked search may return, then the tombstones
	// dead is the tombstone bitmap over resident rows (bit r of word
	// r/64): rows deleted but still resident, which no search returns. It
	// lives in the allow buffer from u32 word deadAt on, past any allow
	// bitmap a filtered search writes at word 0; the first deadValid of
	// its words are known to be there (0 after the buffer was replaced or
	// a write of it failed), the rest are written by the next search that
	// needs them.
	dead      []uint64
	deadAt    uint64
	deadValid int
	staging   growBuffer
	// gatherRows is the list of rows a gather scores (gather.go); its
	// queries and scores use query and scoresB.
	gatherRows growBuffer
	// The fused path's: its plans (smallest first, empty when the device
	// has not passed the fused self-test), the per-workgroup candidate
	// lists and the merge's parameters.
	topkSingle, topkBatch []shaders.TopKLayout
	cands                 growBuffer
	mparams               growBuffer
	// selfTest: the index belongs to a self-test, which checks the fused
	// path whatever WithSelectPath says.
	selfTest bool
	// rows is the exponent range of the float32 rows uploaded, for
	// flushPlan.
	rows rowRange
	// fusedGroups, when not 0, caps the fused scan's workgroups per chunk
	// (self-tests and tests: few workgroups make each one loop over many
	// steps of rows and cut its lists many times).
	fusedGroups int
	// mem is the ledger of the device memory this index holds, and its
	// budget (budget.go): rowBudget of rows plus their scratch cap.
	mem       memLedger
	rowBudget uint64
	// budgetShown is mem.budget for Limits, which must not wait for the
	// device mutex: a browser calls it from a synchronous JS callback,
	// where waiting for a search that holds the mutex (itself waiting on
	// a GPU promise the callback keeps from resolving) is a deadlock.
	budgetShown atomic.Uint64
	// lost, when set, is why the resident rows are gone: a chunk's growth
	// had to send them again and failed midway. Every search fails until
	// Truncate(0) and an upload from row 0.
	lost error
	// bind is the most bytes one storage binding may hold on this device.
	bind uint64
	// maxChunkRows is the cap the index was created with (0: none).
	maxChunkRows int
	// writePiece and flushBytes, when not 0, replace writePiece and
	// uploadFlush for this index (tests: many pieces and flushes with
	// little data).
	writePiece, flushBytes int
	// fault holds the hook that, when set (by tests only), is asked
	// before every wgpu call that can fail and may fail it, so tests
	// reach every failure path. An index and its siblings share it.
	fault *faultHook
	// shared is what ScoreInto keeps for the device's owner (share.go).
	shared sharedScores
	// qsel is SelectSums' state (qselect.go); nil until first used.
	qsel *quantSelect
}

// SetFault makes every wgpu call of the index that can fail ask f first, by
// the name of its step; an error from f fails that call as if the device
// had. nil removes it. Tests use it to reach every failure path. The
// index's siblings share it.
func (g *Index) SetFault(f func(step string) error) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	g.fault.f = f
}

// faultHook is a test's fault hook (SetFault), guarded by the device's mu
// and shared by an index and its siblings.
type faultHook struct{ f func(step string) error }

// step gives an injected fault at the named step, if a test asked for one.
func (g *Index) step(name string) error {
	return gpuplan.Step(g.fault.f, name, ErrFailed)
}

// NewIndex returns an empty index on the device for rows of stride
// float32 values (a multiple of 4), ranked by metric. maxChunkRows,
// when non-zero, caps the rows in one device buffer (tests use it to cross
// chunk boundaries with small data).
func (d *Device) NewIndex(stride int, metric core.Metric, maxChunkRows int) (*Index, error) {
	if err := d.checkScope(metric); err != nil {
		return nil, err
	}
	return newIndex(d, stride, metric, maxChunkRows)
}

// NewCompressedIndex returns an empty index on the device for rows of
// compressed codes (prec F16 or Int8), words uint32 words
// a row (a multiple of 4): the codes of an exact.Compressed, uploaded as
// a packed.Slab whose float32 elements carry the words' bits. Its Sums
// returns every row's raw sum against each query; Search refuses.
func (d *Device) NewCompressedIndex(words int, prec core.Precision, metric core.Metric, maxChunkRows int) (*Index, error) {
	if prec != core.F16 && prec != core.Int8 {
		return nil, fmt.Errorf("%w: unknown precision %v", ErrFailed, prec)
	}
	return newIndexPrec(d, words, metric, prec, maxChunkRows)
}

func newIndex(dev *Device, stride int, metric core.Metric, maxChunkRows int) (*Index, error) {
	return newIndexPrec(dev, stride, metric, core.F32, maxChunkRows)
}

func newIndexPrec(dev *Device, stride int, metric core.Metric, prec core.Precision, maxChunkRows int) (*Index, error) {
	g, err := dev.planIndex(stride, metric, prec, maxChunkRows)
	if err != nil {
		return nil, err
	}
	dev.mu.Lock()
	defer dev.mu.Unlock()
	// Compile everything now, all at once, so a broken shader fails New,
	// not a search.
	if err := g.compile(); err != nil {
		return nil, err
	}
	return g, nil
}

// planIndex lays out an index for the variant in use, compiling nothing.
func (dev *Device) planIndex(stride int, metric core.Metric, prec core.Precision, maxChunkRows int) (*Index, error) {
	ip, err := gpuplan.PlanIndex(stride, metric, prec, maxChunkRows, gpuplan.Chip{
		MaxStorageBindingBytes: dev.lim.MaxStorageBindingBytes, MaxBufferBytes: dev.lim.MaxBufferBytes,
		MaxWorkgroupsPerDim: dev.lim.MaxWorkgroupsPerDim, MaxInvocations: dev.lim.MaxInvocations,
		MaxWorkgroupBytes: dev.lim.MaxWorkgroupBytes, Team: dev.team, Staged: dev.staged,
		Subgroups: dev.subgroups, Fused: dev.fused, BatchQT: batchQT, TooLarge: ErrTooLarge,
	})
	if err != nil {
		return nil, err
	}
	plan, single, batch := ip.Chunks, ip.Single, ip.Batch
	bind := alignDown(min(dev.lim.MaxStorageBindingBytes, dev.lim.MaxBufferBytes))
	g := &Index{
		dev: dev, fault: &faultHook{}, metric: metric, prec: prec, single: single, batch: batch, plan: plan, bind: bind, maxChunkRows: maxChunkRows,
		query:      growBuffer{label: "umbra queries", usage: gpuplan.Storage | gpuplan.CopyDst, limit: bind},
		scoresB:    growBuffer{label: "umbra scores", usage: gpuplan.Storage | gpuplan.CopySrc, limit: bind},
		state:      growBuffer{label: "umbra select state", usage: gpuplan.Storage | gpuplan.CopyDst | gpuplan.CopySrc, limit: bind},
		hits:       growBuffer{label: "umbra hits", usage: gpuplan.Storage | gpuplan.CopySrc, limit: bind},
		allow:      growBuffer{label: "umbra allow", usage: gpuplan.Storage | gpuplan.CopyDst, limit: bind},
		staging:    growBuffer{label: "umbra readback", usage: gpuplan.MapRead | gpuplan.CopyDst, limit: alignDown(dev.lim.MaxBufferBytes)},
		cands:      growBuffer{label: "umbra candidates", usage: gpuplan.Storage, limit: bind},
		mparams:    growBuffer{label: "umbra merge params", usage: gpuplan.Uniform | gpuplan.CopyDst, limit: bind},
		gatherRows: growBuffer{label: "umbra gather rows", usage: gpuplan.Storage | gpuplan.CopyDst, limit: bind},
	}
	g.topkSingle, g.topkBatch = ip.TopKSingle, ip.TopKBatch
	g.gemm = ip.Gemm
	return g, nil
}

// specs lists every pipeline the index's searches may use: both scores
// layouts (gemm.wgsl's too where the device chose it), the radix select,
// and the fused top-k plans with their merge where the device passed the
// fused self-test.
func (g *Index) specs() ([]gpuplan.PipeSpec, error) {
	var out []gpuplan.PipeSpec
	layouts := []shaders.ScoresLayout{g.single, g.batch}
	if g.dev.gemm && g.gemm.RM != 0 {
		layouts = append(layouts, g.gemm)
	}
	for _, l := range layouts {
		sp, err := g.dev.scoresSpec(l)
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	sel, err := selectSpecs(g.metric == core.L2)
	if err != nil {
		return nil, err
	}
	out = append(out, sel...)
	for _, l := range append(slices.Clone(g.topkSingle), g.topkBatch...) {
		sp, err := fusedSpec(l)
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	if g.dev.fused && g.prec == core.F32 {
		sp, err := mergeSpec(g.metric == core.L2)
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	return out, nil
}

// compile builds every pipeline of specs at once (an API that can builds
// them in parallel) and files them in the device's cache. The caller
// holds the device mutex.
func (g *Index) compile() error {
	specs, err := g.specs()
	if err != nil {
		return err
	}
	if _, err := g.dev.build(specs...); err != nil {
		return err
	}
	layouts := []shaders.ScoresLayout{g.single, g.batch}
	if g.dev.gemm && g.gemm.RM != 0 {
		layouts = append(layouts, g.gemm)
	}
	for _, l := range layouts {
		if _, err := g.dev.scoresPipeline(l); err != nil {
			return err
		}
	}
	if _, err := g.dev.selectPipeline(g.metric == core.L2); err != nil {
		return err
	}
	for _, l := range append(slices.Clone(g.topkSingle), g.topkBatch...) {
		if _, err := g.dev.fusedPipeline(l); err != nil {
			return err
		}
	}
	if g.dev.fused && g.prec == core.F32 {
		if _, err := g.dev.mergePipeline(g.metric == core.L2); err != nil {
			return err
		}
	}
	return nil
}

// alignDown rounds a device limit down to a multiple of bindAlign.
func alignDown(n uint64) uint64 { return n &^ (bindAlign - 1) }

// Adapter describes the device's adapter.
func (g *Index) Adapter() core.AdapterInfo { return g.dev.info }

// Limits are the limits the index was planned against, with the variant
// the probe chose.
func (g *Index) Limits() Limits {
	l := g.dev.lim
	l.Subgroups = g.dev.subgroups
	l.Timestamps = g.dev.timestamps
	l.Team = g.single.Team
	l.StagedQueries = g.batch.Slice > 0
	l.FusedK, l.FusedBatchK = gpuplan.MaxK(g.topkSingle), gpuplan.MaxK(g.topkBatch)
	l.GemmQueries, l.Gemm = g.gemm.QT, g.dev.gemm && g.gemm.RM != 0
	l.DeviceBudget = g.budgetShown.Load()
	return l
}

// ChunkRows is the most rows one device buffer holds.
func (g *Index) ChunkRows() int   { return g.plan.RowsPerChunk }
func (g *Index) rowBytes() uint64 { return uint64(g.plan.Stride) * 4 }

// queryBytes is the size of one query in the query binding: a row's, or
// twice that for float16 codes (the query stays float32).
func (g *Index) queryBytes() uint64 { return uint64(g.single.QueryVec4()) * 16 }
func (g *Index) api() gpuplan.API   { return g.dev.api }

// grow gives chunk c room for need rows. A grown chunk gets a new buffer;
// the rows already resident are copied device to device, never re-sent from
// the host. Capacity doubles so a run of small Adds costs amortised O(1)
// copies. The chunk changes only once every step has succeeded: on error it
// is exactly as it was.
func (g *Index) grow(s *packed.Slab, c, need int, tally *core.Stages) error {
	for len(g.chunks) <= c {
		g.chunks = append(g.chunks, &gpuChunk{})
	}
	ch := g.chunks[c]
	if need <= ch.capRows {
		return nil
	}
	capRows := min(max(need, 2*ch.capRows, 256), g.plan.RowsPerChunk)
	if g.rowBudget > 0 {
		// The rows' buffers stay within the budget: grow only as far as
		// it allows, and refuse rows past it.
		var other uint64 // the other chunks' rows
		for _, o := range g.chunks {
			if o != ch && o.data != nil {
				other += o.data.Bytes()
			}
		}
		room := g.rowBudget - min(other, g.rowBudget)
		fit := int(min(room/g.rowBytes(), uint64(g.plan.RowsPerChunk)))
		if need > fit {
			start := c * g.plan.RowsPerChunk
			return fmt.Errorf("%w: %d rows need %d bytes of device memory, past the budget of %d bytes of rows",
				ErrTooLarge, start+need, other+uint64(need)*g.rowBytes(), g.rowBudget)
		}
		capRows = min(capRows, fit)
	}
	bytes := uint64(capRows) * g.rowBytes()
	return g.dev.scoped("grow device buffers", func() error {
		if ch.rows > 0 && bytes > g.mem.left() {
			// The old buffer and the new one at once pass the budget:
			// the scratch goes first, and if that is not enough the rows
			// are sent again instead of copied.
			g.resetScratch()
			if bytes > g.mem.left() {
				return g.regrow(s, c, capRows, tally)
			}
		}
		if err := g.step("create rows buffer"); err != nil {
			return err
		}
		data, err := g.alloc(fmt.Sprintf("umbra rows %d", c), bytes, gpuplan.Storage|gpuplan.CopyDst|gpuplan.CopySrc)
		if err != nil {
			return err
		}
		params := ch.params
		if params == nil {
			if err := g.step("create params buffer"); err != nil {
				g.free(data)
				return err
			}
			if params, err = g.alloc(fmt.Sprintf("umbra params %d", c), shaders.ParamsBytes, gpuplan.Uniform|gpuplan.CopyDst); err != nil {
				g.free(data)
				return err
			}
		}
		fail := func(err error) error {
			g.free(data)
			if params != ch.params {
				g.free(params)
			}
			return err
		}
		if ch.rows > 0 {
			if err := g.step("copy rows"); err != nil {
				return fail(err)
			}
			copyRows := gpuplan.Copy{Src: ch.data, Dst: data, Size: uint64(ch.rows) * g.rowBytes()}
			if err := g.dev.submit(tally, gpuplan.Work{Copies: []gpuplan.Copy{copyRows}}); err != nil {
				return fail(err)
			}
		}
		g.free(ch.data)
		ch.data, ch.params, ch.capRows = data, params, capRows
		return nil
	})
}

// ErrRowsLost: a chunk's growth had to send its resident rows again (the
// old and the new buffer together passed the budget) and failed midway,
// so the device no longer holds them: every search fails until
// Truncate(0) and an upload from row 0 (the engine's stale rows).
var ErrRowsLost = errors.New("the device's resident rows were lost in a failed growth")

// regrow gives chunk c capRows rows of room where its old buffer and the
// new one cannot both be held: the old one is freed first and its
// resident rows are written again from s (the slab they came from). The
// caller holds the device mutex, inside a scope; searches cannot run
// meanwhile. A failure after the old buffer is gone loses the rows
// (lost, ErrRowsLost).
func (g *Index) regrow(s *packed.Slab, c, capRows int, tally *core.Stages) (err error) {
	ch := g.chunks[c]
	start := c * g.plan.RowsPerChunk
	if s == nil || s.Rows < start+ch.rows {
		return fmt.Errorf("%w: chunk %d must grow past what the budget holds twice, and its rows are not at hand to send again", ErrTooLarge, c)
	}
	defer func() {
		if err != nil && !errors.Is(err, ErrTooLarge) {
			err = fmt.Errorf("%w: %w", ErrRowsLost, err)
			g.lost = err
		}
	}()
	rows := ch.rows
	g.qselectStale(start)
	g.free(ch.data)
	ch.data, ch.capRows, ch.rows = nil, 0, 0
	if err := g.step("create rows buffer"); err != nil {
		return err
	}
	data, err := g.alloc(fmt.Sprintf("umbra rows %d", c), uint64(capRows)*g.rowBytes(), gpuplan.Storage|gpuplan.CopyDst|gpuplan.CopySrc)
	if err != nil {
		return err
	}
	ch.data, ch.capRows = data, capRows
	piece, flush := g.uploadSizes()
	rest := s.Data[start*s.Stride : (start+rows)*s.Stride]
	var off uint64
	pending := 0
	for len(rest) > 0 {
		part := rest[:min(len(rest), piece/4)]
		if err := g.step("write rows"); err != nil {
			return err
		}
		if err := g.api().Write(data, off, bytesOf(part)); err != nil {
			return err
		}
		tally.BytesUp += int64(len(part)) * 4
		off += uint64(len(part)) * 4
		rest = rest[len(part):]
		if pending += len(part) * 4; pending+piece > flush {
			if err := g.step("flush upload"); err != nil {
				return err
			}
			if err := g.dev.flush(tally); err != nil {
				return err
			}
			pending = 0
		}
	}
	ch.rows = rows
	return nil
}

// Upload makes rows [from, s.Rows) resident, sending only those rows. On
// error the rows resident before stay valid and searchable, and nothing
// past them counts as resident. st (may be nil) records the bytes sent;
// progress (may be nil) hears how many rows are sent.
func (g *Index) Upload(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) error {
	staged, err := g.Stage(ctx, s, from, st, progress)
	if err != nil {
		return err
	}
	g.Publish(staged)
	return nil
}

// Staged is an upload whose rows are on the device but not yet resident:
// searches do not see them until Publish.
type Staged struct {
	g      *Index
	chunks []stagedChunk
}

type stagedChunk struct{ c, rows int }

// Stage writes rows [from, s.Rows) to the device without making them
// resident, taking the device only one piece of the upload at a time, so
// searches keep running on the resident rows meanwhile. Rows past the
// resident ones are never read by a search, so writing them cannot disturb
// one; a chunk that must grow is copied to its new buffer and swapped
// within one hold of the device. On error nothing past the resident rows
// counts as resident. The caller serialises Stage, Publish, Truncate and
// Rewrite (the engine's writer lock).
func (g *Index) Stage(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) (*Staged, error) {
	staged := &Staged{g: g}
	if from >= s.Rows {
		return staged, nil
	}
	g.dev.mu.Lock()
	g.qselectStale(from) // rows from here on may be written anew
	g.dev.mu.Unlock()
	// The select shader sees every query's scores in one binding.
	if uint64(s.Rows)*4 > g.bind || uint64(s.Rows) >= math.MaxUint32 {
		return nil, fmt.Errorf("%w: %d rows need a %d-byte scores binding, the device allows %d",
			ErrTooLarge, s.Rows, uint64(s.Rows)*4, g.bind)
	}
	if g.prec == core.F32 {
		g.rows.note(s.Data[from*s.Stride : s.Rows*s.Stride])
	}
	first, last := from/g.plan.RowsPerChunk, (s.Rows-1)/g.plan.RowsPerChunk
	total := s.Rows - from
	report := func(done int) {
		if progress != nil {
			progress(done, total)
		}
	}
	// held runs f holding the device, inside an error scope.
	held := func(what string, f func() error) error {
		g.dev.mu.Lock()
		defer g.dev.mu.Unlock()
		return g.dev.scoped(what, f)
	}
	var tally core.Stages // what the upload issued, added to st once it succeeds
	pieceBytes, flushBytes := g.uploadSizes()
	// pending counts the bytes written since the last submission: wgpu
	// holds a staging copy of each until a submission after it is done.
	pending := 0
	for c := first; c <= last; c++ {
		start, n := g.plan.Span(c, s.Rows)
		if err := func() error {
			g.dev.mu.Lock()
			defer g.dev.mu.Unlock()
			return g.grow(s, c, n, &tally)
		}(); err != nil {
			return nil, err
		}
		lo := max(from, start)
		rest := s.Data[lo*s.Stride : (start+n)*s.Stride]
		off := uint64(lo-start) * g.rowBytes()
		for len(rest) > 0 {
			if err := ctx.Err(); err != nil {
				return nil, err // nothing past the resident rows counts yet
			}
			piece := rest[:min(len(rest), pieceBytes/4)]
			err := held("upload rows", func() error {
				if err := g.step("write rows"); err != nil {
					return err
				}
				return g.api().Write(g.chunks[c].data, off, bytesOf(piece))
			})
			if err != nil {
				return nil, err
			}
			tally.BytesUp += int64(len(piece)) * 4
			off += uint64(len(piece)) * 4
			rest = rest[len(piece):]
			if pending += len(piece) * 4; pending+pieceBytes > flushBytes && (len(rest) > 0 || c < last) {
				// Submit the writes so far and wait for them, which
				// frees their staging copies, before the next piece
				// would pass the flush size.
				if err := held("flush upload", func() error {
					if err := g.step("flush upload"); err != nil {
						return err
					}
					return g.dev.flush(&tally)
				}); err != nil {
					return nil, err
				}
				pending = 0
			}
			report(start + int(off/g.rowBytes()) - from)
		}
		staged.chunks = append(staged.chunks, stagedChunk{c, n})
	}
	// Wait for the writes so a failure surfaces here, not in a search.
	err := held("finish upload", func() error {
		if err := g.step("finish upload"); err != nil {
			return err
		}
		return g.dev.flush(&tally)
	})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // cancelled before the rows counted as resident
	}
	if st != nil {
		st.Add(&tally)
	}
	return staged, nil
}

// uploadSizes are the largest queue write of an upload and the most bytes
// it writes between two submissions.
func (g *Index) uploadSizes() (piece, flush int) {
	piece, flush = writePiece, uploadFlush
	if g.writePiece > 0 {
		piece = g.writePiece
	}
	if g.flushBytes > 0 {
		flush = g.flushBytes
	}
	return piece, max(flush, piece)
}

// Publish makes a staged upload's rows resident: searches from now on read
// them. It cannot fail.
func (g *Index) Publish(s *Staged) {
	if s == nil || len(s.chunks) == 0 {
		return
	}
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	for _, d := range s.chunks {
		g.chunks[d.c].rows = d.rows
	}
}

// Release frees the index's device buffers; the device stays.
func (g *Index) Release() {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	g.resetScratch()
	g.releaseShared()
	g.qsel.release(g)
	for _, ch := range g.chunks {
		g.free(ch.data)
		g.free(ch.params)
	}
	g.chunks = nil
}

// Calibrate is the device's Calibrate (see there).
func (g *Index) Calibrate() (time.Duration, float64, error) { return g.dev.Calibrate() }

// Truncate forgets every resident row from row rows on (the buffers stay):
// an append the engine undid, or, with 0, rows a failed write may have
// left wrong, to be uploaded again from the slab; with 0 the tombstones go
// too (MarkDead them again).
func (g *Index) Truncate(rows int) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if rows == 0 {
		g.dead, g.deadValid = nil, 0
		g.lost = nil
	}
	g.qselectStale(rows)
	for c, ch := range g.chunks {
		start := c * g.plan.RowsPerChunk
		ch.rows = min(ch.rows, max(rows-start, 0))
	}
}

// Rewrite writes the given resident rows again from s, after the engine
// replaced them in the slab (an upsert): one row's bytes each, no chunk
// moves. On error some of those rows may hold old or partial values; the
// caller must not trust them until they are written again.
func (g *Index) Rewrite(ctx context.Context, s *packed.Slab, rows []int) error {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	_, flush := g.uploadSizes()
	pending := 0
	for _, r := range rows {
		g.qselectStale(r) // its bound data goes up again with the next search
	}
	return g.dev.scoped("rewrite rows", func() error {
		for _, r := range rows {
			c := r / g.plan.RowsPerChunk
			if c >= len(g.chunks) || r-c*g.plan.RowsPerChunk >= g.chunks[c].rows {
				return fmt.Errorf("%w: row %d is not resident", ErrFailed, r)
			}
			if pending+int(g.rowBytes()) > flush {
				// As Stage: free the staging copies so far first.
				if err := g.step("flush upload"); err != nil {
					return err
				}
				if err := g.dev.flush(nil); err != nil {
					return err
				}
				pending = 0
			}
			if err := g.step("write rows"); err != nil {
				return err
			}
			off := uint64(r-c*g.plan.RowsPerChunk) * g.rowBytes()
			if g.prec == core.F32 {
				g.rows.note(s.PaddedRow(r))
			}
			if err := g.api().Write(g.chunks[c].data, off, bytesOf(s.PaddedRow(r))); err != nil {
				return err
			}
			pending += int(g.rowBytes())
		}
		if err := g.step("finish upload"); err != nil {
			return err
		}
		return g.dev.flush(nil)
	})
}

// Sibling returns a new, empty index on the same device with the same
// layout: compaction uploads into it while searches still use this one.
// It shares g's fault hook (SetFault), the one set now and any set later:
// it is the same index's device side once compaction swaps it in, so a
// test's fault follows it there, even one armed while the compaction
// runs. (Renew's index has none: a recovery brings a device side back
// clean.)
func (g *Index) Sibling() (*Index, error) {
	s, err := g.dev.newLike(g)
	if err != nil {
		return nil, err
	}
	s.fault = g.fault // the same device: its mu guards both
	return s, nil
}

// newLike returns a new, empty index on d laid out like g.
func (d *Device) newLike(g *Index) (*Index, error) {
	return newIndexPrec(d, g.plan.Stride, g.metric, g.prec, g.maxChunkRows)
}

// MarkDead marks resident rows deleted, so no later search returns them:
// it sets their tombstone bits and writes just the words that changed to
// the device (a search that runs before they are resident writes them
// itself). A failed write leaves those words to be written again by the
// next search, which fails rather than read a stale tombstone. A row
// stays marked until the index is replaced (compaction uploads to a
// Sibling); Truncate and uploads keep the marks, since rows keep their
// positions.
func (g *Index) MarkDead(rows []int) {
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	var changed []int
	for _, r := range rows {
		w := r >> 6
		if w >= len(g.dead) {
			g.dead = append(g.dead, make([]uint64, w+1-len(g.dead))...)
		}
		if b := uint64(1) << (uint(r) & 63); g.dead[w]&b == 0 {
			g.dead[w] |= b
			changed = append(changed, w)
		}
	}
	if len(changed) == 0 {
		return
	}
	slices.Sort(changed)
	changed = slices.Compact(changed)
	if g.allow.buf == nil || changed[0] >= g.deadValid {
		return
	}
	err := g.dev.scoped("write tombstones", func() error {
		for i := 0; i < len(changed) && changed[i] < g.deadValid; {
			j := i
			for j+1 < len(changed) && changed[j+1] == changed[j]+1 && changed[j+1] < g.deadValid {
				j++
			}
			if err := g.step("write tombstones"); err != nil {
				return err
			}
			a, b := changed[i], changed[j]+1
			if err := g.api().Write(g.allow.buf, (g.deadAt+2*uint64(a))*4, bytesOf(g.dead[a:b])); err != nil {
				return err
			}
			i = j + 1
		}
		return nil
	})
	if err != nil {
		g.deadValid = min(g.deadValid, changed[0])
	}
}

// deadIn returns how many of the first rows rows are marked deleted. The
// caller holds the device mutex.
func (g *Index) deadIn(rows int) int {
	n := 0
	full := rows >> 6
	for i, w := range g.dead {
		switch {
		case i < full:
			n += bits.OnesCount64(w)
		case i == full && rows&63 != 0:
			n += bits.OnesCount64(w & (1<<(uint(rows)&63) - 1))
		}
	}
	return n
}

// liveMask returns the allow bitmap of the first rows rows that are not
// marked deleted: what the host's selection reads when the device does not
// select. The caller holds the device mutex.
func (g *Index) liveMask(rows int) []uint64 {
	return gpuplan.LiveMask(rows, g.dead)
}
