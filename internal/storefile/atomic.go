package storefile

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// The steps of an atomic replacement, as a fault injected by a test names
// them (InjectFault).
const (
	StepCreate  = "create"   // the temporary file
	StepWrite   = "write"    // its contents
	StepSync    = "fsync"    // its fsync
	StepClose   = "close"    // its close
	StepRename  = "rename"   // the rename over the target
	StepSyncDir = "fsyncdir" // the directory's fsync after the rename
)

var injected atomic.Pointer[func(step, path string) error]

// InjectFault makes every later atomic replacement (WriteFile: a base
// write, a checkpoint, a log reset, a file host writes) call fail before
// each step, with the step's name and the path being replaced; a non-nil
// error fails that step as if the system call had. nil removes it. For
// tests of the layers above, which must leave a store (or a converted
// file) whole whichever step fails; nothing else sets it.
func InjectFault(fail func(step, path string) error) {
	if fail == nil {
		injected.Store(nil)
		return
	}
	injected.Store(&fail)
}

// tempInfix marks the temporary files an atomic write leaves behind when it
// is killed: ".<name>.tmp-<16 hex digits>" next to the file it would
// replace. No reader accepts the name (its extension is ".tmp-…");
// RemoveTemps deletes a store's.
const tempInfix = ".tmp-"

func tempPrefix(path string) string {
	return "." + filepath.Base(path) + tempInfix
}

// isTempOf reports whether name is one of the temporary files WriteFile
// makes for path: its prefix followed by hex digits only, so that the
// temporary files of a neighbour whose name merely starts like path's
// (".s.umbra.tmp-x.tmp-…" of a file "s.umbra.tmp-x") are not mistaken for
// path's.
func isTempOf(name, path string) bool {
	rest, ok := strings.CutPrefix(name, tempPrefix(path))
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// WriteFile replaces path with the bytes write produces, so that after a
// crash path holds either its old contents or all of the new ones: write a
// temporary file in the same directory, fsync it, rename it over path,
// fsync the directory so the rename itself is durable. It is umbra's one
// atomic write: the store's base and log, and every file package host
// writes.
//
//   - The temporary file is ".<name>.tmp-<16 hex digits>" (tempInfix) and
//     is removed on every error path before the rename, a panic in write
//     included; only a killed process leaves one (RemoveTemps).
//   - A new file gets perm, less the umask; an existing file keeps its
//     permission bits exactly (a 0600 file stays 0600).
//   - A path that exists but is not a regular file (a directory, a device,
//     a FIFO) is refused, untouched. Symbolic links are the caller's to
//     resolve (Resolve for a store): WriteFile replaces what path names.
//   - If the directory's fsync fails after the rename, the new file is in
//     place but its name may not survive a power loss, and the error says
//     so: the caller must not treat the write as durable.
//
// Owner, group and extended attributes are not carried over.
func WriteFile(path string, perm fs.FileMode, write func(w *bufio.Writer) error) (err error) {
	dir := filepath.Dir(path)
	// do runs one step, unless a test's injected fault fails it first.
	do := func(step string, call func() error) error {
		if f := injected.Load(); f != nil {
			if err := (*f)(step, path); err != nil {
				return err
			}
		}
		return call()
	}
	mode := perm.Perm()
	keepMode := false
	if st, err := os.Stat(path); err == nil {
		if !st.Mode().IsRegular() {
			return fmt.Errorf("replace %s: not a regular file (%s): refusing to replace it", path, st.Mode().Type())
		}
		mode, keepMode = st.Mode().Perm(), true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("replace %s: %w", path, err)
	}

	var f *os.File
	var tmp string
	for range 16 {
		var rnd [8]byte
		_, _ = rand.Read(rnd[:])
		tmp = filepath.Join(dir, tempPrefix(path)+hex.EncodeToString(rnd[:]))
		err = do(StepCreate, func() (err error) {
			f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			return err
		})
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("replace %s: create temporary file: %w", path, err)
	}
	renamed := false
	defer func() {
		if f != nil {
			_ = f.Close()
		}
		if !renamed {
			_ = os.Remove(tmp)
		}
	}()

	if keepMode {
		// OpenFile applied the umask; the old file's bits win.
		if err := f.Chmod(mode); err != nil {
			return fmt.Errorf("replace %s: %w", path, err)
		}
	}
	w := bufio.NewWriterSize(f, 1<<16)
	if err := write(w); err != nil {
		return err
	}
	if err := do(StepWrite, w.Flush); err != nil {
		return fmt.Errorf("replace %s: write: %w", path, err)
	}
	if err := do(StepSync, f.Sync); err != nil {
		return fmt.Errorf("replace %s: fsync: %w", path, err)
	}
	if err := do(StepClose, f.Close); err != nil {
		_ = f.Close() // after an injected fault; a real failed close has released it
		f = nil
		return fmt.Errorf("replace %s: close: %w", path, err)
	}
	f = nil
	if err := do(StepRename, func() error { return os.Rename(tmp, path) }); err != nil {
		return fmt.Errorf("replace %s: rename: %w", path, err)
	}
	renamed = true
	if err := do(StepSyncDir, func() error { return syncDir(dir) }); err != nil {
		// The new file is in place but its name may not survive a power
		// loss; the caller must not treat the write as durable.
		return fmt.Errorf("replace %s: fsync directory after renaming the new file into place: %w", path, err)
	}
	return nil
}

// RemoveTemps deletes the temporary files that a crash in the middle of
// WriteBase, Checkpoint or OpenLog left next to the store at path (base and
// log), and nothing else: not the temporary files of other files in the
// directory, even those whose names start like path's. Call it only while
// holding the store's Lock (engine's Open does, right after taking it):
// every write of a store's files happens under that lock, so no temporary
// file of a live write can be there, while a temporary file of a write in
// progress looks the same as a dead one. Never call it from a reader that
// takes no lock.
func RemoveTemps(path string) error {
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("remove temporary files of %s: %w", path, err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !isTempOf(e.Name(), path) && !isTempOf(e.Name(), path+logSuffix) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove temporary files of %s: %w", path, errors.Join(errs...))
	}
	return nil
}

// Resolve returns the real path of the store at path, every symbolic link
// in it resolved, the last component's too, so that its log, its lock and
// the temporary files of its atomic writes are made beside the real base
// file, and a checkpoint replaces that file rather than the link. A path
// that does not exist yet resolves through its directory; a link that
// points at nothing is an error, not a place to create a store.
func Resolve(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err == nil {
		return real, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(path)
		return "", fmt.Errorf("%s is a symbolic link to %s, which does not exist: %w", path, target, fs.ErrNotExist)
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	return filepath.Join(dir, filepath.Base(path)), nil
}
