package host

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// TempSuffix ends the name of every temporary file WriteFileAtomic creates:
// ".NAME.RANDOM.umbra-tmp" beside the file it will replace. A file with this
// suffix is never output: it is what a process killed mid-write left behind,
// no reader accepts its extension, and it may be deleted once no writer is
// running.
const TempSuffix = ".umbra-tmp"

// The steps of a commit, replaceable by tests to observe their order or make
// one fail.
var (
	syncFile   = (*os.File).Sync
	renameFile = os.Rename
	syncDir    = syncDirectory
)

// WriteFileAtomic writes a file at path with what write produces, so that
// path holds either its old content or all of the new, even if the process
// or the machine stops mid-way:
//
//   - write gets a buffered writer on a new temporary file in the same
//     directory, named ".NAME.RANDOM" + TempSuffix;
//   - the file is flushed and fsynced, then renamed over path, then the
//     directory is fsynced so that the rename itself survives a crash;
//   - an existing file at path keeps its permission bits exactly (a 0600
//     file stays 0600); a new one gets perm, less the umask;
//   - if path is a symbolic link (or a chain of them), the file it points to
//     is replaced and the link is kept;
//   - on any error, or a panic in write, the temporary file is removed and
//     path is untouched.
//
// A path that exists but is not a regular file (a directory, a device, a
// FIFO) is refused. Owner, group and extended attributes are not carried
// over.
func WriteFileAtomic(path string, perm fs.FileMode, write func(io.Writer) error) error {
	target, err := resolveLinks(path)
	if err != nil {
		return err
	}
	fi, err := os.Stat(target)
	exists := err == nil
	switch {
	case exists && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (%s): refusing to replace it", target, fi.Mode().Type())
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	dir, base := filepath.Dir(target), filepath.Base(target)
	createPerm := perm.Perm()
	if exists {
		createPerm = 0o600 // until the chmod below: never wider than the file it replaces
	}
	f, err := createTemp(dir, base, createPerm)
	if err != nil {
		return err
	}
	tmp := f.Name()
	committed := false
	defer func() {
		if !committed {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 64<<10)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if exists {
		// Chmod is not subject to the umask, so the old bits come back exactly.
		if err := f.Chmod(fi.Mode().Perm()); err != nil {
			return err
		}
	}
	if err := syncFile(f); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := renameFile(tmp, target); err != nil {
		return err
	}
	committed = true
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("sync directory %s after renaming the new file into place: %w", dir, err)
	}
	return nil
}

// createTemp makes a new file for WriteFileAtomic with O_EXCL, so that the
// kernel applies the umask to perm (os.CreateTemp would fix it at 0600).
func createTemp(dir, base string, perm fs.FileMode) (*os.File, error) {
	var rnd [6]byte
	for try := 0; ; try++ {
		if _, err := rand.Read(rnd[:]); err != nil {
			return nil, err
		}
		name := filepath.Join(dir, "."+base+"."+hex.EncodeToString(rnd[:])+TempSuffix)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if err == nil || !errors.Is(err, fs.ErrExist) || try == 100 {
			return f, err
		}
	}
}

// resolveLinks follows symbolic links at path until it names something that
// is not a link, or nothing yet (a dangling link is written through to the
// file it names).
func resolveLinks(path string) (string, error) {
	p := path
	for hops := 0; hops < 40; hops++ {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return p, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		to, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(to) {
			to = filepath.Join(filepath.Dir(p), to)
		}
		p = to
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", path)
}

// syncDirectory fsyncs a directory so that a rename in it is durable.
// Windows cannot open a directory for syncing and orders renames itself.
func syncDirectory(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !isUnsupportedSync(err) {
		return err
	}
	return nil
}

// isUnsupportedSync tells a file system that cannot fsync a directory (some
// network and FUSE file systems answer EINVAL) from a real failure.
func isUnsupportedSync(err error) bool {
	return errors.Is(err, syscall.EINVAL)
}
