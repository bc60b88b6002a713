package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/storefile"
)

// upsertStored is Upsert of rows exactly as the index stores them (a
// replayed log), not normalised again.
func (ix *Index) upsertStored(ctx context.Context, ids []uint64, rows [][]float32, a *callAttrs) error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	return ix.upsertLocked(ctx, ids, rows, nil, a, true)
}

// upsertLocked is Upsert with wmu held. keys, when not nil, name the IDs
// and are logged in the same record; a (nil: none) gives the rows
// metadata and payloads; raw stores rows without normalising.
// It logs one record for the whole call and undoes everything if any step
// fails, so a call is applied (and logged) whole or not at all.
//
// Every row is checked before anything a search reads changes: the new
// IDs' rows are checked and packed beside the published ones by
// stageAppend (outside ix.mu), and the replaced rows are checked and
// packed aside, then swapped into place under ix.mu (the aside buffer then
// holds what to undo). When anything is refused, the call's vectors are
// checked again in order so the error names the first bad one, as it
// always has.
func (ix *Index) upsertLocked(ctx context.Context, ids []uint64, vectors [][]float32, keys []string, a *callAttrs, raw bool) error {
	start := time.Now()
	if ix.closed {
		return umbra.ErrClosed
	}
	if a == nil {
		a = &callAttrs{}
	}
	if err := a.fits(len(ids)); err != nil {
		return err
	}
	if a.given() && !raw { // a replayed write was checked when it was made
		if err := ix.checkAttrs(a); err != nil {
			return err
		}
	}
	if err := ix.rid.checkNew(ids, true); err != nil {
		return ix.firstBad(vectors, err)
	}
	// Writers are excluded (wmu), so the ID map holds still while read.
	var rows, replaced, added []int // slab rows replaced; their and the new vectors' indices in the call
	var newIDs []uint64
	if len(ix.rid.rowOf) == 0 {
		// Nothing stored: every ID is new, and the call's own slices
		// serve (no lookups, no copies).
		newIDs = ids
		added = make([]int, len(ids))
		for i := range added {
			added[i] = i
		}
	} else {
		for i, id := range ids {
			if row, ok := ix.rid.rowOf[id]; ok {
				rows, replaced = append(rows, row), append(replaced, i)
			} else {
				newIDs, added = append(newIDs, id), append(added, i)
			}
		}
	}
	// The attributes of the added rows and of the replaced ones.
	attrs := attrSplit{add: a.pick(added), set: a.pick(replaced), rows: rows}
	mode := ix.packMode(raw)
	newRow := func(j int) []float32 { return vectors[added[j]] }
	oldRow := func(j int) []float32 { return vectors[replaced[j]] }
	t := traceFrom(ctx)
	lapWrite(t, stageAssign, &start)
	if t != nil {
		t.Rows += int64(len(ids))
	}
	if ix.store == nil && ix.dev == nil {
		return ix.upsertInMemory(ctx, start, newIDs, rows, newRow, oldRow, vectors, raw, &attrs)
	}
	stride := ix.slab.Stride
	aside := make([]float32, len(rows)*stride)
	if err := ix.slab.PackRows(aside, len(rows), oldRow, mode); err != nil {
		return ix.firstBad(vectors, err)
	}
	lapWrite(t, stagePack, &start)
	var p *appended
	if len(newIDs) > 0 {
		var err error
		// newIDs passed checkNew above and none is stored.
		if p, err = ix.stageAppend(ctx, start, newIDs, true, len(added), ix.packer(ctx, len(added), raw, newRow), false); err != nil {
			return ix.firstBad(vectors, err)
		}
	}
	mark := time.Now()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	undoAttrs, err := ix.applyAttrs(p, &attrs)
	if err != nil {
		return err
	}
	// Publish first: the appended slab may be a copy of the rows, and the
	// replaced rows must change in the slab searches will read.
	if p != nil {
		ix.publish(p)
	}
	// swapRows exchanges the replaced rows with aside: the new rows go
	// in, the old ones (what undo restores) come out; their compressed
	// copies follow.
	tmp := make([]float32, stride)
	swapRows := func() {
		for j, row := range rows {
			a, b := aside[j*stride:(j+1)*stride], ix.slab.PaddedRow(row)
			copy(tmp, b)
			copy(b, a)
			copy(a, tmp)
			ix.quant.set(ix.slab, row)
		}
	}
	swapRows()
	lapWrite(t, stagePublish, &mark)
	// undo restores the replaced rows and drops the appended ones, on the
	// host and on the device, whatever ctx says by now (a call cancelled
	// midway must leave no row half-written). A failed rewrite of this call
	// wrote none but the replaced rows, so those are written again; rows
	// already stale before it are all uploaded again. If even that fails
	// the rows stay marked stale: under Device GPU searches say so, under
	// Auto the CPU takes over.
	staleBefore := ix.stale
	undo := func() {
		swapRows()
		undoAttrs()
		if p != nil {
			ix.unpublish(p)
		}
		if !ix.onGPU() {
			return
		}
		if !staleBefore {
			ix.stale = false
		}
		if err := ix.rewrite(context.WithoutCancel(ctx), rows); err != nil && ix.cfg.Device != GPU {
			ix.demote(err)
		}
	}
	if len(rows) > 0 && ix.onGPU() {
		if ix.test != nil && ix.test.beforeRewrite != nil {
			ix.test.beforeRewrite()
		}
		if err := ix.rewrite(ctx, rows); err != nil {
			// A cancelled call stores nothing, as a cancelled Add does:
			// the caller gave up, the device did not fail and keeps the
			// searches. A failed write under Device GPU is undone too;
			// under Auto the host rows hold the upsert and the CPU serves.
			if cancelled(ctx, err) || ix.cfg.Device == GPU {
				undo()
				return err
			}
			ix.demote(err)
		}
		if t != nil {
			mark = lap(&t.Upload, mark)
		}
	}
	rec := storefile.Record{Op: storefile.OpUpsert, IDs: ids, Rows: ix.storedRows(ids), Keys: keys}
	if keys != nil {
		rec.Op = storefile.OpUpsertKeys
	}
	a.logInto(&rec, true)
	if err := ix.logged(rec); err != nil {
		undo()
		return err
	}
	if ix.store != nil {
		lapWrite(t, stageLog, &mark)
	}
	return nil
}

