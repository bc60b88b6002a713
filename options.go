package umbra

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/umbravec/umbra/internal/resolve"
	"github.com/umbravec/umbra/meta"
)

// Options are values, made by the functions below and read by each
// implementation of Collection through one internal resolver: every rule
// about them (given twice, a nil option, a bad value, an option for
// another kind of call) is judged there, once, so it is the same
// everywhere. What an implementation cannot honour it refuses itself,
// naming the option: ErrInvalidOption, never ignored.

// SearchOption is an option of a search (Search, SearchBatch,
// SearchRange) on any Collection, made by Allow, AllowFunc, Where,
// MaxHits, Approximate, WithPayload, Eventual and AfterToken. A nil
// SearchOption is skipped.
type SearchOption func(*resolve.SearchParams)

// WriteOption is an option of a write (Add, Upsert, Delete) on any
// Collection, made by WithIDs, WithKeys, WithMeta, WithPayloads, NoWait
// and IdempotencyKey: how its rows are named and what they carry. A nil
// WriteOption is skipped.
type WriteOption func(*resolve.WriteParams)

// Allow restricts a search to the stored vectors with these IDs: the
// result is the true top k among them, however few they are (the filter is
// applied inside the scan, not after it). IDs that are not stored are
// ignored. Allow with no IDs allows nothing.
func Allow(ids ...uint64) SearchOption {
	if ids == nil {
		ids = []uint64{}
	}
	return func(p *resolve.SearchParams) { p.Mark(resolve.Allow); p.Allow = ids }
}

// AllowFunc restricts a search to the stored vectors whose ID keep accepts:
// the caller's own predicate (this user, this conversation, this tag),
// evaluated once per stored vector per call, before the scan. A cluster
// collection refuses it: its rows are searched where they are held.
func AllowFunc(keep func(id uint64) bool) SearchOption {
	return func(p *resolve.SearchParams) { p.Mark(resolve.AllowFunc); p.AllowFunc = keep }
}

// Where restricts a search to the rows whose metadata matches f (see
// package meta for the filter language): the answer is the true top k of
// that subset, and k is not capped by it. The filter is evaluated once per
// call from per-field indexes into the row bitmap the scan takes; it
// combines with Allow or AllowFunc (a row must pass both). A field the
// collection does not know, or a value of another kind than the field's,
// is ErrInvalidFilter naming it.
func Where(f meta.Filter) SearchOption {
	return func(p *resolve.SearchParams) { p.Mark(resolve.Where); p.Where = f }
}

// MaxHits caps how many hits SearchRange returns (the best ones); 0 means
// no cap, and a negative n is ErrInvalidOption. Search and SearchBatch
// refuse it (ErrInvalidOption): their k is the cap.
func MaxHits(n int) SearchOption {
	return func(p *resolve.SearchParams) {
		p.Mark(resolve.MaxHits)
		if n < 0 {
			p.Reject(fmt.Errorf("%w: MaxHits(%d): a cap of at least 1, or 0 for none", ErrInvalidOption, n))
		}
		p.MaxHits = n
	}
}

// Approximate makes a search over a compressed index (engine's
// Precision F16 or Int8) skip the float32 rescore: the hits are the k
// best compressed estimates and their scores are those estimates, faster
// by the rescore's share but no longer guaranteed to be the exact answer.
// It changes nothing under Precision F32, which stays exact; SearchRange,
// which is always exact, and a cluster collection, whose answers are
// always exact, refuse it (ErrInvalidOption).
func Approximate() SearchOption {
	return func(p *resolve.SearchParams) { p.Mark(resolve.Approximate); p.Approximate = true }
}

// WithPayload makes a search return each hit's payload (Hit.Payload).
func WithPayload() SearchOption {
	return func(p *resolve.SearchParams) { p.Mark(resolve.Payload); p.Payload = true }
}

// Eventual lets any replica of a cluster collection answer, however far
// it has applied the collection's writes (read-your-writes dropped); the
// answer is still exact for the rows that replica holds. A local index,
// which always reads its own writes, refuses it (ErrInvalidOption).
func Eventual() SearchOption {
	return func(p *resolve.SearchParams) { p.Mark(resolve.Eventual); p.Eventual = true }
}

// AfterToken makes a search of a cluster collection see every write tok
// covers (another handle's, say: its cluster.Collection.Token), besides
// the handle's own. A local index, which always reads its own writes,
// refuses it (ErrInvalidOption).
func AfterToken(tok []uint64) SearchOption {
	if tok == nil {
		tok = []uint64{}
	}
	return func(p *resolve.SearchParams) { p.Mark(resolve.After); p.After = tok }
}

