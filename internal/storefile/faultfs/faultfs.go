// Package faultfs is a storefile.FS for tests that fails a chosen step of
// an atomic write (storefile.WriteFile: a base write, a checkpoint, a log
// reset, a file package host writes), as Pebble's vfs/errorfs does: the
// code under test takes the file system it writes through, and a test
// hands it this one instead of storefile.OS. Nothing in the library
// imports it.
package faultfs

import (
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/umbravec/umbra/internal/storefile"
)

// The steps of an atomic replacement, in the order WriteFile takes them.
const (
	StepCreate  = "create"   // the temporary file
	StepWrite   = "write"    // its contents (every write of them)
	StepSync    = "fsync"    // its fsync
	StepClose   = "close"    // its close
	StepRename  = "rename"   // the rename over the target
	StepSyncDir = "fsyncdir" // the directory's fsync after the rename
)

// Steps returns every step, in order.
func Steps() []string {
	return []string{StepCreate, StepWrite, StepSync, StepClose, StepRename, StepSyncDir}
}

// Fail decides a step: called before the step runs, with its name and the
// path the atomic write replaces (not the temporary file's), a non-nil
// error fails the step as if the system call had.
type Fail func(step, path string) error

// FS passes every call to the file system under it, asking its Fail
// first. Its methods are safe for concurrent use.
type FS struct {
	base storefile.FS
	fail atomic.Pointer[Fail]

	mu sync.Mutex
	// renamed is the last file renamed into each directory: the file
	// whose rename the directory's next fsync makes durable.
	renamed map[string]string
}

// New returns an FS over base (storefile.OS when nil) that asks fail
// before each step; fail may be nil, and Set changes it.
func New(base storefile.FS, fail Fail) *FS {
	if base == nil {
		base = storefile.OS
	}
	f := &FS{base: base, renamed: map[string]string{}}
	f.Set(fail)
	return f
}

// Set makes fail decide every later step; nil lets every step run.
func (f *FS) Set(fail Fail) {
	if fail == nil {
		f.fail.Store(nil)
		return
	}
	f.fail.Store(&fail)
}

// FailAt is a Fail that fails step with err, for every path.
func FailAt(step string, err error) Fail {
	return func(s, _ string) error {
		if s == step {
			return err
		}
		return nil
	}
}

func (f *FS) ask(step, path string) error {
	if p := f.fail.Load(); p != nil {
		return (*p)(step, path)
	}
	return nil
}

// target is the file that the temporary file name (".NAME.tmp-HEX", see
// storefile.WriteFile) is written to replace, or name itself.
func target(name string) string {
	dir, base := filepath.Split(name)
	i := strings.LastIndex(base, ".tmp-")
	if !strings.HasPrefix(base, ".") || i < 1 {
		return name
	}
	return filepath.Join(dir, base[1:i])
}

func (f *FS) Stat(name string) (fs.FileInfo, error) { return f.base.Stat(name) }

func (f *FS) Create(name string, perm fs.FileMode) (storefile.File, error) {
	t := target(name)
	if err := f.ask(StepCreate, t); err != nil {
		return nil, err
	}
	file, err := f.base.Create(name, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, target: t}, nil
}

func (f *FS) Rename(oldname, newname string) error {
	if err := f.ask(StepRename, newname); err != nil {
		return err
	}
	if err := f.base.Rename(oldname, newname); err != nil {
		return err
	}
	f.mu.Lock()
	f.renamed[filepath.Dir(newname)] = newname
	f.mu.Unlock()
	return nil
}

// SyncDir names the step by the file last renamed into dir, which is the
// one whose rename it makes durable.
func (f *FS) SyncDir(dir string) error {
	f.mu.Lock()
	path, ok := f.renamed[dir]
	f.mu.Unlock()
	if !ok {
		path = dir
	}
	if err := f.ask(StepSyncDir, path); err != nil {
		return err
	}
	return f.base.SyncDir(dir)
}

func (f *FS) Remove(name string) error                  { return f.base.Remove(name) }
func (f *FS) ReadDir(dir string) ([]fs.DirEntry, error) { return f.base.ReadDir(dir) }

type faultFile struct {
	storefile.File
	fs     *FS
	target string
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.ask(StepWrite, f.target); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *faultFile) Sync() error {
	if err := f.fs.ask(StepSync, f.target); err != nil {
		return err
	}
	return f.File.Sync()
}

// Close releases the file even when it fails the step, as a failed close
// does.
func (f *faultFile) Close() error {
	if err := f.fs.ask(StepClose, f.target); err != nil {
		_ = f.File.Close()
		return err
	}
	return f.File.Close()
}