// upsertInMemory is upsertLocked for an index with neither a store nor a
// device, where nothing can fail once the rows are checked: the replaced
// rows are checked first (nothing written), the new ones staged (all or
// nothing), and only then, under ix.mu, are the new rows published and the
// replaced rows packed straight into their places — no copy of the old
// rows is kept to undo.
func (ix *Index) upsertInMemory(ctx context.Context, start time.Time, newIDs []uint64, rows []int, newRow, oldRow func(j int) []float32, vectors [][]float32, raw bool, attrs *attrSplit) error {
	// The replaced rows are checked, then written in place under ix.mu
	// (searches wait for it), each on every core.
	mode, stride, workers := ix.packMode(raw), ix.slab.Stride, ix.packWorkers()
	var inv []float64
	if mode.Normalize {
		inv = make([]float64, len(rows))
	}
	err := splitRows(len(rows), stride, workers, func(a, b int) error {
		part, err := ix.slab.CheckRows(b-a, func(j int) []float32 { return oldRow(a + j) }, mode)
		if inv != nil {
			copy(inv[a:b], part)
		}
		return err
	})
	if err != nil {
		return ix.firstBad(vectors, err)
	}
	t := traceFrom(ctx)
	lapWrite(t, stagePack, &start)
	var p *appended
	if len(newIDs) > 0 {
		var err error
		if p, err = ix.stageAppend(ctx, start, newIDs, true, len(newIDs), ix.packer(ctx, len(newIDs), raw, newRow), false); err != nil {
			return ix.firstBad(vectors, err)
		}
	}
	mark := time.Now()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if _, err := ix.applyAttrs(p, attrs); err != nil {
		return err
	}
	if p != nil {
		ix.publish(p)
	}
	// Checked above: only a fault of a mapped row can fail it.
	if err := splitRows(len(rows), stride, workers, func(a, b int) error {
		var part []float64
		if inv != nil {
			part = inv[a:b]
		}
		ix.slab.SetRowsScaled(rows[a:b], func(j int) []float32 { return oldRow(a + j) }, part)
		return nil
	}); err != nil {
		return err
	}
	for _, row := range rows {
		ix.quant.set(ix.slab, row)
	}
	lapWrite(t, stagePublish, &mark)
	return nil
}

