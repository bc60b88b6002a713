package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/fallback"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/hint"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/storefile"
)

// Hit is one search result: the vector's ID, its score (cosine similarity,
// inner product, or squared L2 distance) and its key, if it has one.
type Hit struct {
	ID    uint64
	Score float32
	// Key is the row's key when it was stored under one (WithKeys), and
	// empty otherwise.
	Key string
}

// Index is an exact similarity index. All methods are safe for concurrent
// use: on the CPU path searches run in parallel with each other, on a GPU
// they take turns on the device. Writers take turns with each other;
// searches go on while a write is prepared and wait only for the moment
// its rows are published.
type Index struct {
	cfg Config

	// wmu serialises writers (adds, upserts, deletes, compaction, Close),
	// so a writer that prepares outside mu sees no other change; mu guards
	// what searches read.
	wmu   sync.Mutex
	mu    sync.RWMutex
	slab  *packed.Slab
	rid   rowIDs
	keys  keyMap
	quant quantRows // the compressed copy of slab; empty under F32 (precision.go)
	store *store    // nil unless the index was opened from a store
	// mapped is the store's mapped base when the slab's rows were mapped
	// from it (CPU path, mapped.go); set before the index is shared.
	mapped *mapping
	// readOnly is the store's path for an index opened with ReadOnly, which
	// refuses writes; set before the index is shared, never changed.
	readOnly string
	closed   bool
	// stale is set when a failed device write may have left the resident
	// rows different from the slab; the next GPU call uploads them anew.
	stale bool

	// dev is nil on the CPU path. gpuDown is set when a GPU failure under
	// Device Auto moved searches to the fallback for good; reason says why.
	dev     device
	route   *diag.Routing // non-nil under Auto on a GPU
	gpuDown atomic.Bool
	whyMu   sync.Mutex
	reason  string
	hint    Hint

	// batch queues concurrent single searches into batches (batch.go).
	batch coalescer

	// life ends at Close, stopping a GPU recovery in the background
	// (recover.go); recovering is set while one runs, recoveries counts
	// the times the GPU came back, and lastFailure says what failed last.
	life        context.Context
	endLife     context.CancelFunc
	recovering  atomic.Bool
	recoveries  atomic.Int64
	lastFailure string // guarded by whyMu
	opt         options

	// devCap, when not 0, is how many rows the device may hold: the rest
	// stay on the CPU (Limits.Overflow, overflow.go).
	devCap int

	// beforePublish, when set (by tests only), runs in a write just before
	// its staged rows are published, with wmu held and ix.mu not.
	beforePublish func()
}

// New creates an empty index. With Device Auto it probes the GPU (once per
// process per adapter) and falls back to the CPU on any failure, recording
// why in Info; with Device GPU a failure is returned instead. ctx bounds the
// probe; a cancelled ctx is an error, never a fallback.
func New(ctx context.Context, cfg Config) (*Index, error) {
	return newIndex(ctx, cfg, options{})
}

// emptyIndex is an index holding nothing, with no device side yet.
func emptyIndex(cfg Config) *Index {
	ix := &Index{cfg: cfg, slab: packed.NewSlab(cfg.Dim), rid: newRowIDs(), quant: newQuantRows(cfg)}
	ix.life, ix.endLife = context.WithCancel(context.Background())
	return ix
}

// options are what tests may set beyond Config (see export_test.go).
type options struct {
	// maxChunkRows, when non-zero, caps the rows in one device buffer below
	// what the adapter's limits allow, so tests cross chunk boundaries
	// with small data.
	maxChunkRows int
	// softwareAuto lets Device Auto take a software adapter, and sends
	// every search it can to the GPU (no routing), so tests reach Auto's
	// failure and recovery paths on lavapipe.
	softwareAuto bool
	// recoverAfter is the first wait before a GPU recovery attempt (0:
	// recoverFirst); recoverFault, when set, may fail an attempt.
	recoverAfter time.Duration
	recoverFault func(attempt int) error
	// equalShards gives every shard an equal share of
	// the rows rather than one sized by its measured scan rate.
	equalShards bool
}

func newIndex(ctx context.Context, cfg Config, opt options) (ix *Index, err error) {
	defer func() {
		if r := recover(); r != nil {
			ix, err = nil, fmt.Errorf("%w: %v", ErrGPU, r)
		}
	}()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// A cancelled context is an answer of its own, whatever the device and
	// whether or not a probe verdict is already cached.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("creating the index: %w", err)
	}
	ix = emptyIndex(cfg)
	ix.opt = opt
	if ix.devCap, err = overflowCap(cfg); err != nil {
		return nil, err
	}
	if cfg.Device == CPU {
		return ix, nil
	}
	g, reason, h, err := openDevice(ctx, cfg, opt)
	if err != nil {
		// A probe cut short by ctx says nothing about the GPU: return
		// that rather than fall back with a misleading reason.
		if cfg.Device == GPU || ctx.Err() != nil {
			return nil, err
		}
		ix.reason, ix.hint = reason, h
		return ix, nil
	}
	ix.dev = g
	if cfg.Device == Auto && !opt.softwareAuto {
		r, err := routingFor(g)
		if err != nil {
			g.Release()
			ix.dev, ix.reason, ix.hint = nil, "GPU calibration failed: "+err.Error(), hintFor(hint.ProbeFailed, cfg.adapter())
			return ix, nil
		}
		ix.route = r
	}
	return ix, nil
}

