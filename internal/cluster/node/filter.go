package node

import (
	"fmt"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/metaindex"
	"github.com/umbravec/umbra/meta"
)

// A collection's metadata schema is one for all its shards, but a shard's
// store knows only the fields its own rows have brought (engine stores
// fix a field's kind at its first value), and the engine refuses a filter
// on a field it does not know. So a filter goes to every shard in the
// where syntax, checked by the client against the collection's schema
// (the record in the collections bucket), and each replica first replaces
// every condition on a field its store does not know by what it means
// there: no row of the shard has ever had the field, so a positive
// comparison ($eq, $gt, …, $in, $contains) matches no row and a negation
// ($ne, $nin, $not_contains) matches every row — the rule for rows without
// the field (package meta). The answer is then the one a single store
// holding every row would give.

// localFilter reads a filter in the where syntax with every condition on a
// field outside known replaced by its constant (meta.Filter.Absent). The
// filter is parsed once, by meta.ParseWhere, so a node inherits its bounds
// (meta.MaxWhereTerms, and what parsing may allocate per byte).
func localFilter(where []byte, known map[string]meta.Kind) (meta.Filter, error) {
	f, err := meta.ParseWhere(where)
	if err != nil {
		return meta.Filter{}, fmt.Errorf("%w: %w", umbra.ErrInvalidFilter, err)
	}
	return metaindex.Absent(f, func(field string) bool { _, ok := known[field]; return ok }), nil
}
