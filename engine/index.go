package engine

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine/internal/devices"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/packed"
)

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
	attrs rowAttrs  // each row's metadata and payload (memory.go)
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
	route   *routing // non-nil under Auto on a GPU
	gpuDown atomic.Bool
	whyMu   sync.Mutex
	reason  string
	hint    umbra.Hint

	// batch queues concurrent single searches into batches (batch.go).
	batch coalescer

	// life ends at Close, stopping a GPU recovery in the background
	// (recover.go), which Close waits for (background); recovering is set
	// while one runs, recoveries counts the times the GPU came back, and
	// lastFailure says what failed last.
	life       context.Context
	endLife    context.CancelFunc
	background sync.WaitGroup
	recovering atomic.Bool
	recoveries atomic.Int64
	// listShift is how many times a compressed search's candidate lists
	// (selectSlots) are doubled: raised when a list overflowed, lowered
	// when every list used little of its room (qselect.go, adaptLists).
	listShift   atomic.Int32
	lastFailure string            // guarded by whyMu
	test        *testHooks        // nil outside tests
	bitmaps     slicePool[uint64] // filters' bitmaps, reused by later searches (memory.go)
	wordLists   slicePool[uint32] // their lists of words holding rows

	// devCap, when not 0, is how many rows the device may hold: the rest
	// stay on the CPU (Limits.Overflow, overflow.go).
	devCap int
}

// New creates an empty index. With Device Auto it probes the GPU (once per
// process per adapter) and falls back to the CPU on any failure, recording
// why in Info; with Device GPU a failure is returned instead. ctx bounds the
// probe; a cancelled ctx is an error, never a fallback.
func New(ctx context.Context, cfg Config) (*Index, error) {
	switch {
	case cfg.ReadOnly:
		return nil, fmt.Errorf("%w: ReadOnly: New makes an index without a store (ReadOnly is Open's)", umbra.ErrInvalidConfig)
	case cfg.LogSync != 0:
		return nil, fmt.Errorf("%w: LogSync: New makes an index without a store and log (LogSync is Open's)", umbra.ErrInvalidConfig)
	}
	if slot := devices.From(ctx); slot != nil {
		return newOnDevice(ctx, cfg, slot) // ondevice.New's: a device the caller owns
	}
	return newIndex(ctx, cfg, nil)
}

// emptyIndex is an index holding nothing, with no device side yet.
func emptyIndex(cfg Config) *Index {
	ix := &Index{cfg: cfg, slab: packed.NewSlab(cfg.Dim), rid: newRowIDs(), quant: newQuantRows(cfg)}
	ix.life, ix.endLife = context.WithCancel(context.Background())
	return ix
}

// newIndex is New with the hooks of a test (nil outside tests).
func newIndex(ctx context.Context, cfg Config, test *testHooks) (ix *Index, err error) {
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
	ix.test = test
	if ix.devCap, err = overflowCap(cfg); err != nil {
		return nil, err
	}
	if cfg.Device == CPU {
		return ix, nil
	}
	g, reason, h, err := openDevice(ctx, cfg, test)
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
	if cfg.Device == Auto && (test == nil || !test.softwareAuto) {
		r, err := routingFor(g)
		if err != nil {
			g.Release()
			ix.dev, ix.reason, ix.hint = nil, "GPU calibration failed: "+err.Error(), hintFor(umbra.HintProbeFailed, cfg.adapter())
			return ix, nil
		}
		ix.route = r
	}
	return ix, nil
}

// Dim returns the vector dimension.
func (ix *Index) Dim() int { return ix.cfg.Dim }

// Metric returns the index's metric.
func (ix *Index) Metric() umbra.Metric { return ix.cfg.Metric }

// Len returns the number of stored vectors (deleted ones not counted).
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.rid.live()
}

// Close releases the index's device buffers and stops a GPU recovery in
// the background, returning once it has ended. Later calls return
// ErrClosed; closing twice is harmless, and so is closing a nil *Index
// (what a failed New or Open returns), so `defer ix.Close()` may come
// before the error check.
func (ix *Index) Close() error {
	if ix == nil {
		return nil
	}
	err := ix.close()
	// Not under the locks: an attempt under way takes wmu, finds the index
	// closed and ends.
	ix.background.Wait()
	return err
}

func (ix *Index) close() error {
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
	empty := packed.NewSlab(ix.cfg.Dim)
	packed.Release(ix.slab, empty)
	ix.slab, ix.rid, ix.keys = empty, newRowIDs(), keyMap{}
	exact.ReleaseCodes(ix.quant.c, nil)
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
