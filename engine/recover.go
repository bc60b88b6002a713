package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/umbravec/umbra"
)

// A GPU that comes back.
//
// Under Device Auto a GPU failure (a failed call, a lost device) moves
// searches to the fallback, which answers from the host copy of every row,
// so the failing call and every later one still get the exact answer. In
// the background the index then tries to bring the GPU back, waiting
// recoverFirst, then twice as long after each failed attempt up to
// recoverMax: the device is self-tested again (the probe's test, with its
// current variant) or, when it fails that, a new device is opened on the
// same adapter and probed; every row is uploaded to a new device side while
// searches go on on the CPU (writers wait), and searches return to the GPU
// in one swap. Close stops it. A full device (ErrTooLarge) is not retried:
// nothing would change.
const (
	recoverFirst = time.Second
	recoverMax   = time.Minute
)

// recoverGPU runs recovery attempts until one succeeds or the index
// closes. cause is the failure that moved searches to the CPU.
func (ix *Index) recoverGPU(cause error) {
	defer ix.background.Done()
	// A successful attempt clears recovering itself, with gpuDown
	// (tryRecover): a failure right after it must find no recovery
	// running, and the one it starts must not be marked ended by this.
	recovered := false
	defer func() {
		if !recovered {
			ix.recovering.Store(false)
		}
	}()
	var wait time.Duration
	if ix.test != nil {
		wait = ix.test.recoverAfter
	}
	if wait <= 0 {
		wait = recoverFirst
	}
	for attempt := 1; ; attempt++ {
		timer := time.NewTimer(wait)
		select {
		case <-ix.life.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		err := ix.tryRecover(attempt)
		if recovered = err == nil; recovered || ix.life.Err() != nil {
			return
		}
		wait = min(2*wait, recoverMax)
		ix.whyMu.Lock()
		ix.reason = fmt.Sprintf("GPU failed after start-up, searches moved to the CPU: %v; recovery attempt %d failed (%v), next in %v",
			cause, attempt, err, wait)
		ix.whyMu.Unlock()
	}
}

// tryRecover is one recovery attempt.
func (ix *Index) tryRecover(attempt int) (err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	if ix.test != nil && ix.test.recoverFault != nil {
		if err := ix.test.recoverFault(attempt); err != nil {
			return err
		}
	}
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	old := ix.dev
	if ix.closed || old == nil {
		return umbra.ErrClosed
	}
	timeout := ix.cfg.ProbeTimeout
	if timeout == 0 {
		timeout = defaultProbeTimeout
	}
	g, err := old.Renew(ix.life, timeout)
	if err != nil {
		return gpuError(err)
	}
	// Writers wait (wmu); searches read ix.slab meanwhile, on the CPU.
	if err := gpuError(g.Upload(ix.life, ix.deviceView(ix.slab, ix.quant.c), 0, nil, nil)); err != nil {
		g.Release()
		return err
	}
	g.MarkDead(ix.rid.deadRows()) // a renewed device may hold none
	ix.mu.Lock()
	ix.dev, ix.stale = g, false
	// Under whyMu, as demote reads them: a failure from now on finds the
	// GPU up and no recovery running, and starts one.
	ix.whyMu.Lock()
	ix.gpuDown.Store(false)
	ix.recovering.Store(false)
	ix.reason, ix.hint = "", umbra.Hint{}
	ix.whyMu.Unlock()
	ix.recoveries.Add(1)
	ix.mu.Unlock()
	old.Release()
	return nil
}

func (ix *Index) onGPU() bool { return ix.dev != nil && !ix.gpuDown.Load() }

// checkStale refuses a GPU search under Device GPU while a failed device
// write has left the resident rows unlike the slab. (Under Auto such a
// failure has already moved the index to the CPU.) The caller holds ix.mu.
func (ix *Index) checkStale() error {
	if ix.onGPU() && ix.stale && ix.cfg.Device == GPU {
		return fmt.Errorf("%w: the resident rows are stale after a failed device write; the next write uploads them again", ErrGPU)
	}
	return nil
}

// afterGPUFailure decides what a failed GPU search means: the error to
// return (the context ended, or Device GPU), or nil to answer this call on
// the CPU. A request the device cannot take in one piece says nothing about
// the device, so later calls still go to the GPU; any other failure moves
// the index off it.
func (ix *Index) afterGPUFailure(ctx context.Context, err error) error {
	if ctx.Err() != nil || ix.cfg.Device == GPU {
		return err
	}
	if !errors.Is(err, umbra.ErrTooLarge) {
		ix.demote(err)
	}
	return nil
}

// cancelled reports whether err is ctx's own end: a call its caller gave
// up on, which says nothing of the device. Only a failure of the device
// moves an index off it (demote): a cancelled write that did would cost a
// recovery, a full upload of every row, and count as a GPU failure.
func cancelled(ctx context.Context, err error) bool {
	cerr := ctx.Err()
	return cerr != nil && errors.Is(err, cerr)
}

// demote moves an Auto index to the fallback after a GPU failure. The slab
// is kept on the host, so nothing is lost.
func (ix *Index) demote(err error) {
	ix.whyMu.Lock()
	defer ix.whyMu.Unlock()
	if ix.gpuDown.CompareAndSwap(false, true) {
		ix.lastFailure = err.Error()
		if errors.Is(err, umbra.ErrTooLarge) {
			ix.reason = "the index outgrew what the GPU can hold, searches moved to the CPU: " + err.Error()
			ix.hint = umbra.Hint{Code: umbra.HintTooLarge}
			return
		}
		ix.reason = "GPU failed after start-up, searches moved to the CPU: " + err.Error()
		ix.hint = hintFor(umbra.HintProbeFailed, ix.cfg.adapter())
		if ix.dev != nil && ix.recovering.CompareAndSwap(false, true) {
			ix.reason += "; recovering in the background"
			ix.background.Add(1)
			go ix.recoverGPU(err)
		}
	}
}
