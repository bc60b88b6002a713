package storefile

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns about a file's contents
// is a *FormatError wrapping one of the first five; test with errors.Is.
var (
	// ErrMagic: the file does not start with this package's magic bytes; it
	// is not a store file (or not the kind of store file expected).
	ErrMagic = errors.New("wrong magic")
	// ErrVersion: the file is a store file of a format version this reader
	// does not know.
	ErrVersion = errors.New("unsupported format version")
	// ErrTruncated: the file ends before a section it declares.
	ErrTruncated = errors.New("truncated")
	// ErrCorrupt: a checksum does not match, or a field holds a value no
	// writer produces.
	ErrCorrupt = errors.New("corrupt")
	// ErrUnsupported: a well-formed file uses a feature this build does not
	// implement (a storage precision it does not know), or the platform
	// lacks what an operation needs (file locks).
	ErrUnsupported = errors.New("unsupported")

	// ErrInvalid: a Snapshot or Record handed to a writer is inconsistent
	// (row count not matching IDs, stride not a multiple of 4, ...). Nothing
	// was written.
	ErrInvalid = errors.New("invalid argument")
	// ErrLocked: another open lock, in this or another process, holds the
	// store's lock file.
	ErrLocked = errors.New("store is locked by another writer")
	// ErrClosed: the Log was closed, or an earlier write or fsync failed and
	// the Log refuses further appends (after a failed fsync the kernel may
	// have dropped the dirty pages; retrying would acknowledge lost data).
	ErrClosed = errors.New("log closed")
)

// FormatError reports damage in a store file: which file, which section
// ("header", "rows", "ids", "tombstones", "keys", "log header", "log record
// 12", ...), at which byte offset, and why. Err is one of the sentinels.
type FormatError struct {
	Path    string
	Section string
	Offset  int64
	Err     error
	Detail  string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s: %s (byte %d): %v: %s", e.Path, e.Section, e.Offset, e.Err, e.Detail)
}

func (e *FormatError) Unwrap() error { return e.Err }

func formatErr(path, section string, off int64, sentinel error, format string, args ...any) error {
	return &FormatError{Path: path, Section: section, Offset: off, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}
