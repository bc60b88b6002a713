package metaindex

import (
	"github.com/umbravec/umbra/meta"
)

// The index evaluates a meta.Filter as a tree of its own, built once per
// evaluation from the filter's Parts.

// op is a filter node's operator.
type op uint8

const (
	opAll op = iota // every row (the zero Filter, And())
	opAnd
	opOr
	opNot
	opEq
	opNe
	opGt
	opGte
	opLt
	opLte
	opIn
	opNin
	opContains
	opNotContains
)

var opNames = [...]string{
	opEq: "$eq", opNe: "$ne", opGt: "$gt", opGte: "$gte", opLt: "$lt", opLte: "$lte",
	opIn: "$in", opNin: "$nin", opContains: "$contains", opNotContains: "$not_contains",
	opAnd: "$and", opOr: "$or", opNot: "$not",
}

var opOf = func() map[string]op {
	m := make(map[string]op, len(opNames))
	for o, name := range opNames {
		if name != "" {
			m[name] = op(o)
		}
	}
	return m
}()

// negated is the positive operator a negative one complements.
func (o op) negated() (op, bool) {
	switch o {
	case opNe:
		return opEq, true
	case opNin:
		return opIn, true
	case opNotContains:
		return opContains, true
	}
	return o, false
}

// maxWhereDepth bounds the nesting of a where document (meta's).
const maxWhereDepth = 32

// node is one part of a filter: a condition, or a combination of parts.
type node struct {
	op    op
	field string
	vals  []meta.Value
	subs  []*node
}

// compile is f's tree; nil for the zero Filter (every row). depth bounds
// the recursion: a filter nested past the evaluator's limit is refused.
func compile(f meta.Filter, depth int) (*node, error) {
	name, field, vals, parts := f.Parts()
	if name == "" {
		return nil, nil
	}
	if depth > 10*maxWhereDepth {
		return nil, tooLargef("filter: nested deeper than %d", 10*maxWhereDepth)
	}
	n := &node{op: opOf[name], field: field, vals: vals}
	if len(parts) > 0 {
		n.subs = make([]*node, len(parts))
		for i, p := range parts {
			s, err := compile(p, depth+1)
			if err != nil {
				return nil, err
			}
			n.subs[i] = s // nil: the zero Filter, every row
		}
	}
	return n, nil
}

// Absent is f with every condition on a field that known says no row has
// replaced by what it means then: a comparison ($eq, $gt, $gte, $lt, $lte,
// $in, $contains) by a filter matching no row, a negation ($ne, $nin,
// $not_contains) by one matching every row — the rule for rows without a
// field (see package meta's doc). An Index refuses a filter on a field it
// does not know (a typo must not filter everything out); a shard of a
// collection whose rows never brought a field the collection knows
// answers a filter on it with Absent instead, as one index holding every
// row would. f itself is unchanged, and returned as it is where nothing
// is replaced.
func Absent(f meta.Filter, known func(field string) bool) meta.Filter {
	name, field, _, parts := f.Parts()
	o := opOf[name]
	switch {
	case name == "":
		return f
	case o == opAnd || o == opOr || o == opNot:
		var subs []meta.Filter // copied at the first part that changes
		for i, s := range parts {
			t := Absent(s, known)
			if subs == nil && t != s {
				subs = append([]meta.Filter(nil), parts...)
			}
			if subs != nil {
				subs[i] = t
			}
		}
		switch {
		case subs == nil:
			return f
		case o == opAnd:
			return meta.And(subs...)
		case o == opOr:
			return meta.Or(subs...)
		}
		return meta.Not(subs[0])
	case known(field):
		return f
	}
	if _, negative := o.negated(); negative {
		return meta.Filter{}
	}
	return meta.Or()
}
