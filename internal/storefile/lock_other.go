//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd || solaris || windows)

package storefile

import "fmt"

// Lock is not implemented on this platform (it has neither flock nor
// LockFileEx: js/wasm, plan9, aix and others): it returns ErrUnsupported,
// so a caller that needs the single-writer guarantee learns it does not
// have one instead of silently running without it.
func Lock(path string) (unlock func() error, err error) {
	return nil, fmt.Errorf("%w: file locks on this platform (store %s)", ErrUnsupported, path)
}
