package meta

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

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

// opSyms are the operators as String writes them.
var opSyms = [...]string{
	opEq: "==", opNe: "!=", opGt: ">", opGte: ">=", opLt: "<", opLte: "<=",
	opIn: "in", opNin: "not in", opContains: "contains", opNotContains: "not contains",
}

// fieldOps are the operators of a field condition, by name.
var fieldOps = map[string]op{
	"$eq": opEq, "$ne": opNe, "$gt": opGt, "$gte": opGte, "$lt": opLt, "$lte": opLte,
	"$in": opIn, "$nin": opNin, "$contains": opContains, "$not_contains": opNotContains,
}

const fieldOpList = "$eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $contains, $not_contains"

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

// Filter is a condition on a row's metadata, built with Eq, In, And, ... or
// read by ParseWhere, and evaluated by Index.Eval. The zero Filter matches
// every row. Filters are immutable and safe to share.
type Filter struct{ n *node }

type node struct {
	op    op
	field string
	vals  []Value  // leaf operands ($contains: one Keyword, the tag)
	subs  []Filter // $and, $or: the operands; $not: one
}

func leaf(o op, field string, vs ...Value) Filter {
	return Filter{&node{op: o, field: field, vals: vs}}
}

// Eq matches rows whose field equals v.
func Eq(field string, v Value) Filter { return leaf(opEq, field, v) }

// Ne matches rows whose field is not v, and rows without the field.
func Ne(field string, v Value) Filter { return leaf(opNe, field, v) }

// Gt matches rows whose field is greater than v.
func Gt(field string, v Value) Filter { return leaf(opGt, field, v) }

// Gte matches rows whose field is greater than or equal to v.
func Gte(field string, v Value) Filter { return leaf(opGte, field, v) }

// Lt matches rows whose field is less than v.
func Lt(field string, v Value) Filter { return leaf(opLt, field, v) }

// Lte matches rows whose field is less than or equal to v.
func Lte(field string, v Value) Filter { return leaf(opLte, field, v) }

// In matches rows whose field equals one of vs (none: no row).
func In(field string, vs ...Value) Filter { return leaf(opIn, field, slices.Clone(vs)...) }

// Nin matches rows whose field equals none of vs, and rows without the
// field (no vs: every row).
func Nin(field string, vs ...Value) Filter { return leaf(opNin, field, slices.Clone(vs)...) }

// Contains matches rows whose Tags field holds tag.
func Contains(field, tag string) Filter { return leaf(opContains, field, KeywordOf(tag)) }

// NotContains matches rows whose Tags field lacks tag, and rows without the
// field.
func NotContains(field, tag string) Filter { return leaf(opNotContains, field, KeywordOf(tag)) }

// And matches rows that match every one of fs (none: every row).
func And(fs ...Filter) Filter {
	if len(fs) == 0 {
		return Filter{}
	}
	if len(fs) == 1 {
		return fs[0]
	}
	return Filter{&node{op: opAnd, subs: slices.Clone(fs)}}
}

// Or matches rows that match at least one of fs (none: no row).
func Or(fs ...Filter) Filter {
	if len(fs) == 1 {
		return fs[0]
	}
	return Filter{&node{op: opOr, subs: slices.Clone(fs)}}
}

// Not matches the rows f does not match.
func Not(f Filter) Filter { return Filter{&node{op: opNot, subs: []Filter{f}}} }

// String is f written readably, for errors and traces: user == "ann",
// (age >= 18 AND tags contains "x"), NOT (...); the zero Filter is "all".
func (f Filter) String() string {
	var b strings.Builder
	f.write(&b)
	return b.String()
}

func (f Filter) write(b *strings.Builder) {
	n := f.n
	if n == nil {
		b.WriteString("all")
		return
	}
	switch n.op {
	case opAnd, opOr:
		if len(n.subs) == 0 {
			b.WriteString("none") // Or()
			return
		}
		sep := " AND "
		if n.op == opOr {
			sep = " OR "
		}
		b.WriteByte('(')
		for i, s := range n.subs {
			if i > 0 {
				b.WriteString(sep)
			}
			s.write(b)
		}
		b.WriteByte(')')
	case opNot:
		b.WriteString("NOT ")
		n.subs[0].write(b)
	default:
		b.WriteString(n.field)
		b.WriteByte(' ')
		b.WriteString(opSyms[n.op])
		b.WriteByte(' ')
		switch n.op {
		case opIn, opNin:
			b.WriteByte('[')
			for i, v := range n.vals {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(v.String())
			}
			b.WriteByte(']')
		default:
			if len(n.vals) == 1 {
				b.WriteString(n.vals[0].String())
			}
		}
	}
}

