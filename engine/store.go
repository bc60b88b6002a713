package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/storefile"
)

// A store is an index kept in files: a base file at its path (the rows as
// the device buffer holds them, IDs, tombstones and keys, each section with
// a CRC-32C), a log beside it (path+".log") that every acknowledged change
// reaches before the call returns, and a lock (path+".lock") that keeps a
// second writer out. internal/storefile/FORMAT.md specifies the bytes.

// store is an open store's files. The caller of its methods holds wmu.
//
// Every write is appended to log, which extends the base of generation
// gen. When the log cannot take a record (a failed write or fsync, or a
// checkpoint that could not create the next log), broken says why, and no
// write is acknowledged until repair succeeds: a later write, Checkpoint or
// Close repairs it first, so once space returns writes go on. The index
// holds exactly the acknowledged changes (a failed write undoes its own),
// which is what a repair makes durable.
type store struct {
	path   string // the real file: symbolic links resolved at Open
	fs     storefile.FS
	gen    uint64
	log    *storefile.Log
	policy storefile.SyncPolicy
	unlock func() error

	broken error
	// baseHolds says the base of generation gen, durably in place, holds
	// the index as it is (a checkpoint wrote it and only the log's reset
	// failed), so a repair need only start an empty log; otherwise it
	// writes a new base from the index.
	baseHolds bool
}

// openOption changes how open opens a store: test hooks only
// (export_test.go); what a program chooses is in Config.
type openOption func(*openOptions)

type openOptions struct {
	// fs is what the store's files are replaced through: storefile.OS
	// unless a test's option (export_test.go) makes steps fail.
	fs storefile.FS
	// test is the index's testHooks, nil outside tests.
	test *testHooks
}

// Open opens the store at path, or creates an empty one there from cfg
// when no file exists, and returns its index: every later Add, Upsert and
// Delete is written to the store's log before the call returns (fsynced
// per call, or as Config.LogSync says), Checkpoint folds the log into the
// base file, and Close releases the store. With Config.ReadOnly the store
// is read and never written (see Config.ReadOnly). Everything Open is told is in
// cfg. An existing store gives Dim, Metric and
// Precision: a zero field of cfg takes the store's, another must equal it
// (ErrInvalidConfig), so a Dot config never silently opens a cosine store
// (Cosine and F32, the zero values, cannot be told from "the store's").
// Its log is replayed up to its last complete record, and the temporary
// files a writer killed mid-write left beside it are removed. A second Open of the same store, in
// this process or another, fails with ErrLocked; a damaged file with
// ErrBadStore naming the section.
func Open(ctx context.Context, path string, cfg Config) (*Index, error) {
	return open(ctx, path, cfg)
}

