package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/meta"

	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/storefile"
)

// DeviceLimits are the limits and tuning ix's device side was planned
// against (zero without one).
func DeviceLimits(ix *Index) gpu.Limits {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.dev == nil {
		return gpu.Limits{}
	}
	return ix.dev.Limits()
}

// OpenOption is a test hook for OpenWith.
type OpenOption = openOption

// OpenWith is Open with test hooks.
func OpenWith(ctx context.Context, path string, cfg Config, opts ...OpenOption) (*Index, error) {
	return open(ctx, path, cfg, opts...)
}

// WithFS makes Open replace the store's files (its checkpoints, its log's
// resets, the removal of a crash's temporary files) through fsys, which a
// test makes fail.
func WithFS(fsys storefile.FS) OpenOption { return func(o *openOptions) { o.fs = fsys } }

// NewWithChunkRows is New with at most rows rows in one device buffer, so
// tests cross chunk boundaries with small data.
// Its hooks are set, so the Set functions below work on it.
func NewWithChunkRows(ctx context.Context, cfg Config, rows int) (*Index, error) {
	return newIndex(ctx, cfg, &testHooks{maxChunkRows: rows})
}

// hooks returns ix's test hooks; ix must have been made with some (a
// constructor of this file, or an Open given one of its options).
func hooks(ix *Index) *testHooks {
	if ix.test == nil {
		panic("engine test: the index was made without test hooks: use NewWithChunkRows or a test option")
	}
	return ix.test
}

// withHooks is an OpenOption that changes the opened index's test hooks.
func withHooks(set func(*testHooks)) OpenOption {
	return func(o *openOptions) {
		if o.test == nil {
			o.test = &testHooks{}
		}
		set(o.test)
	}
}

// Routing is the routing model, for its tests.
type Routing = routing

// The routing model's parts, for its tests.
func PreferGPU(r Routing, bytes int64, nq int) bool        { return preferGPU(&r, bytes, nq) }
func GPUTime(r Routing, bytes int64, nq int) time.Duration { return gpuTime(&r, bytes, nq) }
func CPUTime(r Routing, bytes int64, nq int) time.Duration { return cpuTime(&r, bytes, nq) }

// SetGPUFault makes every wgpu call of ix's device side that can fail ask f
// first, by the name of its step; a non-nil error from f fails that call as
// if the device had. nil removes the hook. ix must have a GPU side. The
// hook stays through a compaction (the device side it swaps in asks f
// too) and goes with a recovery (the device side that brings back has
// none).
func SetGPUFault(ix *Index, f func(step string) error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.dev.SetFault(f)
}

// SetBeforePublish makes every Add of ix call f after its rows are staged
// (packed and, on a GPU, uploaded) and before they are published, with the
// writer lock held and the search lock not.
func SetBeforePublish(ix *Index, f func()) {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	hooks(ix).beforePublish = f
}

// SetBeforeRewrite makes every Upsert of ix that replaces rows on its
// device call f just before it writes them there, with the writer and
// search locks held.
func SetBeforeRewrite(ix *Index, f func()) {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	hooks(ix).beforeRewrite = f
}

// SetBeforeBatch makes every coalesced batch of ix call f with its size
// before it runs. Set it before searches start.
func SetBeforeBatch(ix *Index, f func(n int)) { hooks(ix).beforeBatch = f }

// QueuedSearches is how many searches wait in ix's queue.
func QueuedSearches(ix *Index) int {
	ix.batch.mu.Lock()
	defer ix.batch.mu.Unlock()
	return len(ix.batch.queue)
}

// BatchStats returns how many coalesced batches ix ran and how many
// queries they answered.
func BatchStats(ix *Index) (batches, queries int64) {
	return ix.batch.batches.Load(), ix.batch.queries.Load()
}

// NewSoftwareAuto is New under Device Auto that accepts a software adapter
// and sends every search it can to the GPU, so tests reach Auto's failure
// and recovery paths on lavapipe: recovery first waits after, and fault, when
// set, may fail an attempt.
func NewSoftwareAuto(ctx context.Context, cfg Config, chunkRows int, after time.Duration, fault func(attempt int) error) (*Index, error) {
	cfg.Device = Auto
	return newIndex(ctx, cfg, &testHooks{maxChunkRows: chunkRows, softwareAuto: true, recoverAfter: after, recoverFault: fault})
}

// GPUChildPID is the process ID of an isolated index's GPU child, 0 when
// it has none.
func GPUChildPID(ix *Index) int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if c, ok := ix.dev.(*childDevice); ok {
		return c.cmd.Process.Pid
	}
	return 0
}

// AfterReadOnlyLoad makes a read-only Open call f after it has read the
// store and before it checks that the base file is still the one it read:
// a test checkpoints there to make it start over.
func AfterReadOnlyLoad(f func()) OpenOption {
	return withHooks(func(h *testHooks) { h.afterReadOnlyLoad = f })
}

