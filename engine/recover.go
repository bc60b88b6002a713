package engine

import (
	"fmt"
	"time"
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
	wait := ix.opt.recoverAfter
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
	if f := ix.opt.recoverFault; f != nil {
		if err := f(attempt); err != nil {
			return err
		}
	}
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	old := ix.dev
	if ix.closed || old == nil {
		return ErrClosed
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
	ix.reason, ix.hint = "", Hint{}
	ix.whyMu.Unlock()
	ix.recoveries.Add(1)
	ix.mu.Unlock()
	old.Release()
	return nil
}