// maxWhereDepth bounds the nesting of a where document.
const maxWhereDepth = 32

// ParseWhere reads a filter written in the where syntax of Chroma (see the
// package doc, "Filters"). Values are typed as in ParseFields. An unknown
// operator, a bad shape, a duplicate key or nesting deeper than 32 objects
// is an error naming it. Whether the fields exist and their kinds fit is
// checked by Index.Eval, against the index's schema.
func ParseWhere(b []byte) (Filter, error) {
	if !validUTF8(b) {
		return Filter{}, invalidf("where: not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	p := &whereParser{dec: dec}
	tok, err := dec.Token()
	if err != nil {
		return Filter{}, jsonErr("where", err)
	}
	if tok != json.Delim('{') {
		return Filter{}, invalidf("where: want an object, got %s", describe(tok))
	}
	f, err := p.object(1)
	if err != nil {
		return Filter{}, err
	}
	if err := expectEOF(dec, "where"); err != nil {
		return Filter{}, err
	}
	return f, nil
}

type whereParser struct{ dec *json.Decoder }

func (p *whereParser) token(what string) (json.Token, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return nil, jsonErr(what, err)
	}
	return tok, nil
}

// object reads the rest of a where object, after its '{': the AND of its
// keys' conditions.
func (p *whereParser) object(depth int) (Filter, error) {
	if depth > maxWhereDepth {
		return Filter{}, tooLargef("where: nested deeper than %d objects", maxWhereDepth)
	}
	var parts []Filter
	seen := map[string]bool{}
	for p.dec.More() {
		tok, err := p.token("where")
		if err != nil {
			return Filter{}, err
		}
		key, _ := tok.(string)
		if seen[key] {
			return Filter{}, invalidf("where: key %q given twice in one object", key)
		}
		seen[key] = true
		var f Filter
		switch key {
		case "$and", "$or":
			f, err = p.list(key, depth)
		case "$not":
			if tok, err = p.token("where: $not"); err == nil {
				if tok != json.Delim('{') {
					return Filter{}, invalidf("where: $not takes an object, got %s", describe(tok))
				}
				var sub Filter
				sub, err = p.object(depth + 1)
				f = Not(sub)
			}
		default:
			if strings.HasPrefix(key, "$") {
				return Filter{}, invalidf("where: unknown operator %q at the top of an object (want $and, $or, $not or a field name)", key)
			}
			if err := checkName(key, Limits{}.WithDefaults()); err != nil {
				return Filter{}, err
			}
			f, err = p.cond(key)
		}
		if err != nil {
			return Filter{}, err
		}
		parts = append(parts, f)
	}
	if _, err := p.token("where"); err != nil { // '}'
		return Filter{}, err
	}
	return And(parts...), nil
}

// list reads the array of objects of $and or $or.
func (p *whereParser) list(key string, depth int) (Filter, error) {
	tok, err := p.token("where: " + key)
	if err != nil {
		return Filter{}, err
	}
	if tok != json.Delim('[') {
		return Filter{}, invalidf("where: %s takes an array of objects, got %s", key, describe(tok))
	}
	var subs []Filter
	for p.dec.More() {
		tok, err := p.token("where: " + key)
		if err != nil {
			return Filter{}, err
		}
		if tok != json.Delim('{') {
			return Filter{}, invalidf("where: %s takes an array of objects, got %s in it", key, describe(tok))
		}
		f, err := p.object(depth + 1)
		if err != nil {
			return Filter{}, err
		}
		subs = append(subs, f)
	}
	if _, err := p.token("where: " + key); err != nil { // ']'
		return Filter{}, err
	}
	if key == "$and" {
		return And(subs...), nil
	}
	return Or(subs...), nil
}

// cond reads field's condition: a value (equality) or an object of
// operators (their AND).
func (p *whereParser) cond(field string) (Filter, error) {
	tok, err := p.token(sprintf("where: field %q", field))
	if err != nil {
		return Filter{}, err
	}
	if tok == json.Delim('[') {
		return Filter{}, invalidf("where: field %q: an array is not a value to compare (use {\"$in\": [...]} or {\"$contains\": \"tag\"})", field)
	}
	if tok != json.Delim('{') {
		v, err := scalar(tok, field)
		if err != nil {
			return Filter{}, err
		}
		return Eq(field, v), nil
	}
	if !p.dec.More() {
		return Filter{}, invalidf("where: field %q: empty operator object (want one of %s)", field, fieldOpList)
	}
	var parts []Filter
	seen := map[string]bool{}
	for first := true; p.dec.More(); first = false {
		tok, err := p.token(sprintf("where: field %q", field))
		if err != nil {
			return Filter{}, err
		}
		key, _ := tok.(string)
		if key == "$time" && first { // {"f": {"$time": "..."}}: equality with a time
			v, err := timeRest(p.dec, field)
			if err != nil {
				return Filter{}, err
			}
			if _, err := p.token(sprintf("where: field %q", field)); err != nil {
				return Filter{}, err
			}
			return Eq(field, v), nil
		}
		if seen[key] {
			return Filter{}, invalidf("where: field %q: operator %q given twice", field, key)
		}
		seen[key] = true
		o, ok := fieldOps[key]
		if !ok {
			return Filter{}, invalidf("where: field %q: unknown operator %q (want one of %s)", field, key, fieldOpList)
		}
		f, err := p.operand(field, o)
		if err != nil {
			return Filter{}, err
		}
		parts = append(parts, f)
	}
	if _, err := p.token(sprintf("where: field %q", field)); err != nil {
		return Filter{}, err
	}
	return And(parts...), nil
}

// operand reads the operand of field's operator o.
func (p *whereParser) operand(field string, o op) (Filter, error) {
	what := sprintf("where: field %q: %s", field, opNames[o])
	tok, err := p.token(what)
	if err != nil {
		return Filter{}, err
	}
	switch o {
	case opContains, opNotContains:
		s, ok := tok.(string)
		if !ok {
			return Filter{}, invalidf("%s takes a string (a tag), got %s", what, describe(tok))
		}
		return leaf(o, field, KeywordOf(s)), nil
	case opIn, opNin:
		if tok != json.Delim('[') {
			return Filter{}, invalidf("%s takes an array of values, got %s", what, describe(tok))
		}
		var vs []Value
		for p.dec.More() {
			tok, err := p.token(what)
			if err != nil {
				return Filter{}, err
			}
			v, err := p.value(tok, field, what)
			if err != nil {
				return Filter{}, err
			}
			vs = append(vs, v)
		}
		if _, err := p.token(what); err != nil {
			return Filter{}, err
		}
		return leaf(o, field, vs...), nil
	}
	v, err := p.value(tok, field, what)
	if err != nil {
		return Filter{}, err
	}
	return leaf(o, field, v), nil
}

// value reads one operand value starting at tok: a string, a number or
// {"$time": ...}.
func (p *whereParser) value(tok json.Token, field, what string) (Value, error) {
	if tok == json.Delim('{') {
		return parseTime(p.dec, field)
	}
	if _, isDelim := tok.(json.Delim); isDelim {
		return Value{}, invalidf("%s: %s is not a value (want a string, a number or {\"$time\": ...})", what, describe(tok))
	}
	v, err := scalar(tok, field)
	if err != nil {
		return Value{}, err
	}
	return v, nil
}

// scalar types a string or number token.
func scalar(tok json.Token, field string) (Value, error) {
	switch t := tok.(type) {
	case string:
		return KeywordOf(t), nil
	case json.Number:
		return parseNumber(field, string(t))
	}
	return Value{}, invalidf("where: field %q: %s is not a value (want a string, a number or {\"$time\": ...})", field, describe(tok))
}

// AppendJSON appends f in the where syntax ParseWhere reads: every field
// condition as {"field": {"$op": value}}, $and, $or and $not spelled out,
// the zero Filter as {}. ParseWhere(f.AppendJSON(nil)) is a filter equal to
// f (same String).
func (f Filter) AppendJSON(dst []byte) []byte {
	n := f.n
	if n == nil {
		return append(dst, "{}"...)
	}
	dst = append(dst, '{')
	switch n.op {
	case opAnd, opOr:
		dst = appendJSONString(dst, opNames[n.op])
		dst = append(dst, ":["...)
		for i, s := range n.subs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = s.AppendJSON(dst)
		}
		dst = append(dst, ']')
	case opNot:
		dst = append(dst, `"$not":`...)
		dst = n.subs[0].AppendJSON(dst)
	default:
		dst = appendJSONString(dst, n.field)
		dst = append(dst, ":{"...)
		dst = appendJSONString(dst, opNames[n.op])
		dst = append(dst, ':')
		switch n.op {
		case opIn, opNin:
			dst = append(dst, '[')
			for i, v := range n.vals {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = appendValueJSON(dst, v)
			}
			dst = append(dst, ']')
		default:
			dst = appendValueJSON(dst, n.vals[0])
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}
