package storefile

import (
	"io/fs"
	"os"
)

// FS is the file system a store's files are replaced through: the calls
// WriteFile makes, in the order it makes them, and the two RemoveTemps
// adds. OS is the one a program uses; tests pass one that fails a chosen
// call (internal/storefile/faultfs), so the layers above are tested
// against every step of an atomic write failing without a hook in this
// package.
//
// The log's own appends and the readers (ReadBase, MapBase, ReplayLog) go
// to the operating system directly.
type FS interface {
	// Stat describes name, following symbolic links.
	Stat(name string) (fs.FileInfo, error)
	// Create makes name for writing with perm (less the umask), failing
	// with an error matching fs.ErrExist if it exists.
	Create(name string, perm fs.FileMode) (File, error)
	// Rename replaces newname with oldname.
	Rename(oldname, newname string) error
	// SyncDir makes the entries of dir durable: a rename into it, a
	// file created in it.
	SyncDir(dir string) error
	// Remove deletes name.
	Remove(name string) error
	// ReadDir lists dir.
	ReadDir(dir string) ([]fs.DirEntry, error)
}

// File is a file that Create made.
type File interface {
	Write(p []byte) (int, error)
	// Chmod sets the permission bits, umask aside.
	Chmod(mode fs.FileMode) error
	// Sync makes what was written durable.
	Sync() error
	Close() error
}

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

func (osFS) Create(name string, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err // not a nil *os.File in a non-nil File
	}
	return f, nil
}

func (osFS) Rename(oldname, newname string) error      { return os.Rename(oldname, newname) }
func (osFS) SyncDir(dir string) error                  { return syncDir(dir) }
func (osFS) Remove(name string) error                  { return os.Remove(name) }
func (osFS) ReadDir(dir string) ([]fs.DirEntry, error) { return os.ReadDir(dir) }
