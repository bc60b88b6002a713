package engine

import "errors"

// Sentinel errors. Every error the engine returns wraps one of these (check
// with errors.Is) and says in its message which input or which device step
// was at fault.
var (
	ErrInvalidConfig = errors.New("invalid config")
	ErrDimMismatch   = errors.New("dimension mismatch")
	ErrNonFinite     = errors.New("value is NaN or infinite")
	ErrZeroVector    = errors.New("zero vector under cosine")
	ErrInvalidK      = errors.New("k must be at least 1")
	ErrTooLarge      = errors.New("too many vectors")
	ErrClosed        = errors.New("index is closed")
	ErrNoAdapter     = errors.New("no usable GPU adapter")
	ErrNoGPUSupport  = errors.New("built without GPU support")
	ErrGPU           = errors.New("GPU failure")
	// ErrDuplicateID: one call gives the same ID, or the same key, twice
	// (the message says which: "duplicate key: …").
	ErrDuplicateID = errors.New("duplicate ID")
	// ErrIDExists: an Add of an ID that is already stored (Upsert
	// replaces one).
	ErrIDExists = errors.New("ID already stored")
	// ErrKeyExists: an Add of a key that is already stored (Upsert
	// replaces its vector).
	ErrKeyExists = errors.New("key already stored")
	// ErrInvalidKey: a write gives a key that breaks the key rule: a key
	// is non-empty, valid UTF-8, without line breaks, and at most 4096
	// bytes (see WithKeys). The error names the key and its row.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidMeta: a write gives metadata the index cannot store: a
	// value of another kind than its field's, a name or value over
	// Limits.Meta (the error names the field and its row; package meta's
	// ErrInvalid or ErrTooLarge is wrapped too).
	ErrInvalidMeta = errors.New("invalid metadata")
	// ErrInvalidFilter: a search's Where filter names a field the index
	// does not know, or compares it with a value of another kind.
	ErrInvalidFilter = errors.New("invalid filter")
	// ErrNotFound: Delete or Get of an ID, or a Delete of a key, that is
	// not stored (the message says which: "key not found: …").
	ErrNotFound = errors.New("ID not found")
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
	// ErrIDCount: a call gives a different number of IDs than vectors.
	ErrIDCount = errors.New("IDs and vectors differ in number")
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
	Hint   Hint
	kind   error
}

func (e *AdapterError) Error() string { return e.kind.Error() + ": " + e.Reason }

// Unwrap returns the sentinel: ErrNoAdapter or ErrNoGPUSupport.
func (e *AdapterError) Unwrap() error { return e.kind }
