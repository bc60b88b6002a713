package engine

import (
	"errors"

	"github.com/umbravec/umbra"
)

// Errors of an index's device and of a store's files. Every error the
// engine returns wraps one of these or one of package umbra's (check with
// errors.Is) and says in its message which input or which device step was
// at fault.
var (
	ErrNoAdapter    = errors.New("no usable GPU adapter")
	ErrNoGPUSupport = errors.New("built without GPU support")
	ErrGPU          = errors.New("GPU failure")
	// ErrLocked: the store is open for writing elsewhere, in this process
	// or another.
	ErrLocked = errors.New("store is locked")
	// ErrBadStore: a store file is damaged, truncated, or not a store
	// file; the error names the file and the section.
	ErrBadStore = errors.New("bad store file")
	// ErrReadOnly: a write to a store opened with ReadOnly.
	ErrReadOnly = errors.New("store is open read-only")
	// ErrStoreChanged: the base file a store's rows are mapped from was
	// truncated or rewritten in place by someone else; the index refuses
	// every call from then on. Reopen the store.
	ErrStoreChanged = errors.New("store file changed underneath")
)

// keyError is an error about a key that wraps an ID-named sentinel
// (ErrDuplicateID, ErrNotFound) but words itself in keys, so that a
// program checks one sentinel and a person reads the right noun.
type keyError struct {
	msg      string
	sentinel error
}

func (e *keyError) Error() string { return e.msg }
func (e *keyError) Unwrap() error { return e.sentinel }

// AdapterError is what New returns under Device GPU when no adapter can be
// used: the probe's reason and a hint for fixing it, the same two Info
// reports after a fallback under Auto. It unwraps to ErrNoAdapter or
// ErrNoGPUSupport.
type AdapterError struct {
	Reason string
	Hint   umbra.Hint
	kind   error
}

func (e *AdapterError) Error() string { return e.kind.Error() + ": " + e.Reason }

// Unwrap returns the sentinel: ErrNoAdapter or ErrNoGPUSupport.
func (e *AdapterError) Unwrap() error { return e.kind }
