package gpu

import (
	"context"
	"fmt"
	"time"
)

// Renew returns a new, empty index laid out like g on a device that passes
// the self-test again: g's own device when it still does (a failure that
// was the call's, not the device's), or else a device opened anew on the
// same adapter, whose probe then runs again (the verdict cached for the
// lost device is dropped). It is how an index comes back after its device
// failed; g itself is left as it is. A device the caller owns (Adopt) is
// never replaced, nor one no API can open again (a browser's).
func (g *Index) Renew(ctx context.Context, timeout time.Duration) (*Index, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	err := g.recheck(ctx, timeout)
	switch {
	case err == nil:
		return g.dev.newLike(g)
	case g.dev.owned:
		return nil, fmt.Errorf("%w: the caller's device fails its self-test: %v", ErrFailed, err)
	case g.dev.reopen == nil:
		return nil, fmt.Errorf("%w: the device fails its self-test and cannot be opened again: %v", ErrFailed, err)
	}
	dev, err := g.dev.reopen()
	if err != nil {
		return nil, err
	}
	return dev.newLike(g)
}

// recheck runs the device's self-test with its current variant, as the
// probe did, within timeout: a device that hangs counts as failed (its
// goroutine is left to finish on its own; a GPU call cannot be
// interrupted).
func (g *Index) recheck(ctx context.Context, timeout time.Duration) error {
	if recheckFault != nil {
		if err := recheckFault(g.dev); err != nil {
			return err
		}
	}
	done := make(chan error, 1)
	go func() { done <- g.dev.selfTest() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return fmt.Errorf("%w: the self-test did not finish within %v", ErrFailed, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recheckFault, when set (by tests only), may fail a device's self-test
// in Renew, as a lost device would.
var recheckFault func(*Device) error
