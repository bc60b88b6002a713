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
	onFault := debug.SetPanicOnFault(false)
	debug.SetPanicOnFault(onFault)
	done := ctx.Done()
	var (
		next    atomic.Int64
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
			i := int(next.Add(1) - 1)
			if i >= n {
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
