//go:build unix

package storefile

import "os"

// syncDir makes a rename or create in dir durable: on POSIX systems the
// directory entry lives in the directory's own blocks, which fsync of the
// file does not cover (the SQLite "rename without a directory fsync" case).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return err
	}
	return d.Close()
}
