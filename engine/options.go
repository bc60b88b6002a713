package engine

import (
	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/resolve"
	"github.com/umbravec/umbra/meta"
)

// searchOptions are a search's options as the index reads them, from
// the resolved umbra.SearchOptions.
type searchOptions struct {
	allowIDs []uint64
	allowFn  func(id uint64) bool
	maxHits  int
	// approximate skips the float32 rescore of a compressed index
	// (precision.go).
	approximate bool
	// where (whereSet) and payload are Where and WithPayload (memory.go).
	where    meta.Filter
	whereSet bool
	payload  bool
}

func (o *searchOptions) filtered() bool { return o.allowIDs != nil || o.allowFn != nil || o.whereSet }

// localOnly is why an index refuses a cluster collection's options.
const localOnly = "a cluster collection's option; a local index always reads its own writes, and applies a write before it returns"

// collect resolves opts for the search named verb (the rules of
// every collection), refusing the options of a cluster collection.
func collect(verb string, opts []umbra.SearchOption) (searchOptions, error) {
	p, err := resolve.Search(verb, opts)
	if err != nil {
		return searchOptions{}, err
	}
	if err := p.Refuse(localOnly, "Eventual", "AfterToken"); err != nil {
		return searchOptions{}, err
	}
	return searchOptions{
		allowIDs: p.Allow, allowFn: p.AllowFunc, maxHits: p.MaxHits, approximate: p.Approximate,
		where: p.Where, whereSet: p.Where != (meta.Filter{}), payload: p.Payload,
	}, nil
}
