//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd || solaris

package storefile

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Lock takes the store's single-writer lock: an exclusive, non-blocking
// flock on path+".lock", created if needed. A second Lock of the same store,
// from another process or from this one, fails with ErrLocked until unlock
// is called or the holder exits (the kernel drops the lock with the
// process, so a crash never leaves a store locked). The lock file itself is
// never removed: removing it would let two writers lock two different files
// of the same name. flock is advisory and, on NFS, unreliable; keep stores
// on local disks.
func Lock(path string) (unlock func() error, err error) {
	lp := path + lockSuffix
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", lp, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, lp)
		}
		return nil, fmt.Errorf("lock %s: %w", lp, err)
	}
	done := false
	return func() error {
		if done {
			return nil
		}
		done = true
		// Closing the descriptor releases the flock.
		if err := f.Close(); err != nil {
			return fmt.Errorf("unlock %s: %w", lp, err)
		}
		return nil
	}, nil
}
