package umbra

import (
	"errors"

	"github.com/umbravec/umbra/internal/resolve"
)

// Errors that every Collection returns, an engine.Index and a cluster
// collection alike. Each error wraps one of these (check with errors.Is)
// and says in its message which input was at fault: the row, the column,
// the key, the option, the field.
var (
	// ErrInvalidConfig: a configuration (engine.Config, a cluster's
	// CollectionConfig) or a name parsed into one (ParseMetric,
	// ParsePrecision) is not one umbra can use; the error names the field.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrInvalidOption: a call was given options it cannot honour: one
	// given twice, two ways of naming rows, an Upsert with no names, an
	// option for another kind of call, or one this implementation does
	// not have (Approximate on a cluster collection, Eventual on a local
	// index). The error names the option.
	ErrInvalidOption = resolve.ErrInvalidOption
	// ErrDimMismatch: a vector or query of another dimension than the
	// collection's.
	ErrDimMismatch = errors.New("dimension mismatch")
	// ErrNonFinite: a vector or query holds a NaN or an infinity.
	ErrNonFinite = errors.New("value is NaN or infinite")
	// ErrZeroVector: a vector or query of norm 0 under Cosine, which has
	// no direction.
	ErrZeroVector = errors.New("zero vector under cosine")
	// ErrInvalidK: a search's k is below 1.
	ErrInvalidK = errors.New("k must be at least 1")
	// ErrTooLarge: a write or a request past a limit (rows, bytes, a
	// payload, a message); nothing is stored.
	ErrTooLarge = errors.New("too many vectors")
	// ErrClosed: a call on a closed index or collection handle.
	ErrClosed = errors.New("index is closed")
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
	// ErrInvalidMeta: a write gives metadata that cannot be stored: a
	// value of another kind than its field's, a name or value over a
	// limit (the error names the field and its row; package meta's
	// ErrInvalid or ErrTooLarge is wrapped too).
	ErrInvalidMeta = errors.New("invalid metadata")
	// ErrInvalidFilter: a Where filter names a field the collection does
	// not know, or compares it with a value of another kind.
	ErrInvalidFilter = errors.New("invalid filter")
	// ErrNotFound: a Delete of an ID or key that is not stored (the
	// message says which: "key not found: …").
	ErrNotFound = errors.New("ID not found")
	// ErrIDCount: a call gives a different number of IDs, keys,
	// metadata rows or payloads than vectors.
	ErrIDCount = errors.New("IDs and vectors differ in number")
	// ErrSource is wrapped, beside the source's own error, by the error of
	// an Add or Upsert whose RowSource failed to give a row (a malformed
	// or truncated file, a failed read) or gave other rows than it
	// announced.
	ErrSource = errors.New("reading rows failed")
)

// MaxDim is the largest vector dimension a collection accepts: 16,777,216
// components, 64 MiB a vector, far past any embedding model, and small
// enough that every size computed from it (a row, a batch of queries, a
// device binding) stays exact in 64-bit arithmetic.
const MaxDim = 1 << 24

// DefaultMaxPayloadBytes is the largest payload a row takes by default
// (engine.Limits.MaxPayloadBytes 0; a cluster collection's bound).
const DefaultMaxPayloadBytes = 1 << 20