// NewSharded is New with Config.Shards given equal shares of the rows (not
// shares by measured scan rate, which vary run to run), at most chunkRows
// rows in one device buffer; softwareAuto as NewSoftwareAuto's (recovery
// first waits 20 ms).
func NewSharded(ctx context.Context, cfg Config, chunkRows int, softwareAuto bool) (*Index, error) {
	return newIndex(ctx, cfg, &testHooks{maxChunkRows: chunkRows, equalShards: true, softwareAuto: softwareAuto,
		recoverAfter: 20 * time.Millisecond})
}

// SetShardFault is SetGPUFault for shard i of an index with Config.Shards
// only.
func SetShardFault(ix *Index, i int, f func(step string) error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.dev.(*shards).parts[i].dev.SetFault(f)
}

// Mapped reports whether ix's rows are read from a mapping of its store's
// base file.
func Mapped(ix *Index) bool { return ix.mapped != nil && ix.mapped.live.Load() }

// SkipMappedStat makes the opened index trust its mapped file without
// checking its size and time, so a truncation reaches the rows and faults.
func SkipMappedStat() OpenOption {
	return withHooks(func(h *testHooks) { h.skipMappedStat = true })
}

// SetSumsPiece sets the bytes of device sums a compressed GPU search of ix
// holds at once (pieces of a batch).
func SetSumsPiece(ix *Index, n int) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	hooks(ix).sumsPieceBytes = n
}

// SetQuantCap makes a compressed GPU search of ix select its candidates on
// the device whenever it can, with n slots a query (0: the default rule).
func SetQuantCap(ix *Index, n int) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	hooks(ix).quantCap = n
}

// StartGPUChild starts a GPU child of this test binary as an isolated
// index does, asking for an adapter named name, and releases it; the child
// has greetingTimeout to greet. It forgets an earlier child's failed
// handshake first, and this one's after.
func StartGPUChild(ctx context.Context, name string, greetingTimeout time.Duration) error {
	forget := func() {
		unserved.Lock()
		unserved.err = nil
		unserved.Unlock()
	}
	forget()
	defer forget()
	c, err := startChild(ctx, childHello{Dim: 4, Adapter: AdapterSelect{Name: name}, ProbeTimeout: 10 * time.Second}, greetingTimeout)
	if err != nil {
		return err
	}
	c.Release()
	return nil
}

// Recovering reports whether a GPU recovery of ix runs in the background.
func Recovering(ix *Index) bool { return ix.recovering.Load() }

// ListShift is how many times ix's compressed candidate lists are doubled.
func ListShift(ix *Index) int { return int(ix.listShift.Load()) }

// Per-ID accessors for the tests: a program reads rows through Get (one
// call for many rows, with their keys, vectors, metadata and payloads).

// Vector returns a copy of the vector stored under id (under Cosine, the
// unit vector the index stores), or ErrNotFound. Get returns many rows'
// vectors at once, with their metadata and payloads.
func (ix *Index) Vector(id uint64) (v []float32, err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return nil, umbra.ErrClosed
	}
	if err := ix.mapped.check(); err != nil {
		return nil, err
	}
	row, ok := ix.rid.rowOf[id]
	if !ok {
		return nil, fmt.Errorf("%w: ID %d", umbra.ErrNotFound, id)
	}
	v = append([]float32(nil), ix.slab.Row(row)...)
	if err := ix.mapped.check(); err != nil {
		return nil, err
	}
	return v, nil
}

// IDs returns every stored ID in ascending order.
func (ix *Index) IDs() []uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.rid.liveIDs()
}

// KeyOf returns the key of the vector stored under id, if it has one.
func (ix *Index) KeyOf(id uint64) (string, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	key, ok := ix.keys.key[id]
	return key, ok
}

// Meta returns the metadata stored with id (nil when the row has none), or
// ErrNotFound.
func (ix *Index) Meta(id uint64) (meta.Fields, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	row, err := ix.liveRow(id)
	if err != nil {
		return nil, err
	}
	if ix.attrs.meta == nil || row >= ix.attrs.meta.Len() {
		return nil, nil
	}
	return ix.attrs.meta.Row(row), nil
}

// Payload returns a copy of the payload stored with id (nil when the row
// has none), or ErrNotFound.
func (ix *Index) Payload(id uint64) ([]byte, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	row, err := ix.liveRow(id)
	if err != nil {
		return nil, err
	}
	if row >= len(ix.attrs.payloads) {
		return nil, nil
	}
	return slices.Clone(ix.attrs.payloads[row]), nil
}

// liveRow is the row of a stored id: ErrClosed, or ErrNotFound naming it.
// The caller holds ix.mu.
func (ix *Index) liveRow(id uint64) (int, error) {
	if ix.closed {
		return 0, umbra.ErrClosed
	}
	row, ok := ix.rid.rowOf[id]
	if !ok {
		return 0, fmt.Errorf("%w: ID %d", umbra.ErrNotFound, id)
	}
	return row, nil
}
