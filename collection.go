package umbra

import (
	"context"

	"github.com/umbravec/umbra/meta"
)

// Collection is what a store or an in-memory index (*engine.Index) and a
// cluster collection (*cluster.Collection) all are: rows under IDs, named
// by keys if the caller likes, with metadata and a payload each, searched
// exactly. A program written against it (the umbra command; an HTTP face)
// does not care which one it holds: every method means the same on each,
// every option too, and the errors are this package's.
type Collection interface {
	// Add stores rows under new IDs (assigned, or the caller's: WithIDs,
	// WithKeys) and returns them; Upsert stores or replaces rows named by
	// WithIDs or WithKeys; Delete removes the rows they name.
	Add(ctx context.Context, rows RowSource, opts ...WriteOption) ([]uint64, error)
	Upsert(ctx context.Context, rows RowSource, opts ...WriteOption) ([]uint64, error)
	Delete(ctx context.Context, opts ...WriteOption) error
	// Search returns the k rows most similar to query, best first, equal
	// scores by lower ID: the exact answer, or an error. SearchBatch does
	// it for every query; SearchRange returns every row whose score is
	// within threshold (at least it under Cosine and Dot, at most under
	// L2), best first, up to MaxHits.
	Search(ctx context.Context, query []float32, k int, opts ...SearchOption) ([]Hit, error)
	SearchBatch(ctx context.Context, queries [][]float32, k int, opts ...SearchOption) ([][]Hit, error)
	SearchRange(ctx context.Context, query []float32, threshold float32, opts ...SearchOption) ([]Hit, error)
	// Get returns the stored rows sel selects, in ID order: their IDs and
	// keys always, their vectors, metadata and payloads when sel asks. A
	// row sel names that is not stored is absent, not an error.
	Get(ctx context.Context, sel Selection) ([]Record, error)
	// Count returns how many stored rows where matches (the zero Filter:
	// every row).
	Count(ctx context.Context, where meta.Filter) (int, error)
	// Summary describes the collection: its rows, its shape, and where
	// its searches run, in words.
	Summary(ctx context.Context) (Summary, error)
	// Close releases what the handle holds; calls after it return
	// ErrClosed.
	Close() error
}

// Selection says which stored rows Get returns, and what of each. Rows
// come in ID order; the zero Selection selects every row's ID and key.
type Selection struct {
	// IDs or Keys, when non-nil, select those rows only (absent ones are
	// skipped); give one or the other. Nil selects every row.
	IDs  []uint64
	Keys []string
	// Where keeps the rows whose metadata matches it (the zero Filter
	// keeps every row), as a search's Where does.
	Where meta.Filter
	// From skips the rows whose ID is below it: a cursor for reading a
	// large collection a page at a time (the next page's From is the last
	// ID read plus one).
	From uint64
	// Offset skips that many selected rows, and Limit returns at most
	// that many after them (0: every one).
	Offset, Limit int
	// Vectors, Meta and Payloads ask for each row's stored vector (under
	// Cosine, the unit vector the collection keeps), metadata and payload.
	Vectors, Meta, Payloads bool
}

// A Selection no implementation can honour (IDs with Keys, a negative
// Offset or Limit) makes Get fail with ErrInvalidOption naming the field.

// Record is one stored row, as Get returns it.
type Record struct {
	ID  uint64
	Key string // empty when the row has no key
	// Vector, Meta and Payload are set when the Selection asked for them
	// (Meta and Payload stay nil for a row that has none).
	Vector  []float32
	Meta    meta.Fields
	Payload []byte
}

// Summary describes a collection as its Summary method reports it.
type Summary struct {
	// Name is the store's path or the cluster collection's name ("" for
	// an in-memory index).
	Name      string
	Rows      int // stored rows, deleted ones not counted
	Dim       int
	Metric    Metric
	Precision Precision
	// Fields are the metadata fields the collection knows, and their
	// kinds.
	Fields map[string]meta.Kind
	// Shards is how many parts the rows are spread over: a cluster
	// collection's shards, 1 for a local index.
	Shards int
	// Backend says in words where searches run: the device and kernel of
	// a local index (engine.Info's first line), or the cluster and its
	// shards.
	Backend string
}
