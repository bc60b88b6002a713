package engine

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/storefile"
)

// A store opened on the CPU path maps its base file instead of reading it.
//
// The rows are a private, copy-on-write mapping of the file
// (storefile.MapBase): Open costs the header, the CRC pass over the rows
// (which pulls every page in once) and the IDs, not a copy of the rows.
// An Upsert writes its rows in place, and the kernel copies just the pages
// written into the process's memory; nothing written reaches the file
// except through the store's own log and checkpoints. An Add (the slab
// grows into the heap, a copy of every row) or a compaction (a new slab)
// leaves the mapping unused, and it is released then.
//
// Another process that truncates the file makes reading a mapped page
// fault (SIGBUS), which Go turns into a crash unless the reading goroutine
// has set debug.SetPanicOnFault. Every call that reads rows sets it while
// it runs, as do the fallback's workers (they inherit it from the caller),
// and recovers the fault into ErrStoreChanged; one that rewrites the file
// in place changes its size, modification time or status-change time,
// which every read of the rows checks (an fstat) before it answers. Either way the index then
// refuses every later call with that error: reopen the store.

// mapping is an index's mapped base. The pointer is set before the index
// is shared and never changes; live changes only under ix.mu held for
// writing (and wmu), so a reader holding either sees it hold still.
type mapping struct {
	base *storefile.MappedBase
	path string
	live atomic.Bool // the slab's rows alias the mapping
	test *testHooks  // the index's; nil outside tests

	failMu  sync.Mutex
	failure error
}

// failed returns the error the index refuses calls with after its mapping
// went bad, or nil.
func (m *mapping) failed() error {
	if m == nil {
		return nil
	}
	m.failMu.Lock()
	defer m.failMu.Unlock()
	return m.failure
}

func (m *mapping) fail(err error) error {
	m.failMu.Lock()
	defer m.failMu.Unlock()
	if m.failure == nil {
		m.failure = err
	}
	return m.failure
}

// check returns the mapping's failure, or records and returns one when
// the file changed since it was mapped.
func (m *mapping) check() error {
	if m == nil {
		return nil
	}
	if err := m.failed(); err != nil || !m.live.Load() {
		return err
	}
	if m.test != nil && m.test.skipMappedStat {
		return nil
	}
	if err := m.base.Changed(); err != nil {
		return m.fail(fmt.Errorf("%w: %v; reopen the store", ErrStoreChanged, err))
	}
	return nil
}

// faultErr recognises a recovered fault (or an error wrapping one) at an
// address in the mapping, records it and returns the error to return.
func (m *mapping) faultErr(v any) error {
	if m == nil {
		return nil
	}
	var f interface{ Addr() uintptr }
	switch e := v.(type) {
	case error:
		if !errors.As(e, &f) {
			return nil
		}
	default:
		return nil
	}
	if !m.base.Contains(f.Addr()) {
		return nil
	}
	return m.fail(fmt.Errorf("%w: %s: reading the mapped rows faulted at %#x (the file was truncated underneath); reopen the store",
		ErrStoreChanged, m.path, f.Addr()))
}

// drop releases the mapping once the slab no longer aliases it (an Add
// grew it into the heap, a compaction replaced it). The caller holds ix.mu
// for writing, so no search is reading the mapping.
func (m *mapping) drop(s *packed.Slab) {
	if m == nil || !m.live.Load() || aliases(m.base, s) {
		return
	}
	m.live.Store(false)
	_ = m.base.Close()
}

// aliases reports whether the slab's rows lie in the mapping.
func aliases(b *storefile.MappedBase, s *packed.Slab) bool {
	if cap(s.Data) == 0 {
		return false
	}
	return b.Contains(uintptr(unsafe.Pointer(unsafe.SliceData(s.Data))))
}

// close releases the mapping at Close. The caller holds ix.mu.
func (m *mapping) close() {
	if m != nil && m.live.Load() {
		m.live.Store(false)
		_ = m.base.Close()
	}
}

// faultWatch is what watchFaults changed, for recoverInto to restore.
type faultWatch struct{ set, prev bool }

// watchFaults makes a fault in this goroutine a recoverable panic while a
// call of a mapped index runs; recoverInto turns it into ErrStoreChanged
// and restores the goroutine's setting. It is a no-op for an index that
// was never mapped.
func (ix *Index) watchFaults() faultWatch {
	if ix.mapped == nil {
		return faultWatch{}
	}
	return faultWatch{set: true, prev: debug.SetPanicOnFault(true)}
}

// mappedAnswer returns a search's answer, or nothing and ErrStoreChanged
// when the mapped file changed while it was being read.
func (ix *Index) mappedAnswer(all [][]umbra.Hit, err error) ([][]umbra.Hit, error) {
	if err == nil {
		if err = ix.mapped.check(); err != nil {
			return nil, err
		}
	}
	return all, err
}