// open is Open, with test hooks.
func open(ctx context.Context, path string, cfg Config, opts ...openOption) (ix *Index, err error) {
	o := openOptions{fs: storefile.OS}
	for _, f := range opts {
		f(&o)
	}
	if cfg.LogSync < 0 {
		return nil, fmt.Errorf("%w: LogSync of %v: a sync interval must not be negative", umbra.ErrInvalidConfig, cfg.LogSync)
	}
	if cfg.ReadOnly {
		if cfg.LogSync != 0 {
			return nil, fmt.Errorf("%w: LogSync with ReadOnly: a read-only store writes no log", umbra.ErrInvalidConfig)
		}
		return openReadOnly(ctx, path, cfg, o)
	}
	// The log, the lock and every temporary file live beside the real
	// file, so a store opened through a symbolic link is the same store.
	if path, err = storefile.Resolve(path); err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	// A file that is not a store is refused before its lock is made, so
	// a failed Open leaves nothing behind.
	if _, err := storefile.PeekBase(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, storeError(path, err)
	}
	unlock, err := storefile.Lock(path)
	if err != nil {
		if errors.Is(err, storefile.ErrLocked) {
			return nil, fmt.Errorf("%w: %v", ErrLocked, err)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	// What a writer killed mid-checkpoint left behind: its temporary
	// files. Every write of this store's files is made under the lock just
	// taken, so none of them belongs to a live writer; readers
	// (OpenReadOnly) take no lock and never come here. Best effort: a
	// leftover costs only space, and a directory that cannot be read fails
	// the load below anyway.
	_ = storefile.RemoveTemps(o.fs, path)
	ix, gen, err := loadStore(ctx, path, cfg, o)
	if err != nil {
		return nil, err
	}
	policy := storefile.SyncEveryCall
	if cfg.LogSync > 0 {
		policy = storefile.SyncInterval(cfg.LogSync)
	}
	log, err := storefile.OpenLog(o.fs, storefile.LogPath(path), ix.cfg.Dim, gen, policy)
	if err != nil {
		ix.Close()
		return nil, storeError(storefile.LogPath(path), err)
	}
	ix.store = &store{path: path, fs: o.fs, gen: gen, log: log, policy: policy, unlock: unlock}
	return ix, nil
}

// loadStore reads the store at path into a new index: the base file, then
// its log up to the last complete record. Unless o is read-only, a missing
// store is created empty from cfg, through o.fs (the caller holds the
// lock). An index on the CPU path maps the base's rows instead of reading
// them (mapped.go).
func loadStore(ctx context.Context, path string, cfg Config, o openOptions) (ix *Index, gen uint64, err error) {
	create := !cfg.ReadOnly
	head, err := storefile.PeekBase(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && create:
		if ix, err = newIndex(ctx, cfg, o.test); err != nil {
			return nil, 0, err
		}
		if gen, err = storefile.Checkpoint(o.fs, path, ix.snapshot()); err != nil {
			ix.Close()
			return nil, 0, fmt.Errorf("create store %s: %w", path, err)
		}
		return ix, gen, nil
	case err != nil:
		return nil, 0, storeError(path, err)
	}
	// Dim, Metric and Precision are the store's: a zero field takes the
	// store's value, any other must equal it.
	if cfg.Dim != 0 && cfg.Dim != head.Dim {
		return nil, 0, fmt.Errorf("%w: the store %s holds dimension %d, Config.Dim is %d", umbra.ErrInvalidConfig, path, head.Dim, cfg.Dim)
	}
	if m := umbra.Metric(head.Metric); cfg.Metric != 0 && cfg.Metric != m {
		return nil, 0, fmt.Errorf("%w: the store %s ranks by %v, Config.Metric is %v", umbra.ErrInvalidConfig, path, m, cfg.Metric)
	}
	if p := umbra.Precision(head.Precision); cfg.Precision != 0 && cfg.Precision != p {
		return nil, 0, fmt.Errorf("%w: the store %s holds precision %v, Config.Precision is %v", umbra.ErrInvalidConfig, path, p, cfg.Precision)
	}
	cfg.Dim, cfg.Metric, cfg.Precision = head.Dim, umbra.Metric(head.Metric), umbra.Precision(head.Precision)
	if err := cfg.validate(); err != nil {
		return nil, 0, fmt.Errorf("%w (store %s)", err, path)
	}
	if head.Stride != packed.StrideFor(head.Dim) {
		return nil, 0, fmt.Errorf("%w: %s: rows of stride %d for dimension %d", ErrBadStore, path, head.Stride, head.Dim)
	}
	if ix, err = newIndex(ctx, cfg, o.test); err != nil {
		return nil, 0, err
	}
	if err := ix.loadFrom(ctx, path, &gen); err != nil {
		ix.Close()
		return nil, 0, err
	}
	return ix, gen, nil
}

// loadFrom fills the new index ix from the store at path, mapping the
// base's rows on the CPU path and reading them otherwise, and sets *gen to
// the base's generation. A fault in the mapping while the rows are read
// (the file truncated meanwhile) is an error, not a crash.
func (ix *Index) loadFrom(ctx context.Context, path string, gen *uint64) (err error) {
	var snap *storefile.Snapshot
	if ix.dev == nil {
		m, err := storefile.MapBase(path)
		if err != nil {
			return storeError(path, err)
		}
		snap, *gen = m.Snapshot, m.Generation
		if m.Mapped() {
			ix.mapped = &mapping{base: m, path: path, test: ix.test}
			ix.mapped.live.Store(true)
		}
	} else if snap, *gen, err = storefile.ReadBase(path); err != nil {
		return storeError(path, err)
	}
	defer ix.recoverInto(&err, ix.watchFaults())
	// The header was read apart from the rest: a store replaced meanwhile
	// by one of another shape is refused rather than read wrongly.
	if snap.Dim != ix.cfg.Dim || umbra.Metric(snap.Metric) != ix.cfg.Metric || umbra.Precision(snap.Precision) != ix.cfg.Precision {
		return fmt.Errorf("%w: %s was replaced by a store of another dimension, metric or precision while it was opened", ErrBadStore, path)
	}
	if err := ix.load(ctx, snap); err != nil {
		return err
	}
	_, _, err = storefile.ReplayLog(storefile.LogPath(path), snap.Dim, *gen, func(r storefile.Record) error {
		return ix.replay(ctx, r)
	})
	if err != nil {
		return storeError(storefile.LogPath(path), err)
	}
	return ix.mapped.check()
}

// openReadOnly is Open with Config.ReadOnly.
func openReadOnly(ctx context.Context, path string, cfg Config, o openOptions) (*Index, error) {
	path, err := storefile.Resolve(path)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	const tries = 5
	for range tries {
		ix, gen, err := loadStore(ctx, path, cfg, o)
		if err != nil {
			return nil, err
		}
		if o.test != nil && o.test.afterReadOnlyLoad != nil {
			o.test.afterReadOnlyLoad()
		}
		now, err := storefile.BaseGeneration(path)
		if err == nil && now == gen {
			ix.readOnly = path
			return ix, nil
		}
		ix.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, storeError(path, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: %s was checkpointed %d times while it was being read", ErrLocked, path, tries)
}

// writable refuses a write to a read-only index. readOnly is set before the
// index is returned and never changes, so no lock is needed.
func (ix *Index) writable() error {
	if ix.readOnly != "" {
		return fmt.Errorf("%w: %s was opened with ReadOnly; Open it without to write", ErrReadOnly, ix.readOnly)
	}
	return ix.mapped.check()
}

// storeError wraps a file-layer error: damage is ErrBadStore.
func storeError(path string, err error) error {
	var fe *storefile.FormatError
	if errors.As(err, &fe) {
		// The file layer's error names the file, the section and the
		// byte: kept whole, and as a value, not flattened to text.
		return fmt.Errorf("%w: %w", ErrBadStore, err)
	}
	for _, bad := range []error{storefile.ErrMagic, storefile.ErrVersion, storefile.ErrTruncated, storefile.ErrCorrupt, storefile.ErrUnsupported} {
		if errors.Is(err, bad) {
			return fmt.Errorf("%w: %s: %v", ErrBadStore, path, err)
		}
	}
	return fmt.Errorf("store %s: %w", path, err)
}

// snapshot describes the index for a base file. The caller holds wmu (or
// the index is not yet shared); the rows are the slab's own, not a copy.
func (ix *Index) snapshot() *storefile.Snapshot {
	s := &storefile.Snapshot{
		Dim: ix.cfg.Dim, Stride: ix.slab.Stride, Metric: uint8(ix.cfg.Metric), Precision: uint8(ix.cfg.Precision),
		NextID: ix.rid.nextID, IDs: ix.rid.ids, Rows: ix.slab.Data[:ix.slab.Rows*ix.slab.Stride],
	}
	if ix.rid.nDead > 0 {
		s.Deleted = ix.rid.dead[:(len(ix.rid.ids)+63)/64]
	}
	if len(ix.keys.key) > 0 {
		s.Keys = ix.keys.key
	}
	if mi := ix.attrs.meta; mi != nil {
		s.Schema = mi.MarshalSchema()
		s.Meta = make([][]byte, len(ix.rid.ids))
		for row := range s.Meta {
			s.Meta[row] = mi.EncodedRow(row)
		}
	}
	if ix.attrs.payloads != nil {
		s.Payloads = ix.attrs.payloads
	}
	if ix.mapped != nil && ix.mapped.live.Load() {
		// The rows come from the mapping: a file changed under it while
		// they were copied must not become the new base.
		s.Verify = ix.mapped.check
	}
	return s
}

// load fills a new, empty index from a base file's snapshot.
func (ix *Index) load(ctx context.Context, s *storefile.Snapshot) error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.slab.Data, ix.slab.Rows = s.Rows, len(s.IDs)
	ix.quant.sync(ix.slab)
	// A deleted row may share its ID with a live one added after the
	// delete: only live rows enter the ID map, and two live rows with one
	// ID are damage.
	rid := &ix.rid
	rid.ids = append(rid.ids, s.IDs...)
	rid.checkOrder() // a store of increasing IDs needs no tie re-ranking
	rid.growDead()
	for row, id := range s.IDs {
		if s.IsDeleted(row) {
			rid.dead[row>>6] |= 1 << (uint(row) & 63)
			rid.nDead++
			continue
		}
		if other, ok := rid.rowOf[id]; ok {
			return fmt.Errorf("%w: rows %d and %d are both live under ID %d", ErrBadStore, other, row, id)
		}
		rid.rowOf[id] = row
		rid.bump(id)
	}
	rid.nextID = max(rid.nextID, s.NextID)
	for id, key := range s.Keys {
		if _, ok := ix.rid.rowOf[id]; ok {
			ix.keys.set(key, id)
		}
	}
	if err := ix.loadAttrs(s.Schema, s.Meta, s.Payloads); err != nil {
		return err
	}
	if ix.onGPU() && ix.slab.Rows > 0 {
		if err := ix.upload(ctx, 0, nil, progressUpload(ctx)); err != nil {
			// A cancelled Open opens nothing; it is no failure of the
			// device.
			if cancelled(ctx, err) || ix.cfg.Device == GPU {
				return err
			}
			ix.demote(err)
		}
	}
	if ix.dev != nil && rid.nDead > 0 {
		ix.dev.MarkDead(rid.deadRows())
	}
	return nil
}

func progressUpload(ctx context.Context) func(done, total int) {
	report := progressFrom(ctx)
	return func(done, total int) { report("upload", done, total) }
}

// replay applies one logged change while a store opens.
func (ix *Index) replay(ctx context.Context, r storefile.Record) error {
	dim := ix.cfg.Dim
	rows := func() [][]float32 {
		vs := make([][]float32, len(r.IDs))
		for i := range vs {
			vs[i] = r.Rows[i*dim : (i+1)*dim]
		}
		return vs
	}
	var err error
	switch r.Op {
	case storefile.OpAdd, storefile.OpUpsert, storefile.OpUpsertKeys, storefile.OpWrite:
		// Rows were logged as stored (normalised under cosine already).
		var a *callAttrs
		if a, err = ix.loggedAttrs(r); err != nil {
			break
		}
		if err = ix.upsertStored(ctx, r.IDs, rows(), a); err == nil && r.Keys != nil {
			ix.nameIDs(r.Keys, r.IDs)
		}
	case storefile.OpDelete:
		err = ix.Delete(ctx, umbra.WithIDs(r.IDs...))
	case storefile.OpSetKey:
		ix.nameIDs(r.Keys, r.IDs)
	default:
		err = fmt.Errorf("unknown operation %v", r.Op)
	}
	if err != nil {
		return fmt.Errorf("%w: replaying a logged %v of %d IDs: %v", ErrBadStore, r.Op, len(r.IDs), err)
	}
	return nil
}

// logged writes rec to the store's log, if the index has one. The caller
// holds wmu; when it fails the caller undoes the change it logs.
func (ix *Index) logged(rec storefile.Record) error {
	st := ix.store
	if st == nil || len(rec.IDs) == 0 {
		// A call that changes nothing (no vectors) has nothing to log, on
		// a store as in memory.
		return nil
	}
	if st.broken != nil {
		return st.refusal()
	}
	if err := st.log.Append(rec); err != nil {
		if errors.Is(err, storefile.ErrClosed) {
			// The log's tail is unknown now: nothing more is appended
			// to it, and the next write repairs the store first.
			st.broken, st.baseHolds = err, false
		}
		return fmt.Errorf("writing the store's log: %w", err)
	}
	return nil
}

// refusal is the error of a write that a broken store cannot take.
func (st *store) refusal() error {
	return fmt.Errorf("store %s takes no writes until its log is repaired (the next write, Checkpoint or Close tries again): %w", st.path, st.broken)
}

// repairStore makes a broken store take writes again, if it can: an empty
// log beside a base that holds the index, or else a checkpoint of the
// index, which holds every acknowledged change. The caller holds wmu, not
// mu. A store that is not broken is left alone.
func (ix *Index) repairStore() error {
	st := ix.store
	if st == nil || st.broken == nil {
		return nil
	}
	if st.baseHolds {
		log, err := storefile.OpenLog(st.fs, storefile.LogPath(st.path), ix.cfg.Dim, st.gen, st.policy)
		if err != nil {
			return fmt.Errorf("store %s: starting its log again: %w (it broke on: %v)", st.path, err, st.broken)
		}
		st.log, st.broken, st.baseHolds = log, nil, false
		return nil
	}
	if err := ix.checkpointLocked(); err != nil {
		return fmt.Errorf("store %s: rewriting it to repair its log: %w", st.path, err)
	}
	return nil
}

// Checkpoint folds the store's log into a new base file, so the next Open
// reads one file and replays nothing. A crash at any point leaves the old
// or the new state, whole. An index without a store (made by New) has
// nothing to fold: Checkpoint on it is umbra.ErrInvalidConfig, so that a
// program that meant to make its rows durable learns they are not.
func (ix *Index) Checkpoint(ctx context.Context) (err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	if err := ix.writable(); err != nil {
		return err
	}
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	if ix.store == nil {
		return fmt.Errorf("%w: Checkpoint on an index without a store (made by New, not Open): its rows live in memory only", umbra.ErrInvalidConfig)
	}
	return ix.checkpointLocked()
}

// checkpointLocked writes the index as a new base and starts an empty log
// after it. Whichever step fails, the store is left in one state that the
// next write, Checkpoint and Open agree on:
//   - the new base not in place (the old base is read back to be sure): the
//     old log goes on, if it was closed cleanly;
//   - the new base durably in place but no new log: the old log is stale
//     (Open ignores it), so nothing may be appended to it; the store is
//     broken until an empty log of the new generation is made;
//   - anything else (the rename may not be durable, the old log's fsync
//     failed): broken until a checkpoint succeeds.
//
// A broken store refuses writes rather than acknowledge one that a reopen
// would not find.
func (ix *Index) checkpointLocked() error {
	st := ix.store
	// The old log's close fsyncs it. If that fails its tail is unknown, but
	// the checkpoint still goes on: the new base holds every acknowledged
	// change.
	closeErr := st.log.Close()
	if closeErr != nil && st.broken == nil {
		st.broken, st.baseHolds = closeErr, false
	}
	gen, err := func() (gen uint64, err error) {
		ix.mu.RLock()
		defer ix.mu.RUnlock()
		// A fault in mapped rows (recoverInto's in Checkpoint would
		// leave the log closed) is an error here, so the log reopens.
		defer func() {
			if r := recover(); r != nil {
				if err = ix.mapped.faultErr(r); err == nil {
					err = fmt.Errorf("%w: %v", ErrGPU, r)
				}
			}
		}()
		return storefile.Checkpoint(st.fs, st.path, ix.snapshot())
	}()
	switch {
	case err == nil:
		st.gen = gen
		log, oerr := storefile.OpenLog(st.fs, storefile.LogPath(st.path), ix.cfg.Dim, gen, st.policy)
		if oerr != nil {
			st.broken, st.baseHolds = oerr, true
			return fmt.Errorf("checkpoint %s: base written, opening its log: %w", st.path, oerr)
		}
		st.log, st.broken, st.baseHolds = log, nil, false
		return nil
	case gen != 0:
		// The base is durably in place; the log was not reset.
		st.gen, st.broken, st.baseHolds = gen, err, true
		return fmt.Errorf("checkpoint %s: %w", st.path, err)
	}
	if now, perr := storefile.BaseGeneration(st.path); perr != nil || now != st.gen {
		// The rename happened but is not known durable, or the base
		// cannot be read back: only a whole checkpoint settles it.
		st.broken, st.baseHolds = err, false
		return fmt.Errorf("checkpoint %s: %w", st.path, err)
	}
	if st.broken == nil {
		// The old base is in place and its log was closed cleanly:
		// writes go on in it.
		log, oerr := storefile.OpenLog(st.fs, storefile.LogPath(st.path), ix.cfg.Dim, st.gen, st.policy)
		if oerr != nil {
			st.broken = oerr
		} else {
			st.log = log
		}
	}
	return fmt.Errorf("checkpoint %s: %w", st.path, err)
}

// Save writes the index to path as a store's base file, atomically (a
// temporary file, fsync, rename, fsync of the directory): Open(path) then
// gives the same vectors, IDs and keys. Saving an open store to its own
// path is Checkpoint.
func (ix *Index) Save(ctx context.Context, path string) (err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	// Saved through a symbolic link, the real file is replaced (and its
	// lock taken), not the link.
	if path, err = storefile.Resolve(path); err != nil {
		return fmt.Errorf("save: %w", err)
	}
	if ix.readOnly == path {
		return ix.writable()
	}
	if err := ix.mapped.check(); err != nil {
		return err
	}
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	if ix.store != nil && ix.store.path == path {
		return ix.checkpointLocked()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Another process's open store at path keeps its lock: refuse to
	// write under it.
	unlock, err := storefile.Lock(path)
	if err != nil {
		if errors.Is(err, storefile.ErrLocked) {
			return fmt.Errorf("%w: %v", ErrLocked, err)
		}
		return fmt.Errorf("save %s: %w", path, err)
	}
	defer unlock()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return umbra.ErrClosed
	}
	if _, err := storefile.WriteBase(storefile.OS, path, ix.snapshot()); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	// A log left beside path by an older store there belongs to another
	// generation; Open ignores it, and removing it keeps that obvious.
	if err := os.Remove(storefile.LogPath(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// closeStore syncs and closes the log and releases the lock. repairErr is
// why a broken store could not be repaired before (Close tries).
func (ix *Index) closeStore(repairErr error) error {
	if ix.store == nil {
		return nil
	}
	err := repairErr
	if cerr := ix.store.log.Close(); err == nil && ix.store.broken == nil {
		err = cerr
	}
	if uerr := ix.store.unlock(); err == nil {
		err = uerr
	}
	ix.store = nil
	return err
}
