package engine

import (
	"fmt"

	"github.com/umbravec/umbra/meta"
)

// SearchOption narrows or bounds a search.
type SearchOption func(*searchOptions)

type searchOptions struct {
	allowIDs []uint64
	allowFn  func(id uint64) bool
	maxHits  int
	// maxHitsSet and approximate belong to one kind of search each
	// (SearchRange, and Search/SearchBatch); collect refuses the other.
	maxHitsSet bool
	// approximate skips the float32 rescore of a compressed index
	// (precision.go).
	approximate bool
	// where (whereSet) and payload are Where and WithPayload (memory.go).
	where    meta.Filter
	whereSet bool
	payload  bool
}

func (o *searchOptions) filtered() bool { return o.allowIDs != nil || o.allowFn != nil || o.whereSet }

// collect applies opts for the search named verb, refusing an option that
// search cannot honour: MaxHits outside SearchRange, Approximate in it.
func collect(verb string, opts []SearchOption) (searchOptions, error) {
	var o searchOptions
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	switch {
	case o.maxHitsSet && verb != "SearchRange":
		return o, fmt.Errorf("%w: MaxHits bounds SearchRange; %s takes k", ErrInvalidOption, verb)
	case o.approximate && verb == "SearchRange":
		return o, fmt.Errorf("%w: Approximate with SearchRange, which is always exact", ErrInvalidOption)
	}
	return o, nil
}

// Allow restricts a search to the stored vectors with these IDs: the
// result is the true top k among them, however few they are (the filter is
// applied in the search, not after it: only the allowed rows are read when
// they are few, and the scan skips the others when they are not). IDs
// that are not stored are ignored. A later Allow or AllowFunc replaces an
// earlier one.
func Allow(ids ...uint64) SearchOption {
	if ids == nil {
		ids = []uint64{}
	}
	return func(o *searchOptions) { o.allowIDs, o.allowFn = ids, nil }
}

// AllowFunc restricts a search to the stored vectors whose ID keep accepts:
// the caller's own predicate (this user, this conversation, this tag),
// evaluated once per stored vector per call, before the scan.
func AllowFunc(keep func(id uint64) bool) SearchOption {
	return func(o *searchOptions) { o.allowFn, o.allowIDs = keep, nil }
}

// MaxHits caps how many hits SearchRange returns (the best ones); 0 means
// no cap. Search and SearchBatch refuse it (ErrInvalidOption): their k is
// the cap.
func MaxHits(n int) SearchOption {
	return func(o *searchOptions) { o.maxHits, o.maxHitsSet = n, true }
}
