//go:build unix

package storefile

import (
	"errors"
	"os"
	"syscall"
)

// syncDir makes a rename or create in dir durable: on POSIX systems the
// directory entry lives in the directory's own blocks, which fsync of the
// file does not cover (the SQLite "rename without a directory fsync" case).
// A file system that cannot fsync a directory at all (some network and
// FUSE ones answer EINVAL) is not an error: nothing more can be done
// there, and SQLite too goes on.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		_ = d.Close()
		return err
	}
	return d.Close()
}
