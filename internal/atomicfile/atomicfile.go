// Package atomicfile replaces a file so that it holds either its old
// content or all of the new, even if the process or the machine stops
// mid-way: package host's writers and the command's outputs (export's ID
// and key files, metadata and payload files) go through Write.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/umbravec/umbra/internal/storefile"
)

// Write writes a file at path with what write produces, so that
// path holds either its old content or all of the new, even if the process
// or the machine stops mid-way. It is the store's own atomic write
// (storefile.WriteFile), with symbolic links resolved first:
//
//   - write gets a buffered writer on a new temporary file in the same
//     directory, named ".NAME.tmp-" and 16 hex digits (no reader accepts
//     its extension; it is what a process killed mid-write left behind,
//     never output);
//   - the file is flushed and fsynced, then renamed over path, then the
//     directory is fsynced so that the rename itself survives a crash;
//   - an existing file at path keeps its permission bits exactly (a 0600
//     file stays 0600); a new one gets perm, less the umask;
//   - if path is a symbolic link (or a chain of them), the file it points to
//     is replaced and the link is kept; a dangling link is written through
//     to the file it names;
//   - on any error, or a panic in write, the temporary file is removed and
//     path is untouched.
//
// A path that exists but is not a regular file (a directory, a device, a
// FIFO) is refused. Owner, group and extended attributes are not carried
// over.
func Write(path string, perm fs.FileMode, write func(io.Writer) error) error {
	return writeFS(storefile.OS, path, perm, write)
}

// writeFS is Write through fsys, which tests make fail.
func writeFS(fsys storefile.FS, path string, perm fs.FileMode, write func(io.Writer) error) error {
	target, err := resolveLinks(path)
	if err != nil {
		return err
	}
	return storefile.WriteFile(fsys, target, perm, func(w *bufio.Writer) error { return write(w) })
}

// resolveLinks follows symbolic links at path until it names something that
// is not a link, or nothing yet (a dangling link is written through to the
// file it names, as a shell's redirection would; a store refuses one, see
// storefile.Resolve).
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
