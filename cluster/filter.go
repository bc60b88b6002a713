package cluster

import (
	"encoding/json"
	"fmt"

	"github.com/umbravec/umbra/engine"
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

// negative are the operators that match rows without the field.
var negative = map[string]bool{"$ne": true, "$nin": true, "$not_contains": true}

const (
	matchAll  = `{}`
	matchNone = `{"$or":[]}`
)

// localFilter reads a filter in the canonical where syntax
// (meta.Filter.AppendJSON: one key per object) with every condition on a
// field outside known replaced by its constant.
func localFilter(where []byte, known map[string]meta.Kind) (meta.Filter, error) {
	b, err := localize(where, known, 0)
	if err != nil {
		return meta.Filter{}, fmt.Errorf("%w: %w", engine.ErrInvalidFilter, err)
	}
	f, err := meta.ParseWhere(b)
	if err != nil {
		return meta.Filter{}, fmt.Errorf("%w: %w", engine.ErrInvalidFilter, err)
	}
	return f, nil
}

func localize(raw []byte, known map[string]meta.Kind, depth int) ([]byte, error) {
	if depth > 64 {
		return nil, fmt.Errorf("where filter nested deeper than 64")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("where filter: %w", err)
	}
	if len(obj) == 0 {
		return []byte(matchAll), nil
	}
	if len(obj) != 1 {
		return nil, fmt.Errorf("where filter: an object of %d keys (a request carries the canonical form: one)", len(obj))
	}
	var k string
	var v json.RawMessage
	for k, v = range obj {
	}
	{
		switch k {
		case "$and", "$or":
			var subs []json.RawMessage
			if err := json.Unmarshal(v, &subs); err != nil {
				return nil, fmt.Errorf("where filter: %s: %w", k, err)
			}
			out := append([]byte(`{"`+k+`":[`), nil...)
			for i, sub := range subs {
				if i > 0 {
					out = append(out, ',')
				}
				b, err := localize(sub, known, depth+1)
				if err != nil {
					return nil, err
				}
				out = append(out, b...)
			}
			return append(out, "]}"...), nil
		case "$not":
			b, err := localize(v, known, depth+1)
			if err != nil {
				return nil, err
			}
			return append(append([]byte(`{"$not":`), b...), '}'), nil
		default:
			if _, ok := known[k]; ok {
				return raw, nil
			}
			var cond map[string]json.RawMessage
			if err := json.Unmarshal(v, &cond); err != nil || len(cond) != 1 {
				return nil, fmt.Errorf("where filter: field %q: not one {\"$op\": value}", k)
			}
			for op := range cond {
				if negative[op] {
					return []byte(matchAll), nil
				}
			}
			return []byte(matchNone), nil
		}
	}
}
