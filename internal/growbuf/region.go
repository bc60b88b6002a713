package growbuf

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A large buffer that grows (the packed rows of an index) lives in a
// region of its own: address space reserved well past what it holds, so
// that it grows in place — no copy, and no memory touched but the rows
// written — until it outgrows the region. Where the platform has them
// (64-bit Linux) a region is an anonymous private mapping reserved without
// committing memory (MAP_NORESERVE) and advised onto transparent huge
// pages (MADV_HUGEPAGE): a page fault then maps 2 MiB, not 4 KiB. Writing
// fresh memory costs what faulting it in costs, and on the 2-core virtual
// machine this was measured on a 4 KiB fault cost about 3 ms a megabyte;
// fifty appends of 3 MB took 2.5 s as Go heap slices grown and copied, 0.4
// s into a reserved mapping, 15 ms into one on huge pages.
//
// Only the memory written is resident: a region's reservation costs
// address space, of which a 64-bit process has 128 TiB or more, so a
// region reserves at least regionReserve, and regionGrowth times the
// capacity asked past that: a buffer copies itself once out of the heap
// and then only each time it grows fourfold past a gigabyte. Buffers
// smaller than regionMin stay on the Go heap, where many small indexes
// cost nothing of either.

// regionMin is the smallest buffer Make puts in a region, in bytes.
const regionMin = 4 << 20

// regionReserve is the least address space a region reserves, in bytes.
const regionReserve = 1 << 30

// testReserve, when not 0, replaces regionReserve (ReserveForTests).
var testReserve atomic.Int64

// ReserveForTests makes regions reserve at least bytes (not
// regionReserve) until restore is called, so that a test can outgrow one
// without writing a gigabyte.
func ReserveForTests(bytes int64) (restore func()) {
	old := testReserve.Swap(bytes)
	return func() { testReserve.Store(old) }
}

// minReserve is the least a region reserves now.
func minReserve() int {
	if b := testReserve.Load(); b != 0 {
		return int(b)
	}
	return regionReserve
}

// regionGrowth is how many times the capacity asked a region reserves
// past regionReserve.
const regionGrowth = 4

// hugePage is the size regions are rounded up to (x86-64's and arm64's
// transparent huge page).
const hugePage = 2 << 20

// A Region is the reserved mapping a buffer from Make lies in. Its owner
// frees it with Free once nothing reads the buffer; a Region that becomes
// unreachable unfreed is freed by the garbage collector, so a buffer
// dropped on an error path is not leaked. Reading the buffer after Free
// faults: the owner must know no reader is left (the engine frees a slab's
// old region under the locks that exclude every reader).
type Region struct{ st *regionState }

// regionState is what a Region's cleanup needs: it must not reference the
// Region itself.
type regionState struct {
	mem   []byte
	freed atomic.Bool
	// mu is held for reading while Prefault advises mem, and for writing
	// by free: a region is never unmapped under a prefault (whose advice
	// would then reach whatever was mapped there next).
	mu sync.RWMutex
}

// mapped counts the regions mapped and not yet freed (Mapped).
var mapped atomic.Int64

// Available reports whether Make puts large buffers in regions here:
// 64-bit Linux, unless the kernel accounts overcommit strictly.
func Available() bool { return haveRegions && !strictOvercommit() }

// Mapped is how many regions are mapped and not freed, for tests.
func Mapped() int64 { return mapped.Load() }

// Number is what a region may hold: plain values, no pointers (the
// garbage collector does not scan a region).
type Number interface {
	~uint8 | ~int8 | ~uint16 | ~int16 | ~uint32 | ~int32 | ~uint64 | ~int64 | ~float32 | ~float64
}

// Make returns a []T of length length and capacity at least capacity
// (length <= capacity), zero past length. A buffer of regionMin bytes or
// more lies in a region of its own, returned with it, reserving
// regionGrowth times capacity or regionReserve, whichever is larger; a
// smaller one, or one the platform cannot map, is Go heap memory and the
// region is nil.
func Make[T Number](length, capacity int) ([]T, *Region) {
	size := int(unsafe.Sizeof(T(0)))
	if haveRegions && capacity >= regionMin/size && capacity <= (math.MaxInt-hugePage)/(regionGrowth*size) {
		bytes := (max(regionGrowth*size*capacity, minReserve()) + hugePage - 1) &^ (hugePage - 1)
		if mem, err := mapRegion(bytes); err == nil {
			mapped.Add(1)
			st := &regionState{mem: mem}
			r := &Region{st: st}
			runtime.AddCleanup(r, func(st *regionState) { st.free() }, st)
			all := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(mem))), len(mem)/size)
			return all[:length], r
		}
	}
	return make([]T, length, capacity), nil
}

// Floats is Make of float32s.
func Floats(length, capacity int) ([]float32, *Region) { return Make[float32](length, capacity) }

// Freed reports whether the region was freed (by Free or the garbage
// collector), for tests.
func (r *Region) Freed() bool { return r.st.freed.Load() }

// Free unmaps the region. It is safe on a nil Region and to call twice.
func (r *Region) Free() {
	if r != nil {
		r.st.free()
	}
}

func (st *regionState) free() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.freed.CompareAndSwap(false, true) {
		_ = unmapRegion(st.mem)
		mapped.Add(-1)
	}
}

// Prefault makes the memory of elements [from, to) of s present, s being a
// buffer Make returned with r (from its first element), so that the writes
// that fill them later do not each wait for the kernel to fault a page in:
// on a virtual machine that was measured at up to 3 ms a megabyte, most of
// an append's time (docs/benchmarks.md). It is meant to run on a goroutine
// of its own, ahead of the writes. Best effort: it does nothing for a nil
// or freed region, or where the kernel cannot (before Linux 5.14); it
// never changes a value, so it is safe beside writes into the same
// elements; a Free waits for it.
func Prefault[T Number](r *Region, s []T, from, to int) {
	if r == nil || from >= to {
		return
	}
	st := r.st
	st.mu.RLock()
	defer st.mu.RUnlock()
	if st.freed.Load() || len(st.mem) == 0 || cap(s) == 0 || unsafe.Pointer(unsafe.SliceData(s)) != unsafe.Pointer(unsafe.SliceData(st.mem)) {
		return
	}
	size := int(unsafe.Sizeof(T(0)))
	const page = 4096
	lo := from * size &^ (page - 1)
	hi := min((to*size+page-1)&^(page-1), len(st.mem))
	if lo < hi {
		populate(st.mem[lo:hi])
	}
}
