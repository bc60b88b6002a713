package fallback

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// Below this many floats of work a single goroutine wins: spawning and
// merging costs more than the scan.
const parallelFloats = 1 << 16

func workerCount(workers, items, floats int) int {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if floats < parallelFloats {
		workers = 1
	}
	return max(1, min(workers, items))
}

// parallel hands items [0, n) to w goroutines, the calling one included,
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
func parallel(ctx context.Context, w, n int, work func(worker, item int)) error {
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
