//go:build windows

package storefile

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// Lock takes the store's single-writer lock: an exclusive, non-blocking
// LockFileEx on the whole of path+".lock", created if needed. A second Lock
// of the same store, from another process or from this one (Windows locks
// belong to the file handle), fails with ErrLocked until unlock is called
// or the holder exits: Windows releases a process's locks when it ends, so
// a crash never leaves a store locked (the system may take a moment to do
// so after the process is gone). The lock file itself is never removed:
// removing it would let two writers lock two different files of the same
// name. Keep stores on local disks; locks on network shares depend on the
// server.
//
// This has been compiled, not run: the project's tests run on Linux.
func Lock(path string) (unlock func() error, err error) {
	lp := path + lockSuffix
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", lp, err)
	}
	h := windows.Handle(f.Fd())
	// The whole file, however long: offset 0 (in ol), ^0 bytes.
	const all = ^uint32(0)
	ol := new(windows.Overlapped)
	err = windows.LockFileEx(h, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, all, all, ol)
	if err != nil {
		_ = f.Close()
		if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
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
		// Closing the handle releases the lock too, but Windows asks for
		// an explicit unlock first: a lock left to the close is released
		// whenever the system gets to it.
		uerr := windows.UnlockFileEx(h, 0, all, all, new(windows.Overlapped))
		if err := f.Close(); err != nil {
			return fmt.Errorf("unlock %s: %w", lp, err)
		}
		if uerr != nil {
			return fmt.Errorf("unlock %s: %w", lp, uerr)
		}
		return nil
	}, nil
}