// Dim returns the vector dimension.
func (ix *Index) Dim() int { return ix.cfg.Dim }

// Metric returns the index's metric.
func (ix *Index) Metric() Metric { return ix.cfg.Metric }

// Len returns the number of stored vectors (deleted ones not counted).
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.rid.live()
}

// packMode is how the index packs and checks a caller's rows; raw rows
// (replayed from a log) are stored as they are, already normalised.
func (ix *Index) packMode(raw bool) packed.Mode {
	cos := ix.cfg.Metric == Cosine
	return packed.Mode{Normalize: cos && !raw, Check: true, RejectZero: cos}
}

// packer returns the pack step of an add of n rows, row(i) the i-th: in
// one pass per row it checks the row (length, finiteness, a zero norm under
// Cosine), takes its norm and writes it packed, normalised and padded into
// the slab's spare rows, progressRows at a time between which it reports
// "validate" progress and honours ctx. Only when every row is packed are
// they committed: on any error the slab is as it was.
func (ix *Index) packer(ctx context.Context, n int, raw bool, row func(i int) []float32) func(*packed.Slab) error {
	return func(s *packed.Slab) error {
		if err := ix.packPieces(ctx, s, s.Spare(n), n, raw, row); err != nil {
			return err
		}
		s.Commit(n)
		return nil
	}
}

