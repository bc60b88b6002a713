package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/storefile"
)

// add checks and packs (pack) n vectors and appends them under ids (nil:
// assigned). The rows are packed and, on a GPU, uploaded beside the
// published ones while searches go on; searches wait only for the swap
// that publishes them.
func (ix *Index) add(ctx context.Context, start time.Time, ids []uint64, a *callAttrs, n int, pack func(*packed.Slab) error) ([]uint64, error) {
	if err := ix.lockWriter(); err != nil {
		return nil, err
	}
	defer ix.wmu.Unlock()
	return ix.addLocked(ctx, start, ids, false, nil, a, n, pack)
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
		return umbra.ErrClosed
	}
	if err := ix.repairStore(); err != nil {
		ix.wmu.Unlock()
		return err
	}
	return nil
}

// addLocked is add with wmu held. namesChecked says the caller has
// checked ids and keys already; otherwise they are checked here, once
// every row is packed and checked (stageAppend), so that a bad row is
// the error whatever is wrong with the names. keys, when not nil, name the
// new rows (one each; "" a row without one, with ids) and are logged with
// them; a (nil: none) gives them metadata and payloads, checked here.
func (ix *Index) addLocked(ctx context.Context, start time.Time, ids []uint64, namesChecked bool, keys []string, a *callAttrs, n int, pack func(*packed.Slab) error) ([]uint64, error) {
	if a == nil {
		a = &callAttrs{}
	}
	if a.given() {
		if err := ix.checkAttrs(a); err != nil {
			return nil, err
		}
	}
	p, err := ix.stageAppend(ctx, start, ids, namesChecked, n, pack, ix.store != nil)
	if err != nil {
		return nil, err
	}
	defer p.compressed()                       // on every return: no goroutine outlives the call
	if err := a.fits(len(p.ids)); err != nil { // a streamed source's count is known now
		return nil, err
	}
	rec := storefile.Record{Op: storefile.OpAdd, IDs: p.ids}
	if keys != nil {
		if len(keys) != len(p.ids) {
			return nil, fmt.Errorf("%w: %d keys for %d vectors", umbra.ErrIDCount, len(keys), len(p.ids))
		}
		if !namesChecked {
			if err := checkKeys(keys, ids != nil); err != nil {
				return nil, err
			}
			if err := ix.keysNew(keys); err != nil {
				return nil, err
			}
		}
		rec.Op, rec.Keys = storefile.OpUpsertKeys, keys
	}
	rec.Rows = ix.appendedRows(p)
	a.logInto(&rec, false)
	// The attributes go in before the record is logged, so that once it is
	// nothing can fail; searches read them only for published rows.
	undoAttrs := func() {}
	if a.given() || ix.attrs.meta != nil || ix.attrs.payloads != nil {
		ix.mu.Lock()
		undoAttrs, err = ix.appendAttrs(p.old, len(p.ids), a)
		ix.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	t, mark := traceFrom(ctx), time.Now()
	if err := ix.logged(rec); err != nil {
		ix.mu.Lock()
		undoAttrs()
		ix.mu.Unlock()
		return nil, err
	}
	if ix.store != nil {
		lapWrite(t, stageLog, &mark)
	}
	if ix.test != nil && ix.test.beforePublish != nil {
		ix.test.beforePublish()
	}
	p.compressed()
	if t != nil && p.compressTook > 0 {
		addWrite(t, stageCompress, p.compressTook)
	}
	ix.mu.Lock()
	ix.publish(p)
	ix.mu.Unlock()
	ix.prefaultNext(len(p.ids))
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

	// compressing, when not nil, is closed when a goroutine of the
	// write's own has staged quant, which took compressTook; compressed
	// waits for it.
	compressing  chan struct{}
	compressTook time.Duration
}

// compressed waits until quant is staged. The write that staged p calls
// it before anything reads quant, and before it returns, whatever it
// returns: the goroutine writes into the compressed rows' spare room,
// which the next write stages into.
func (p *appended) compressed() {
	if p.compressing != nil {
		<-p.compressing
		p.compressing = nil
	}
}

// prefaultNext makes the memory the next append of n rows will write
// present, on a goroutine of its own, where the rows (and their compressed
// copy) lie in reserved regions: a client that adds in batches finds the
// pages there, not faulted in one by one as it packs (docs/benchmarks.md
// measured this VM at up to 3 ms a megabyte). It works from copies of the
// headers, taken here under wmu; a region freed meanwhile waits for it
// (growbuf.Prefault). Appends of fewer than besideRows rows leave it.
func (ix *Index) prefaultNext(n int) {
	if n < besideRows || (ix.slab.Region() == nil && (ix.quant.c == nil || ix.quant.c.Region() == nil)) {
		return
	}
	slab := *ix.slab
	var codes exact.Compressed
	if ix.quant.c != nil {
		codes = *ix.quant.c
	}
	go func() {
		slab.Prefault(n)
		codes.Prefault(n)
	}()
}

// besideRows is the fewest rows for which an append does work on a
// goroutine of its own: compressing them beside the write of its log
// record, and faulting in the memory of the next append's; for fewer, a
// goroutine costs more than it saves.
const besideRows = 256

// stageAppend checks and packs n rows with pack under ids (nil: assigned;
// checked new after the rows, unless idsChecked says the caller did) after
// the published ones (n < 0: as many as pack commits, which checks them
// against the limits itself, see checkAppend) and, on a GPU, writes them
// to the device, all without taking ix.mu: a search reads only rows below
// the published count, in the slab and on the device. The caller holds
// wmu. On error nothing changed; under Auto a failed upload moves the
// index to the CPU and the append goes on there.
//
// beside, on the CPU path, lets the new rows' compressed copy (F16, Int8)
// be made on a goroutine of its own while the caller logs them: the
// caller then calls p.compressed before it publishes p, and before it
// returns (the compression's time is p.compressTook, not in the trace).
func (ix *Index) stageAppend(ctx context.Context, start time.Time, ids []uint64, idsChecked bool, n int, pack func(*packed.Slab) error, beside bool) (*appended, error) {
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
		return nil, fmt.Errorf("%w: %d IDs for %d vectors", umbra.ErrIDCount, len(ids), n)
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
	if beside && ix.quant.c != nil && n >= besideRows && !ix.onGPU() {
		// The log write that follows reads the same rows and waits for
		// the disk; the compression is arithmetic: side by side, a write
		// takes the longer of the two, not both.
		done := make(chan struct{})
		p.compressing = done
		go func() {
			defer close(done)
			t0 := time.Now()
			p.quant = ix.quant.stage(&p.slab, old)
			p.compressTook = time.Since(t0)
		}()
	} else {
		p.quant = ix.quant.stage(&p.slab, old)
		if ix.cfg.Precision != umbra.F32 {
			lapWrite(t, stageCompress, &start)
		}
	}
	if err := ctx.Err(); err != nil {
		p.compressed()
		return nil, err
	}
	if ix.onGPU() {
		var st *core.Stages
		if t != nil {
			st = &core.Stages{}
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
		if errors.Is(err, gpu.ErrRowsLost) {
			ix.stale = true // a growth lost the resident rows: the next write sends them all
		}
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
		return fmt.Errorf("%w: adding %d vectors to %d would exceed MaxRows %d", umbra.ErrTooLarge, n, old, ix.cfg.Limits.MaxRows)
	}
	if err := packed.CheckSize(old+n, ix.slab.Stride); err != nil {
		return fmt.Errorf("%w: %v", umbra.ErrTooLarge, err)
	}
	return ix.checkBudget(n)
}

// publish makes a staged append visible: the swap every search waits for.
// The caller holds wmu and ix.mu.
func (ix *Index) publish(p *appended) {
	if p.slab.Rows == p.old {
		return
	}
	old := *ix.slab
	*ix.slab = p.slab
	// ix.mu is held for writing and wmu by the writer: nothing reads the
	// rows' old storage any more.
	packed.Release(&old, ix.slab)
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
	ix.truncateAttrs(p.old)
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
func (ix *Index) upload(ctx context.Context, from int, st *core.Stages, progress func(done, total int)) error {
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

// hostBytes is the host memory the index takes with rows rows: the packed
// rows, their compressed copy, and the stored metadata and payloads.
func (ix *Index) hostBytes(rows int) int64 {
	return int64(rows)*int64(ix.slab.Stride)*4 + ix.quant.bytesFor(rows) + ix.attrs.bytes()
}

// checkBudget refuses an append of n rows that would take the packed rows
// past MaxHostBytes, or, on a GPU, past MaxDeviceBytes. The caller holds
// wmu.
func (ix *Index) checkBudget(n int) error {
	bytes := ix.hostBytes(ix.slab.Rows + n)
	if max := ix.cfg.Limits.MaxHostBytes; max > 0 && bytes > max {
		return fmt.Errorf("%w: %d vectors would take %d bytes of host memory, over MaxHostBytes %d",
			umbra.ErrTooLarge, ix.slab.Rows+n, bytes, max)
	}
	// The device holds the float32 rows, or a compressed precision's codes
	// alone.
	devBytes := int64(ix.slab.Rows+n) * int64(ix.slab.Stride) * 4
	if ix.quant.c != nil {
		devBytes = int64(ix.slab.Rows+n) * int64(codeWords(ix.cfg.Precision, ix.cfg.Dim)) * 4
	}
	if max := ix.cfg.Limits.MaxDeviceBytes; max > 0 && ix.onGPU() && devBytes > max && ix.devCap == 0 {
		err := fmt.Errorf("%w: %d vectors would take %d bytes of device memory, over MaxDeviceBytes %d",
			umbra.ErrTooLarge, ix.slab.Rows+n, devBytes, max)
		if ix.cfg.Device == GPU {
			return err
		}
		ix.demote(err) // under Auto the CPU holds them, as when the device is full
	}
	return nil
}