// WithIDs names the rows by the caller's IDs, one per row in order (for
// Delete: the IDs to delete). An Add may give WithKeys beside it: see
// WithKeys.
func WithIDs(ids ...uint64) WriteOption {
	if ids == nil {
		ids = []uint64{}
	}
	return func(p *resolve.WriteParams) { p.Mark(resolve.IDs); p.IDs = ids }
}

// WithKeys names the rows by string keys, one per row in order: each new
// key gets a new ID, a stored key names its vector (for Delete: the keys
// to delete).
//
// A key is non-empty, valid UTF-8, holds no line break (\n, \r) and is at
// most 4096 bytes: keys come back as text, one per line in the umbra
// command's key files and as JSON strings, where an empty, broken or
// multi-line key could not be read back as itself. Add and Upsert refuse
// any other with ErrInvalidKey, naming the key and its vector, and store
// nothing.
//
// An Add on an engine.Index may name its rows by WithIDs and WithKeys
// together: each row is stored under its ID and named by its key, and an
// empty key leaves that row without one. That is how a store is rebuilt
// from its export with the same IDs and keys. Upsert and Delete take one
// of the two, and so does every write to a cluster collection.
func WithKeys(keys ...string) WriteOption {
	if keys == nil {
		keys = []string{}
	}
	return func(p *resolve.WriteParams) { p.Mark(resolve.Keys); p.Keys = keys }
}

// WithMeta gives each row of an Add or Upsert its metadata, one Fields per
// row in order (nil: a row without metadata). A field's kind is fixed by
// the first value stored for it (or declared ahead: engine.Config.Fields);
// a value of another kind, a field name or value over a limit, or a count
// other than the rows' is refused (ErrInvalidMeta, ErrIDCount) with
// nothing stored. An Upsert that gives WithMeta replaces the metadata of
// the rows it replaces; one that does not leaves it as it was.
func WithMeta(rows ...meta.Fields) WriteOption {
	if rows == nil {
		rows = []meta.Fields{}
	}
	return func(p *resolve.WriteParams) { p.Mark(resolve.Meta); p.Meta = rows }
}

// WithPayloads gives each row of an Add or Upsert an opaque payload, one
// per row in order (nil or empty: none), stored verbatim and returned by
// Get and by searches given WithPayload. A payload over the limit
// (DefaultMaxPayloadBytes unless the index says otherwise) is refused
// (ErrTooLarge) with nothing stored. An Upsert that gives WithPayloads
// replaces the payloads of the rows it replaces; one that does not leaves
// them as they were.
func WithPayloads(payloads ...[]byte) WriteOption {
	if payloads == nil {
		payloads = [][]byte{}
	}
	return func(p *resolve.WriteParams) { p.Mark(resolve.Payloads); p.Payloads = payloads }
}

// NoWait makes a write to a cluster collection return once JetStream has
// acknowledged it (it is then durable and will be applied), without
// waiting for a replica to apply it: apply-time refusals (an ID already
// stored, a key not found) are then not reported, and an Upsert by key
// returns the IDs new keys get, with 0 for keys that were stored. A local
// index, whose writes are applied before they return, refuses it
// (ErrInvalidOption).
func NoWait() WriteOption {
	return func(p *resolve.WriteParams) { p.Mark(resolve.NoWait); p.NoWait = true }
}

// idempotencyRule is what an idempotency key may hold: it becomes part of
// a NATS message ID.
var idempotencyRule = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// IdempotencyKey makes a write to a cluster collection, and its retries by
// a later call given the same key within the collection's duplicate
// window, be stored once: the later call reports the first one's outcome
// and IDs. key is 1 to 128 letters, digits, '-' or '_'
// (cluster.NewIdempotencyKey makes one); another is ErrInvalidOption. A
// local index, whose writes are acknowledged or not before they return,
// refuses it (ErrInvalidOption).
func IdempotencyKey(key string) WriteOption {
	return func(p *resolve.WriteParams) {
		p.Mark(resolve.Idempotency)
		if !idempotencyRule.MatchString(key) {
			p.Reject(fmt.Errorf("%w: idempotency key %s: 1 to 128 letters, digits, '-' or '_'", ErrInvalidOption, quote(key)))
		}
		p.IdempotencyKey = key
	}
}

// quote quotes s for a message, cut short when long.
func quote(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q…", strings.ToValidUTF8(s[:64], ""))
	}
	return fmt.Sprintf("%q", s)
}