// packPieces packs n rows into dst with s's layout, progressRows at a
// time, reporting "validate" progress and honouring ctx between pieces.
// Each piece is split between Config.Workers goroutines (packParallel).
func (ix *Index) packPieces(ctx context.Context, s *packed.Slab, dst []float32, n int, raw bool, row func(i int) []float32) error {
	report := progressFrom(ctx)
	mode := ix.packMode(raw)
	workers := ix.packWorkers()
	for lo := 0; lo < n; lo += progressRows {
		hi := min(lo+progressRows, n)
		err := packParallel(s, dst[lo*s.Stride:], hi-lo, func(i int) []float32 { return row(lo + i) }, mode, workers)
		if err != nil {
			return ix.badRow(err, lo, input{"vector", 0})
		}
		report("validate", hi, n)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// packWorkerBytes is the least a packing goroutine is given: below it,
// starting one costs more than it saves.
const packWorkerBytes = 1 << 20

// packWorkers is how many goroutines pack and check rows:
// Config.Workers, or every core.
func (ix *Index) packWorkers() int {
	if ix.cfg.Workers > 0 {
		return ix.cfg.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// packParallel is s.PackRows split into consecutive parts (splitRows).
func packParallel(s *packed.Slab, dst []float32, n int, row func(i int) []float32, m packed.Mode, workers int) error {
	return splitRows(n, s.Stride, workers, func(a, b int) error {
		return s.PackRows(dst[a*s.Stride:], b-a, func(j int) []float32 { return row(a + j) }, m)
	})
}

// splitRows runs part over consecutive parts [a, b) of n rows of stride
// values, one part per worker, as many workers as there are
// packWorkerBytes of rows (the calling goroutine alone below that), and
// returns the first failed part's error, a *packed.BadRow counting from
// the call's first row. A row's work depends on that row alone, so the
// parts' results are what one pass would give. The workers take the
// caller's debug.SetPanicOnFault (a mapped slab's rows may fault), and a
// panic in one becomes an error wrapping its value, so a fault keeps its
// address for the caller's recoverInto.
func splitRows(n, stride, workers int, part func(a, b int) error) error {
	w := min(workers, n*stride*4/packWorkerBytes)
	if w <= 1 {
		return part(0, n)
	}
	onFault := debug.SetPanicOnFault(false)
	debug.SetPanicOnFault(onFault)
	per := (n + w - 1) / w
	errs := make([]error, w)
	var wg sync.WaitGroup
	for i := range w {
		a, b := i*per, min((i+1)*per, n)
		if a >= b {
			break
		}
		wg.Go(func() {
			if onFault {
				debug.SetPanicOnFault(true)
			}
			defer func() {
				if r := recover(); r != nil {
					if e, ok := r.(error); ok {
						errs[i] = fmt.Errorf("%w: rows %d to %d: %w", ErrGPU, a, b, e)
					} else {
						errs[i] = fmt.Errorf("%w: rows %d to %d: %v", ErrGPU, a, b, r)
					}
				}
			}()
			err := part(a, b)
			var bad *packed.BadRow
			if errors.As(err, &bad) {
				bad.Row += a
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// badRow words a row the packer refused, as checkVector does; lo is the
// index of the packed piece's first row in the call.
func (ix *Index) badRow(err error, lo int, what input) error {
	var b *packed.BadRow
	if !errors.As(err, &b) {
		return err
	}
	what.index = lo + b.Row
	switch {
	case b.WrongLen:
		return fmt.Errorf("%w: %s has %d components, index dimension is %d", ErrDimMismatch, what, b.Len, ix.cfg.Dim)
	case b.Zero:
		return fmt.Errorf("%w: %s has norm 0, which has no direction", ErrZeroVector, what)
	}
	return fmt.Errorf("%w: %s, component %d is %v", ErrNonFinite, what, b.Col, b.Value)
}

// add checks and packs (pack) n vectors and appends them under ids (nil:
// assigned). The rows are packed and, on a GPU, uploaded beside the
// published ones while searches go on; searches wait only for the swap
// that publishes them.
func (ix *Index) add(ctx context.Context, start time.Time, ids []uint64, n int, pack func(*packed.Slab) error) ([]uint64, error) {
	if err := ix.lockWriter(); err != nil {
		return nil, err
	}
	defer ix.wmu.Unlock()
	return ix.addLocked(ctx, start, ids, false, nil, n, pack)
}

// lockWriter takes the writers' lock (wmu) for a write, refusing a
// read-only or closed index, and repairs a store whose log broke (or says
// why it cannot); the caller unlocks wmu. Every write goes through it.
func (ix *Index) lockWriter() error {
	if err := ix.writable(); err != nil {
		return err
	}
	ix.wmu.Lock()
	if ix.closed {
		ix.wmu.Unlock()
		return ErrClosed
	}
	if err := ix.repairStore(); err != nil {
		ix.wmu.Unlock()
		return err
	}
	return nil
}

// addLocked is add with wmu held; idsChecked says the caller has checked
// ids new already (stageAppend). keys, when not nil, name the new rows
// (one each, checked new by the caller) and are logged with them.
func (ix *Index) addLocked(ctx context.Context, start time.Time, ids []uint64, idsChecked bool, keys []string, n int, pack func(*packed.Slab) error) ([]uint64, error) {
	p, err := ix.stageAppend(ctx, start, ids, idsChecked, n, pack)
	if err != nil {
		return nil, err
	}
	rec := storefile.Record{Op: storefile.OpAdd, IDs: p.ids}
	if keys != nil {
		if len(keys) != len(p.ids) {
			return nil, fmt.Errorf("%w: %d keys for %d vectors", ErrIDCount, len(keys), len(p.ids))
		}
		rec.Op, rec.Keys = storefile.OpUpsertKeys, keys
	}
	rec.Rows = ix.appendedRows(p)
	t, mark := traceFrom(ctx), time.Now()
	if err := ix.logged(rec); err != nil {
		return nil, err
	}
	if ix.store != nil {
		lapWrite(t, stageLog, &mark)
	}
	if ix.beforePublish != nil {
		ix.beforePublish()
	}
	ix.mu.Lock()
	ix.publish(p)
	ix.mu.Unlock()
	if keys != nil {
		ix.nameIDs(keys, p.ids)
	}
	lapWrite(t, stagePublish, &mark)
	if t != nil {
		t.Rows += int64(len(p.ids))
	}
	return p.ids, nil
}

// appended is an append staged beside the published rows: slab is the
// published rows (shared, or copied when their storage had no room) plus
// the new ones, and staged their device copy, written but not yet
// resident. Nothing of it is visible until publish.
type appended struct {
	ids    []uint64
	old    int // rows published when it was staged
	slab   packed.Slab
	quant  quantStage // the compressed rows of slab (precision.go)
	staged func()     // publishes the device copy; nil off the GPU
	fresh  bool       // the upload rewrote every row (they were stale)
}

// stageAppend checks and packs n rows with pack under ids (nil: assigned;
// checked new after the rows, unless idsChecked says the caller did) after
// the published ones (n < 0: as many as pack commits, which checks them
// against the limits itself, see checkAppend) and, on a GPU, writes them
// to the device, all without taking ix.mu: a search reads only rows below
// the published count, in the slab and on the device. The caller holds
// wmu. On error nothing changed; under Auto a failed upload moves the
// index to the CPU and the append goes on there.
func (ix *Index) stageAppend(ctx context.Context, start time.Time, ids []uint64, idsChecked bool, n int, pack func(*packed.Slab) error) (*appended, error) {
	old := ix.slab.Rows
	if n >= 0 {
		if err := ix.checkAppend(n); err != nil {
			return nil, err
		}
	}
	// pack checks the rows as it packs them into the spare rows past the
	// published ones (or a larger copy of the slab): a bad row fails the
	// call before any ID is looked at, as a bad vector always has, and
	// leaves nothing a search reads.
	p := &appended{old: old, slab: *ix.slab}
	t := traceFrom(ctx)
	if err := pack(&p.slab); err != nil {
		return nil, err
	}
	lapWrite(t, stagePack, &start)
	n = p.slab.Rows - old // what pack committed: n, or, when n < 0, what arrived
	if ids != nil && len(ids) != n {
		return nil, fmt.Errorf("%w: %d IDs for %d vectors", ErrIDCount, len(ids), n)
	}
	if ids == nil {
		var err error
		if ids, err = ix.rid.assign(n); err != nil {
			return nil, err
		}
	} else if !idsChecked {
		if err := ix.rid.checkNew(ids, false); err != nil {
			return nil, err
		}
	}
	p.ids = ids
	lapWrite(t, stageAssign, &start)
	if n == 0 {
		return p, nil
	}
	p.quant = ix.quant.stage(&p.slab, old)
	if ix.cfg.Precision != F32 {
		lapWrite(t, stageCompress, &start)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ix.onGPU() {
		var st *gpu.Stages
		if t != nil {
			st = &gpu.Stages{}
		}
		report := progressFrom(ctx)
		from := old
		if ix.stale {
			// A failed device write left the resident rows unlike the
			// slab: send them all again (GPU searches refuse meanwhile).
			ix.dev.Truncate(0) // rows and tombstones
			ix.dev.MarkDead(ix.rid.deadRows())
			from, p.fresh = 0, true
		}
		staged, err := ix.dev.Stage(ctx, ix.deviceView(&p.slab, p.quant.codes()), from, st, func(done, total int) { report("upload", done, total) })
		addStages(t, st)
		if err = gpuError(err); err != nil {
			// A cancelled call and, under Device GPU, a failed upload
			// store nothing; under Auto the CPU takes the rows.
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			if ix.cfg.Device == GPU {
				return nil, err
			}
			ix.demote(err)
		}
		p.staged = staged
		if t != nil {
			lap(&t.Upload, start)
		}
	}
	return p, nil
}

// checkAppend refuses an append of n rows past the published ones that
// would exceed MaxRows, the largest slab, or the memory budgets. The
// caller holds wmu.
func (ix *Index) checkAppend(n int) error {
	old := ix.slab.Rows
	if ix.cfg.Limits.MaxRows > 0 && old+n > ix.cfg.Limits.MaxRows {
		return fmt.Errorf("%w: adding %d vectors to %d would exceed MaxRows %d", ErrTooLarge, n, old, ix.cfg.Limits.MaxRows)
	}
	if err := packed.CheckSize(old+n, ix.slab.Stride); err != nil {
		return fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	return ix.checkBudget(n)
}

// publish makes a staged append visible: the swap every search waits for.
// The caller holds wmu and ix.mu.
func (ix *Index) publish(p *appended) {
	if p.slab.Rows == p.old {
		return
	}
	*ix.slab = p.slab
	ix.mapped.drop(ix.slab)
	ix.quant.publish(p.quant)
	if p.staged != nil && ix.dev != nil {
		p.staged()
		if p.fresh {
			ix.stale = false
		}
	}
	ix.rid.appendIDs(p.ids)
}

// unpublish undoes publish (a later step of the same write failed). The
// caller holds wmu and ix.mu.
func (ix *Index) unpublish(p *appended) {
	if p.slab.Rows == p.old {
		return
	}
	ix.slab.Truncate(p.old)
	ix.quant.sync(ix.slab)
	ix.rid.truncate(p.old)
	if ix.dev != nil {
		ix.dev.Truncate(p.old)
	}
}

// appendedRows returns a staged append's rows as stored, without padding,
// one after another: what the log records (nil without a store).
func (ix *Index) appendedRows(p *appended) []float32 {
	if ix.store == nil {
		return nil
	}
	if s := &p.slab; s.Stride == s.Dim {
		// Unpadded rows one after another are the record already.
		return s.Data[p.old*s.Stride : s.Rows*s.Stride : s.Rows*s.Stride]
	}
	out := make([]float32, 0, len(p.ids)*ix.cfg.Dim)
	for r := p.old; r < p.slab.Rows; r++ {
		out = append(out, p.slab.Row(r)...)
	}
	return out
}

// upload makes the slab's rows from row from on resident, or every row
// when a failed device write left them stale. The caller holds ix.mu.
func (ix *Index) upload(ctx context.Context, from int, st *gpu.Stages, progress func(done, total int)) error {
	if ix.stale {
		ix.dev.Truncate(0) // rows and tombstones
		ix.dev.MarkDead(ix.rid.deadRows())
		from = 0
	}
	if err := gpuError(ix.dev.Upload(ctx, ix.deviceView(ix.slab, ix.quant.c), from, st, progress)); err != nil {
		return err
	}
	ix.stale = false
	return nil
}

// input names one vector of a call's input in an error: "vector 3",
// "query 2", or "query" for a single search (index -1). It is formatted only
// when an error is returned, so validating a million rows allocates nothing.
type input struct {
	kind  string
	index int
}

func (in input) String() string {
	if in.index < 0 {
		return in.kind
	}
	return in.kind + " " + strconv.Itoa(in.index)
}

// checkVector validates one vector of input: its length, finiteness and,
// under Cosine, a non-zero norm. what names it in the error.
func (ix *Index) checkVector(v []float32, what input) error {
	if len(v) != ix.cfg.Dim {
		return fmt.Errorf("%w: %s has %d components, index dimension is %d", ErrDimMismatch, what, len(v), ix.cfg.Dim)
	}
	zero := true
	for j, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w: %s, component %d is %v", ErrNonFinite, what, j, x)
		}
		if x != 0 {
			zero = false
		}
	}
	// Any other finite vector normalises: the norm is taken in float64, where
	// neither float32's largest nor its smallest values overflow or vanish.
	if zero && ix.cfg.Metric == Cosine {
		return fmt.Errorf("%w: %s has norm 0, which has no direction", ErrZeroVector, what)
	}
	return nil
}

// Search returns the k stored vectors most similar to query, best first;
// equal scores are ordered by lower ID. k larger than Len returns every
// vector (there is no other cap on k); an empty index returns no hits.
// Allow and AllowFunc restrict it to a subset, exactly. Searches from many
// goroutines at once are coalesced into batches (see Config.Coalesce);
// each still gets exactly its own answer, and its ctx cancels only it.
func (ix *Index) Search(ctx context.Context, query []float32, k int, opts ...SearchOption) (hits []Hit, err error) {
	o, err := collect("Search", opts)
	if err != nil {
		return nil, err
	}
	if ix.coalesce(ctx, &o) {
		return ix.searchCoalesced(ctx, query, k)
	}
	all, err := ix.searchBatch(ctx, [][]float32{query}, k, true, opts)
	if err != nil {
		return nil, err
	}
	return all[0], nil
}

// SearchBatch runs Search for every query. All queries are validated before
// any is searched.
func (ix *Index) SearchBatch(ctx context.Context, queries [][]float32, k int, opts ...SearchOption) (all [][]Hit, err error) {
	return ix.searchBatch(ctx, queries, k, false, opts)
}

// searchBatch is SearchBatch; single names the query "query" in errors,
// as Search's only one.
func (ix *Index) searchBatch(ctx context.Context, queries [][]float32, k int, single bool, opts []SearchOption) (all [][]Hit, err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	verb := "SearchBatch"
	if single {
		verb = "Search"
	}
	o, err := collect(verb, opts)
	if err != nil {
		return nil, err
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if k <= 0 {
		return nil, fmt.Errorf("%w: got k=%d", ErrInvalidK, k)
	}
	qs := make([][]float32, len(queries))
	for i, query := range queries {
		what := input{"query", i}
		if single {
			what.index = -1
		}
		if qs[i], err = ix.prepare(ctx, query, what); err != nil {
			return nil, err
		}
	}
	if err := ix.mapped.check(); err != nil {
		return nil, err
	}
	mask, _ := ix.rid.mask(&o)
	if ix.quant.c != nil {
		all, err = ix.searchQuant(ctx, qs, k, mask, o.approximate)
	} else {
		all, err = ix.searchMany(ctx, qs, k, mask, o.filtered())
	}
	return ix.mappedAnswer(all, err)
}

// prepare validates a query and returns it normalised (for Cosine) and
// padded to the slab stride. The caller holds ix.mu.
func (ix *Index) prepare(ctx context.Context, query []float32, what input) ([]float32, error) {
	if ix.closed {
		return nil, ErrClosed
	}
	if err := ix.checkVector(query, what); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ix.cfg.Metric == Cosine {
		return packed.Normalized(query, ix.slab.Stride), nil
	}
	return packed.Padded(query, ix.slab.Stride), nil
}

// searchMany runs prepared queries on the GPU (top-k selected on the
// device) or on the fallback (rows read once per block of queries). Under
// Device Auto a GPU failure moves this and later searches to the fallback.
// mask (nil: every row) says which rows may be returned. The caller holds
// ix.mu.
//
// filtered says mask holds a caller's filter; without one, a GPU search
// leaves out deleted rows by the device's resident tombstones and sends no
// bitmap.
func (ix *Index) searchMany(ctx context.Context, qs [][]float32, k int, mask []uint64, filtered bool) ([][]Hit, error) {
	if ix.quant.c != nil {
		return ix.searchQuant(ctx, qs, k, mask, false)
	}
	all := make([][]Hit, len(qs))
	t := traceFrom(ctx)
	if ix.slab.Rows == 0 {
		for i := range all {
			all[i] = []Hit{}
		}
		return all, nil
	}
	if len(qs) > progressQueries {
		if p, ok := ctx.Value(progressKey{}).(Progress); ok && p != nil {
			return ix.searchInPieces(ctx, qs, k, mask, filtered)
		}
	}
	if err := ix.checkStale(); err != nil {
		return nil, err
	}
	if ix.onGPU() && (ix.route == nil || preferGPU(ix.route, int64(ix.slab.Bytes()), len(qs))) {
		var st *gpu.Stages
		if t != nil {
			st = &gpu.Stages{}
		}
		var res [][]fallback.Hit
		var err error
		if ix.overflowing() {
			res, err = ix.searchSplit(ctx, qs, k, mask, st)
		} else {
			devMask := mask
			if !filtered {
				devMask = nil // the device's tombstones leave out deleted rows
			}
			res, err = ix.deviceTopK(ctx, qs, k, ix.slab.Rows, devMask, st)
		}
		addStages(t, st)
		err = gpuError(err)
		if err == nil {
			if t != nil {
				t.Device = "gpu"
			}
			for i, r := range res {
				all[i] = ix.toHits(r)
			}
			return all, nil
		}
		if err := ix.afterGPUFailure(ctx, err); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	view := ix.view()
	view.Allow = mask
	var res [][]fallback.Hit
	var err error
	if len(qs) == 1 {
		var one []fallback.Hit
		one, err = fallback.Search(ctx, view, qs[0], k, ix.fallbackMetric(), ix.cfg.Workers)
		res = [][]fallback.Hit{one}
	} else {
		res, err = fallback.SearchBatch(ctx, view, qs, k, ix.fallbackMetric(), ix.cfg.Workers)
	}
	if err != nil {
		return nil, err
	}
	if t != nil {
		lap(&t.Kernel, start)
		t.KernelClock, t.Device = "cpu", "cpu"
		addScan(t, len(qs), ix.slab)
	}
	for i, r := range res {
		all[i] = ix.toHits(r)
	}
	return all, nil
}

// searchInPieces runs a large batch progressQueries at a time so a
// Progress can be told how far it has got. Each piece still reads a row once
// per tile of queries, so the split costs one pass over the slab per piece.
// The caller holds ix.mu.
func (ix *Index) searchInPieces(ctx context.Context, qs [][]float32, k int, mask []uint64, filtered bool) ([][]Hit, error) {
	report := progressFrom(ctx)
	quiet := context.WithValue(ctx, progressKey{}, Progress(nil))
	all := make([][]Hit, 0, len(qs))
	for lo := 0; lo < len(qs); lo += progressQueries {
		part, err := ix.searchMany(quiet, qs[lo:min(lo+progressQueries, len(qs))], k, mask, filtered)
		if err != nil {
			return nil, err
		}
		all = append(all, part...)
		report("search", len(all), len(qs))
	}
	return all, nil
}

func (ix *Index) onGPU() bool { return ix.dev != nil && !ix.gpuDown.Load() }

// checkStale refuses a GPU search under Device GPU while a failed device
// write has left the resident rows unlike the slab. (Under Auto such a
// failure has already moved the index to the CPU.) The caller holds ix.mu.
func (ix *Index) checkStale() error {
	if ix.onGPU() && ix.stale && ix.cfg.Device == GPU {
		return fmt.Errorf("%w: the resident rows are stale after a failed device write; the next write uploads them again", ErrGPU)
	}
	return nil
}

// afterGPUFailure decides what a failed GPU search means: the error to
// return (the context ended, or Device GPU), or nil to answer this call on
// the CPU. A request the device cannot take in one piece says nothing about
// the device, so later calls still go to the GPU; any other failure moves
// the index off it.
func (ix *Index) afterGPUFailure(ctx context.Context, err error) error {
	if ctx.Err() != nil || ix.cfg.Device == GPU {
		return err
	}
	if !errors.Is(err, ErrTooLarge) {
		ix.demote(err)
	}
	return nil
}

// demote moves an Auto index to the fallback after a GPU failure. The slab
// is kept on the host, so nothing is lost.
func (ix *Index) demote(err error) {
	ix.whyMu.Lock()
	defer ix.whyMu.Unlock()
	if ix.gpuDown.CompareAndSwap(false, true) {
		ix.lastFailure = err.Error()
		if errors.Is(err, ErrTooLarge) {
			ix.reason = "the index outgrew what the GPU can hold, searches moved to the CPU: " + err.Error()
			ix.hint = Hint{Code: hint.TooLarge}
			return
		}
		ix.reason = "GPU failed after start-up, searches moved to the CPU: " + err.Error()
		ix.hint = hintFor(hint.ProbeFailed, ix.cfg.adapter())
		if ix.dev != nil && ix.recovering.CompareAndSwap(false, true) {
			ix.reason += "; recovering in the background"
			go ix.recoverGPU(err)
		}
	}
}

// view is the fallback's view of the slab, naming the rows' IDs when they
// do not increase with the row (ties go to the lower ID; ties.go). The
// caller holds ix.mu.
func (ix *Index) view() fallback.Slab {
	s := ix.slab
	return fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride, IDs: ix.rid.tieIDs()}
}

func (ix *Index) fallbackMetric() fallback.Metric { return ix.cfg.Metric.fallbackCode() }

// toHits turns rows into the caller's IDs, with their keys. The caller
// holds ix.mu.
func (ix *Index) toHits(r []fallback.Hit) []Hit {
	hits := make([]Hit, len(r))
	for i, h := range r {
		id := ix.rid.ids[h.Row]
		hits[i] = Hit{ID: id, Score: h.Score, Key: ix.keys.key[id]}
	}
	return hits
}

// Info reports the backend, the adapter and, for a fallback, why.
func (ix *Index) Info() Info {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	info := Info{
		Device:    CPU,
		CPUKernel: fallback.Kernel(),
		Precision: ix.cfg.Precision,
		DeadRows:  ix.rid.nDead,
	}
	if ix.quant.c != nil {
		info.QuantKernel = fallback.QuantKernel()
	}
	if ix.dev != nil {
		info.Adapter = ix.dev.Adapter()
		info.Limits = diag.Limits(ix.dev.Limits())
		info.ChunkRows = ix.dev.ChunkRows()
		info.DeviceRows = ix.deviceRows(ix.slab.Rows)
		info.Chunks = (info.DeviceRows + info.ChunkRows - 1) / info.ChunkRows
		if sh, ok := ix.dev.(*shards); ok {
			info.Shards, info.Chunks = sh.info(info.DeviceRows), 0
			for i, s := range info.Shards {
				c := sh.parts[i].dev.ChunkRows()
				info.Chunks += (s.Rows + c - 1) / c
			}
		}
		if ix.onGPU() {
			info.Device = GPU
		}
		if ix.route != nil {
			info.Routing = ix.route
		}
	}
	ix.whyMu.Lock()
	info.Reason, info.Hint, info.LastFailure = ix.reason, ix.hint, ix.lastFailure
	ix.whyMu.Unlock()
	info.Recoveries = int(ix.recoveries.Load())
	return info
}

// Close releases the index's device buffers. Later calls return ErrClosed;
// closing twice is harmless, and so is closing a nil *Index (what a failed
// New or Open returns), so `defer ix.Close()` may come before the error
// check.
func (ix *Index) Close() error {
	if ix == nil {
		return nil
	}
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	var repairErr error
	if !ix.closed && ix.mapped.check() == nil {
		// A store whose log broke is repaired if it can be, so the files
		// left behind open to what the index holds. (Not from a mapping
		// that changed underneath: its rows are not the index's any more.)
		repairErr = func() (err error) {
			defer ix.recoverInto(&err, ix.watchFaults())
			return ix.repairStore()
		}()
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return nil
	}
	ix.closed = true
	ix.endLife()
	err := ix.closeStore(repairErr)
	ix.mapped.close()
	if ix.dev != nil {
		ix.dev.Release()
		ix.dev = nil // Info then says cpu: nothing is on a device any more
	}
	ix.slab, ix.rid, ix.keys = packed.NewSlab(ix.cfg.Dim), newRowIDs(), keyMap{}
	ix.quant = newQuantRows(ix.cfg)
	return err
}

// recoverInto turns a panic below the API into an ErrGPU error: the binding
// panics on some failures, and no panic may reach the caller. A fault in a
// mapped store's rows, recovered here or by the fallback's workers, is
// ErrStoreChanged instead (mapped.go). It restores what watchFaults set.
func (ix *Index) recoverInto(err *error, w faultWatch) {
	if w.set {
		debug.SetPanicOnFault(w.prev)
	}
	if r := recover(); r != nil {
		if ferr := ix.mapped.faultErr(r); ferr != nil {
			*err = ferr
			return
		}
		*err = fmt.Errorf("%w: %v", ErrGPU, r)
	}
	if *err != nil {
		if ferr := ix.mapped.faultErr(*err); ferr != nil {
			*err = ferr
		}
	}
}

// SearchRange returns every stored vector whose score for query is within
// threshold — at least threshold under Cosine and Dot, at most threshold
// (a squared distance) under L2 — best first, equal scores by lower ID.
// There is no cap on how many unless MaxHits gives one; Allow and
// AllowFunc restrict it to a subset.
func (ix *Index) SearchRange(ctx context.Context, query []float32, threshold float32, opts ...SearchOption) (hits []Hit, err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	o, err := collect("SearchRange", opts)
	if err != nil {
		return nil, err
	}
	if math.IsNaN(float64(threshold)) {
		return nil, fmt.Errorf("%w: the threshold is NaN", ErrNonFinite)
	}
	if o.maxHits < 0 {
		return nil, fmt.Errorf("%w: MaxHits(%d)", ErrInvalidK, o.maxHits)
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	q, err := ix.prepare(ctx, query, input{"query", -1})
	if err != nil {
		return nil, err
	}
	if err := ix.mapped.check(); err != nil {
		return nil, err
	}
	mask, allowed := ix.rid.mask(&o)
	if ix.slab.Rows == 0 || allowed == 0 {
		return []Hit{}, nil
	}
	var found []fallback.Hit
	if err := ix.checkStale(); err != nil {
		return nil, err
	}
	if ix.quant.c != nil {
		if found, err = ix.rangeQuant(ctx, q, threshold, mask); err != nil {
			return nil, err
		}
	}
	if found == nil && ix.onGPU() && !ix.stale {
		// The device scores every row; the host keeps those within the
		// threshold (4 bytes a row come back, as for a k = Len search).
		found, err = ix.rangeSplit(ctx, q, threshold, mask)
		if err = gpuError(err); err != nil {
			found = nil
			if err := ix.afterGPUFailure(ctx, err); err != nil {
				return nil, err
			}
		}
	}
	if found == nil {
		view := ix.view()
		view.Allow = mask
		if found, err = fallback.Range(ctx, view, q, threshold, ix.fallbackMetric(), ix.cfg.Workers); err != nil {
			return nil, err
		}
	}
	if o.maxHits > 0 && len(found) > o.maxHits {
		found = found[:o.maxHits]
	}
	if err := ix.mapped.check(); err != nil {
		return nil, err
	}
	return ix.toHits(found), nil
}

// checkBudget refuses an append of n rows that would take the packed rows
// past MaxHostBytes, or, on a GPU, past MaxDeviceBytes. The caller holds
// wmu.
func (ix *Index) checkBudget(n int) error {
	bytes := int64(ix.slab.Rows+n)*int64(ix.slab.Stride)*4 + ix.quant.bytesFor(ix.slab.Rows+n)
	if max := ix.cfg.Limits.MaxHostBytes; max > 0 && bytes > max {
		return fmt.Errorf("%w: %d vectors would take %d bytes of host memory, over MaxHostBytes %d",
			ErrTooLarge, ix.slab.Rows+n, bytes, max)
	}
	// The device holds the float32 rows, or a compressed precision's codes
	// alone.
	devBytes := int64(ix.slab.Rows+n) * int64(ix.slab.Stride) * 4
	if ix.quant.c != nil {
		devBytes = int64(ix.slab.Rows+n) * int64(ix.cfg.Precision.codeWords(ix.cfg.Dim)) * 4
	}
	if max := ix.cfg.Limits.MaxDeviceBytes; max > 0 && ix.onGPU() && devBytes > max && ix.devCap == 0 {
		err := fmt.Errorf("%w: %d vectors would take %d bytes of device memory, over MaxDeviceBytes %d",
			ErrTooLarge, ix.slab.Rows+n, devBytes, max)
		if ix.cfg.Device == GPU {
			return err
		}
		ix.demote(err) // under Auto the CPU holds them, as when the device is full
	}
	return nil
}

// gpuPiece bounds how long one device submission of a batch runs: a
// submitted pass cannot be interrupted, so a batch is sent in pieces,
// starting at gpuFirstPiece queries and doubling while a piece takes less
// than half of gpuPiece, and ctx is checked between them. A cancelled batch
// returns within about one piece; on a fast GPU the pieces soon hold the
// whole batch.
const (
	gpuPiece      = 50 * time.Millisecond
	gpuFirstPiece = 8
)

// gpuSearch is the device's Search of prepared queries, in pieces (see
// gpuPiece). The caller holds ix.mu.
func (ix *Index) gpuSearch(ctx context.Context, qs [][]float32, k, rows int, mask []uint64, st *gpu.Stages) ([][]fallback.Hit, error) {
	if len(qs) <= gpuFirstPiece {
		return ix.dev.Search(ctx, qs, k, rows, mask, st)
	}
	out := make([][]fallback.Hit, 0, len(qs))
	for lo, n := 0, gpuFirstPiece; lo < len(qs); {
		hi := min(lo+n, len(qs))
		start := time.Now()
		part, err := ix.dev.Search(ctx, qs[lo:hi], k, rows, mask, st)
		if err != nil {
			return nil, err
		}
		out, lo = append(out, part...), hi
		if err := ctx.Err(); err != nil && lo < len(qs) {
			return nil, err
		}
		if time.Since(start) < gpuPiece/2 {
			n *= 2
		}
	}
	return out, nil
}
