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
)

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
// writes. Every call it makes goes through fsys (OS outside tests).
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
func WriteFile(fsys FS, path string, perm fs.FileMode, write func(w *bufio.Writer) error) (err error) {
	dir := filepath.Dir(path)
	mode := perm.Perm()
	keepMode := false
	if st, err := fsys.Stat(path); err == nil {
		if !st.Mode().IsRegular() {
			return fmt.Errorf("replace %s: not a regular file (%s): refusing to replace it", path, st.Mode().Type())
		}
		mode, keepMode = st.Mode().Perm(), true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("replace %s: %w", path, err)
	}

	var f File
	var tmp string
	for range 16 {
		var rnd [8]byte
		_, _ = rand.Read(rnd[:])
		tmp = filepath.Join(dir, tempPrefix(path)+hex.EncodeToString(rnd[:]))
		f, err = fsys.Create(tmp, mode)
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
			_ = fsys.Remove(tmp)
		}
	}()

	if keepMode {
		// OpenFile applied the umask; the old file's bits win.
		if err := f.Chmod(mode); err != nil {
			return fmt.Errorf("replace %s: %w", path, err)
		}
	}
	fw := &fileWriter{f: f}
	w := bufio.NewWriterSize(fw, 1<<16)
	if err := write(w); err != nil {
		if fw.err != nil {
			// The file refused the bytes (a full disk), not write.
			return fmt.Errorf("replace %s: write: %w", path, err)
		}
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("replace %s: write: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("replace %s: fsync: %w", path, err)
	}
	// A failed close has released the file all the same.
	cerr := f.Close()
	f = nil
	if cerr != nil {
		return fmt.Errorf("replace %s: close: %w", path, cerr)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace %s: rename: %w", path, err)
	}
	renamed = true
	if err := fsys.SyncDir(dir); err != nil {
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
func RemoveTemps(fsys FS, path string) error {
	dir := filepath.Dir(path)
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("remove temporary files of %s: %w", path, err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !isTempOf(e.Name(), path) && !isTempOf(e.Name(), path+logSuffix) {
			continue
		}
		if err := fsys.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove temporary files of %s: %w", path, errors.Join(errs...))
	}
	return nil
}

// fileWriter records the error of the file under WriteFile's buffer, so a
// failed write of the file is told from one that write itself returns.
type fileWriter struct {
	f   File
	err error
}

func (w *fileWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
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
