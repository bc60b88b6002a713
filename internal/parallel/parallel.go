// Package parallel is the one split of CPU work across goroutines that the
// CPU backend (package fallback) and the exact search of compressed rows
// (internal/exact) share: how many workers a scan deserves, a loop that
// hands items to them in order, and the rule that a panic in a worker (a
// bug, or a fault in memory-mapped rows) becomes an error wrapping
// ErrInternal instead of the end of the process.
package parallel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// ErrInternal reports a panic caught inside a scan, so that a bug there
// fails one call instead of the host process. fallback.ErrInternal is this
// value.
var ErrInternal = errors.New("fallback: internal error")

// MinFloats is the work below which a single goroutine wins: spawning and
// merging costs more than the scan.
const MinFloats = 1 << 16

// Workers is how many goroutines a scan of items items, floats floats of
// work in all, runs on: workers (GOMAXPROCS when <= 0), one below
// MinFloats, never more than items.
func Workers(workers, items, floats int) int {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if floats < MinFloats {
		workers = 1
	}
	return max(1, min(workers, items))
}

// Recover, deferred, turns a panic on the calling goroutine into
// ErrInternal in *err, wrapping the panic's value when it is an error (a
// fault in mapped rows, see Run).
func Recover(err *error) {
	if r := recover(); r != nil {
		if e, ok := r.(error); ok {
			*err = fmt.Errorf("%w: %w", ErrInternal, e)
			return
		}
		*err = fmt.Errorf("%w: %v", ErrInternal, r)
	}
}

// Run hands items [0, n) to w goroutines, the calling one included,
// one at a time in increasing order, so a fast worker takes more and memory
// is streamed roughly front to back. It stops handing out items once ctx is
// done and returns ctx.Err() if any item was skipped. A panic in work
// becomes ErrInternal instead of killing the process (wrapping the panic's
// value when it is an error).
//
// The workers inherit the caller's debug.SetPanicOnFault: a caller reading
// rows from a memory-mapped file sets it, so that a page the file no
// longer backs (it was truncated underneath) faults into a panic, which
// becomes an error wrapping the runtime.Error (with its Addr method)
// rather than a crash in whichever worker touched the page.
func Run(ctx context.Context, w, n int, work func(worker, item int)) error {
	var next atomic.Int64
	return runFrom(ctx, w, func(int) int {
		if i := int(next.Add(1) - 1); i < n {
			return i
		}
		return -1
	}, work)
}

// runFrom runs w workers, the calling goroutine included, each doing
// work(worker, next(worker)) until next returns a negative item, ctx is
// done or a worker panics (see Run).
func runFrom(ctx context.Context, w int, next func(worker int) int, work func(worker, item int)) error {
	onFault := debug.SetPanicOnFault(false)
	debug.SetPanicOnFault(onFault)
	done := ctx.Done()
	var (
		stop    atomic.Bool
		stopped atomic.Bool
		once    sync.Once
		perr    error
	)
	run := func(worker int) {
		defer func() {
			if r := recover(); r != nil {
				once.Do(func() {
					if e, ok := r.(error); ok {
						perr = fmt.Errorf("%w: %w", ErrInternal, e)
					} else {
						perr = fmt.Errorf("%w: %v", ErrInternal, r)
					}
				})
				stop.Store(true)
			}
		}()
		for !stop.Load() {
			if done != nil {
				select {
				case <-done:
					stopped.Store(true)
					stop.Store(true)
					return
				default:
				}
			}
			i := next(worker)
			if i < 0 {
				return
			}
			work(worker, i)
		}
	}
	if w <= 1 {
		run(0)
	} else {
		var wg sync.WaitGroup
		for i := 1; i < w; i++ {
			wg.Go(func() {
				if onFault {
					debug.SetPanicOnFault(true)
				}
				run(i)
			})
		}
		run(0)
		wg.Wait()
	}
	if perr != nil {
		return perr
	}
	if stopped.Load() {
		return ctx.Err()
	}
	return nil
}

// RunShares is Run for a scan that streams memory: items [0, n) are cut
// into w contiguous shares, and worker i walks share i front to back, so
// each core reads one run of memory in order and its prefetchers stay on
// it (an OpenMP static schedule). A worker that finishes its share then
// takes items from the back of the share with the most left, one at a
// time, so a worker the system delays (other load, a slower core) delays
// the scan by about one item, not by its share. Cancellation, panics and
// faults are handled as in Run.
func RunShares(ctx context.Context, w, n int, work func(worker, item int)) error {
	if w <= 1 || n <= 1 || uint64(n) > math.MaxUint32 {
		return Run(ctx, w, n, work)
	}
	w = min(w, n)
	shares := make([]share, w)
	for i := range shares {
		lo, hi := i*n/w, (i+1)*n/w
		shares[i].s.Store(uint64(lo)<<32 | uint64(hi))
	}
	next := func(worker int) int {
		if i, ok := shares[worker].front(); ok {
			return i
		}
		for {
			victim, most := -1, 0
			for v := range shares {
				if left := shares[v].left(); left > most {
					victim, most = v, left
				}
			}
			if victim < 0 {
				return -1
			}
			if i, ok := shares[victim].back(); ok {
				return i
			}
		}
	}
	return runFrom(ctx, w, next, work)
}

// share is a range of items [front, back) packed in one word, so that its
// owner taking the front and a thief taking the back never both take the
// last item.
type share struct {
	s atomic.Uint64
	_ [56]byte // one cache line each: the owner writes its own often
}

func (sh *share) left() int {
	v := sh.s.Load()
	return int(uint32(v)) - int(v>>32)
}

func (sh *share) front() (int, bool) {
	for {
		v := sh.s.Load()
		lo, hi := v>>32, v&math.MaxUint32
		if lo >= hi {
			return 0, false
		}
		if sh.s.CompareAndSwap(v, (lo+1)<<32|hi) {
			return int(lo), true
		}
	}
}

func (sh *share) back() (int, bool) {
	for {
		v := sh.s.Load()
		lo, hi := v>>32, v&math.MaxUint32
		if lo >= hi {
			return 0, false
		}
		if sh.s.CompareAndSwap(v, lo<<32|(hi-1)) {
			return int(hi - 1), true
		}
	}
}