// refusal is the error of a write whose IDs or keys are refused with err:
// the error of its metadata or payloads, or else of its first bad row, if
// it has one, for those come first whatever is wrong with the names. The
// caller holds wmu.
func (ix *Index) refusal(vectors [][]float32, a *callAttrs, err error) error {
	if a != nil && a.given() {
		if aerr := ix.checkAttrs(a); aerr != nil {
			return aerr
		}
	}
	return ix.firstBad(vectors, err)
}

// firstBad returns the error of the first of vectors that checkVector
// refuses, or err when it refuses none: a refused call names its first bad
// vector whichever step noticed.
func (ix *Index) firstBad(vectors [][]float32, err error) error {
	for i, v := range vectors {
		if verr := ix.checkVector(v, input{"vector", i}); verr != nil {
			return verr
		}
	}
	return err
}

// storedRows returns the rows of ids as the slab holds them, without
// padding, one after another: what the log records. The caller holds mu.
func (ix *Index) storedRows(ids []uint64) []float32 {
	if ix.store == nil {
		return nil
	}
	// Rows stored one after another without padding (the appended rows
	// of an Add, when Dim is a multiple of 4) are what the log records
	// already: hand them over without a copy.
	if s := ix.slab; s.Stride == s.Dim && len(ids) > 0 {
		first := ix.rid.rowOf[ids[0]]
		consecutive := true
		for i, id := range ids {
			if ix.rid.rowOf[id] != first+i {
				consecutive = false
				break
			}
		}
		if consecutive {
			return s.Data[first*s.Stride : (first+len(ids))*s.Stride : (first+len(ids))*s.Stride]
		}
	}
	out := make([]float32, 0, len(ids)*ix.cfg.Dim)
	for _, id := range ids {
		out = append(out, ix.slab.Row(ix.rid.rowOf[id])...)
	}
	return out
}

// rewrite writes replaced rows to the device; on failure the resident rows
// are marked stale so no search trusts them until they are uploaded again.
// The caller holds ix.mu.
func (ix *Index) rewrite(ctx context.Context, rows []int) error {
	if ix.stale {
		return ix.upload(ctx, 0, nil, nil)
	}
	// Rows past the device's (Limits.Overflow) live on the CPU only.
	onDevice := rows
	if ix.devCap > 0 {
		onDevice = nil
		for _, r := range rows {
			if r < ix.devCap {
				onDevice = append(onDevice, r)
			}
		}
	}
	if len(onDevice) == 0 {
		return nil
	}
	if err := gpuError(ix.dev.Rewrite(ctx, ix.deviceView(ix.slab, ix.quant.c), onDevice)); err != nil {
		ix.stale = true
		return err
	}
	return nil
}

// deleteLocked is Delete with wmu held.
func (ix *Index) deleteLocked(ctx context.Context, ids []uint64) error {
	if err := func() error {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		if ix.closed {
			return umbra.ErrClosed
		}
		if len(ids) == 0 {
			return nil
		}
		seen := make(map[uint64]bool, len(ids))
		for i, id := range ids {
			if seen[id] {
				return fmt.Errorf("%w: ID %d is given twice", umbra.ErrDuplicateID, id)
			}
			seen[id] = true
			if _, ok := ix.rid.rowOf[id]; !ok {
				return fmt.Errorf("%w: ID %d (argument %d)", umbra.ErrNotFound, id, i)
			}
		}
		if err := ix.logged(storefile.Record{Op: storefile.OpDelete, IDs: ids}); err != nil {
			return err
		}
		rows := ix.rid.kill(ids)
		if ix.dev != nil {
			// The device's resident tombstones follow: just the words
			// these rows change. (A failed write is redone by the next
			// search, which fails rather than miss it.)
			ix.dev.MarkDead(rows)
		}
		for _, id := range ids {
			ix.keys.dropID(id)
		}
		return nil
	}(); err != nil {
		return err
	}
	if ix.rid.nDead >= compactMinDead && ix.rid.nDead*4 >= len(ix.rid.ids) {
		// The delete is applied and logged: a compaction its caller
		// cancelled is left to a later one.
		if err := ix.compactLocked(ctx); err != nil && !cancelled(ctx, err) {
			return err
		}
	}
	return nil
}

// compactMinDead is the fewest dead rows automatic compaction bothers with.
const compactMinDead = 1024

// Has reports whether a vector is stored under id.
func (ix *Index) Has(id uint64) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	_, ok := ix.rid.rowOf[id]
	return ok
}

// Compact drops deleted rows for good, so they cost neither memory nor
// scan time. The compacted rows are built, and on a GPU uploaded, while
// searches go on against the old ones; they wait only for the swap.
func (ix *Index) Compact(ctx context.Context) (err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	if err := ix.lockWriter(); err != nil {
		return err
	}
	defer ix.wmu.Unlock()
	return ix.compactLocked(ctx)
}

// compactLocked is Compact with wmu held (writers excluded, searches not).
func (ix *Index) compactLocked(ctx context.Context) error {
	// The live rows are gathered under the read lock, released however
	// the gathering ends (a fault in mapped rows panics out of it).
	var (
		flat, keep  = []float32(nil), []uint64(nil)
		kept        []int // the live rows
		dev         device
		onGPU, none bool
	)
	if err := func() error {
		ix.mu.RLock()
		defer ix.mu.RUnlock()
		if ix.closed {
			return umbra.ErrClosed
		}
		if ix.rid.nDead == 0 {
			none = true
			return nil
		}
		flat = make([]float32, 0, ix.rid.live()*ix.cfg.Dim)
		keep = make([]uint64, 0, ix.rid.live())
		kept = make([]int, 0, ix.rid.live())
		for row, id := range ix.rid.ids {
			if !ix.rid.isDead(row) {
				flat = append(flat, ix.slab.Row(row)...)
				keep = append(keep, id)
				kept = append(kept, row)
			}
		}
		dev, onGPU = ix.dev, ix.onGPU()
		return nil
	}(); err != nil || none {
		return err
	}
	slab := packed.NewSlab(ix.cfg.Dim)
	slab.AppendFlat(flat, false)
	quant := ix.quant.forSlab(slab)
	rid := newRowIDs()
	rid.nextID = ix.rid.nextID
	rid.appendIDs(keep)

	var fresh = dev
	if onGPU {
		var err error
		if fresh, err = dev.Sibling(); err == nil {
			err = fresh.Upload(ctx, ix.deviceView(slab, quant.c), 0, nil, nil)
			if err != nil {
				fresh.Release()
			}
		}
		if err = gpuError(err); err != nil {
			// A cancelled compaction changes nothing and says nothing
			// of the device, which keeps the searches.
			if cancelled(ctx, err) || ix.cfg.Device == GPU {
				return err
			}
			ix.demote(err)
			fresh = dev
		}
	}
	ix.mu.Lock()
	packed.Release(ix.slab, slab)
	exact.ReleaseCodes(ix.quant.c, quant.c)
	ix.slab, ix.rid, ix.quant = slab, rid, quant
	ix.keepAttrs(kept)
	ix.mapped.drop(ix.slab)
	if fresh != dev {
		ix.dev, ix.stale = fresh, false
	}
	ix.mu.Unlock()
	if fresh != dev {
		dev.Release()
	}
	return nil
}
