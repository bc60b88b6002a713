package meta

import (
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
// read by ParseWhere, and evaluated by the index a search runs on. The zero Filter matches
// every row. Filters are immutable and safe to share.
type Filter struct{ n *node }

type node struct {
	op    op
	field string
	vals  []Value  // leaf operands ($contains: one Keyword, the tag)
	subs  []Filter // $and, $or: the operands; $not: one
}

func leaf(o op, field string, vs ...Value) Filter {
	if len(vs) == 1 {
		return leaf1(o, field, vs[0])
	}
	return Filter{&node{op: o, field: field, vals: vs}}
}

// leafNode is a condition with one operand, made in one allocation.
type leafNode struct {
	n node
	v [1]Value
}

func leaf1(o op, field string, v Value) Filter {
	l := &leafNode{n: node{op: o, field: field}, v: [1]Value{v}}
	l.n.vals = l.v[:]
	return Filter{&l.n}
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

// Parts returns what f is made of: its operator as the where syntax names
// it ("$and", "$or" and "$not" combine parts; "$eq", "$ne", "$gt", "$gte",
// "$lt", "$lte", "$in", "$nin", "$contains" and "$not_contains" are
// conditions on field, compared with values, a tag for the two last), or
// "" for the zero Filter, which matches every row. An "$or" of no parts
// matches none. For a program that checks a filter against a schema of
// its own or turns it into another store's query; umbra's own index reads
// filters through it.
func (f Filter) Parts() (op, field string, values []Value, parts []Filter) {
	n := f.n
	if n == nil {
		return "", "", nil, nil
	}
	return opNames[n.op], n.field, n.vals, n.subs
}

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

// MaxWhereTerms bounds the terms of a where document that ParseWhere
// reads: each condition on a field (each operator; a bare value is $eq),
// each $and, $or and $not, each object in an $and or $or list and each
// value in an $in or $nin list is one. A filter an application writes by
// hand or from a UI has a handful (Chroma's hosted service allows 8
// predicates); 65,536 leaves room for an $in over a long list of values
// while bounding what one request can make a server build. A longer list
// of IDs or keys belongs in a search's allow list instead.
const MaxWhereTerms = 1 << 16

// whereAllocPerByte bounds ParseWhere's allocation: reading a document of
// n bytes allocates at most whereAllocPerByte*n bytes (and, when it is
// refused, its error message besides), whatever its shape. The shapes
// that come nearest are the most compact: an $or of two-key objects
// ({"a":1,"b":1}, 14 bytes, is two conditions and their AND, 332 bytes)
// at 24 bytes per byte, and a list of one-digit values ("1,", 2 bytes, a
// 40-byte Value) at 20. Filters of realistic names and values take 2 to 8
// times their size, and MaxWhereTerms caps any one at about 8 MiB besides
// its strings. TestParseWhereAllocation holds ParseWhere to it over
// generated filters of each shape.
const whereAllocPerByte = 32

// ParseWhere reads a filter written in the where syntax of Chroma (see the
// package doc, "Filters"). Values are typed as in ParseFields. An unknown
// operator, a bad shape, a duplicate key, nesting deeper than 32 objects,
// more than MaxWhereTerms terms and a string that is not Unicode (invalid
// UTF-8, or a \u escape of a lone UTF-16 surrogate such as "\ud800") are
// errors naming the field and operator. Whether the fields exist and their
// kinds fit is checked where the filter is evaluated, against the index's
// schema. Parsing
// allocates at most whereAllocPerByte bytes per byte of b.
func ParseWhere(b []byte) (Filter, error) {
	p := &whereParser{sc: newScanner(b)}
	tok, err := p.sc.next()
	if err != nil {
		return Filter{}, jsonErr("where", err)
	}
	if tok.kind != tokBeginObject {
		return Filter{}, invalidf("where: want an object, got %s", tok.describe())
	}
	f, err := p.object(1)
	if err != nil {
		return Filter{}, err
	}
	if err := expectEOF(p.sc, "where"); err != nil {
		return Filter{}, err
	}
	return f, nil
}

// whereParser reads a where document. It allocates only what the filter
// keeps, each slice at its final size (scanner.count), so that what a
// document costs is bounded by its size (whereAllocPerByte).
type whereParser struct {
	sc    *scanner
	terms int
}

// term counts n more terms, refusing more than MaxWhereTerms.
func (p *whereParser) term(n int) error {
	p.terms += n
	if p.terms > MaxWhereTerms {
		return tooLargef("where: more than %d terms (conditions, $and/$or/$not and their objects, $in/$nin values): the limit is meta.MaxWhereTerms", MaxWhereTerms)
	}
	return nil
}

// next is the scanner's next token. An error is said to be in field's
// condition (none: "") and in what (none: ""); the words are only made
// for an error.
func (p *whereParser) next(field, what string) (token, error) {
	tok, err := p.sc.next()
	if err != nil {
		place := "where"
		if field != "" {
			place += sprintf(": field %q", field)
		}
		if what != "" {
			place += ": " + what
		}
		return token{}, jsonErr(place, err)
	}
	return tok, nil
}

// and is And(parts...) without copying parts, which the caller gives up.
func and(parts []Filter) Filter {
	switch len(parts) {
	case 0:
		return Filter{}
	case 1:
		return parts[0]
	}
	return Filter{&node{op: opAnd, subs: parts}}
}

// Bits of whereParser.object's operator keys seen.
const (
	seenAnd = 1 << iota
	seenOr
	seenNot
)

// object reads the rest of a where object, after its '{': the AND of its
// keys' conditions.
func (p *whereParser) object(depth int) (Filter, error) {
	if depth > maxWhereDepth {
		return Filter{}, tooLargef("where: nested deeper than %d objects", maxWhereDepth)
	}
	n := p.sc.count(MaxWhereTerms)
	if p.terms+n > MaxWhereTerms {
		return Filter{}, p.term(n) // every key is a term at least
	}
	var parts []Filter
	if n > 1 {
		parts = make([]Filter, 0, n)
	}
	// The parts that are a field's: sorted by name once the object is
	// read, they show a field given twice.
	var few [8]int32
	fields := few[:0]
	if n > len(few) {
		fields = make([]int32, 0, n)
	}
	var one Filter
	ops := 0
	for k := 0; p.sc.more(); k++ {
		tok, err := p.next("", "a key")
		if err != nil {
			return Filter{}, err
		}
		var f Filter
		switch {
		case tok.is("$and"), tok.is("$or"), tok.is("$not"):
			key, bit := "$and", seenAnd
			switch {
			case tok.is("$or"):
				key, bit = "$or", seenOr
			case tok.is("$not"):
				key, bit = "$not", seenNot
			}
			if ops&bit != 0 {
				return Filter{}, invalidf("where: key %q given twice in one object", key)
			}
			ops |= bit
			if err := p.term(1); err != nil {
				return Filter{}, err
			}
			if key == "$not" {
				f, err = p.not(depth)
			} else {
				f, err = p.list(key, depth)
			}
		default:
			if len(tok.raw) > 0 && tok.raw[0] == '$' {
				return Filter{}, invalidf("where: unknown operator %q at the top of an object (want $and, $or, $not or a field name)", tok.raw)
			}
			key := tok.str()
			if err := checkName(key, Limits{}.WithDefaults()); err != nil {
				return Filter{}, err
			}
			fields = append(fields, int32(k))
			f, err = p.cond(key)
		}
		if err != nil {
			return Filter{}, err
		}
		if parts == nil && k > 0 { // count was off: malformed input, refused later
			parts = append(make([]Filter, 0, 2), one)
		}
		if parts != nil {
			parts = append(parts, f)
		} else {
			one = f
		}
	}
	if _, err := p.next("", ""); err != nil { // '}'
		return Filter{}, err
	}
	if len(fields) > 1 {
		name := func(i int32) string { return fieldName(parts[i]) }
		slices.SortFunc(fields, func(a, b int32) int { return strings.Compare(name(a), name(b)) })
		for i := 1; i < len(fields); i++ {
			if key := name(fields[i]); key == name(fields[i-1]) {
				return Filter{}, invalidf("where: key %q given twice in one object", key)
			}
		}
	}
	if parts == nil {
		return one, nil
	}
	return and(parts), nil
}

// fieldName is the field of the condition cond made of a field's key: a
// leaf's, or its first operator's ("" for no field).
func fieldName(f Filter) string {
	for n := f.n; n != nil; n = n.subs[0].n {
		if n.op != opAnd || len(n.subs) == 0 {
			return n.field
		}
	}
	return ""
}

// not reads the object of a $not.
func (p *whereParser) not(depth int) (Filter, error) {
	tok, err := p.next("", "$not")
	if err != nil {
		return Filter{}, err
	}
	if tok.kind != tokBeginObject {
		return Filter{}, invalidf("where: $not takes an object, got %s", tok.describe())
	}
	sub, err := p.object(depth + 1)
	if err != nil {
		return Filter{}, err
	}
	return Not(sub), nil
}

// list reads the array of objects of $and or $or.
func (p *whereParser) list(key string, depth int) (Filter, error) {
	tok, err := p.next("", key)
	if err != nil {
		return Filter{}, err
	}
	if tok.kind != tokBeginArray {
		return Filter{}, invalidf("where: %s takes an array of objects, got %s", key, tok.describe())
	}
	n := p.sc.count(MaxWhereTerms)
	if err := p.term(n); err != nil {
		return Filter{}, err
	}
	var subs []Filter
	if n > 0 {
		subs = make([]Filter, 0, n)
	}
	for p.sc.more() {
		tok, err := p.next("", key)
		if err != nil {
			return Filter{}, err
		}
		if tok.kind != tokBeginObject {
			return Filter{}, invalidf("where: %s takes an array of objects, got %s in it", key, tok.describe())
		}
		f, err := p.object(depth + 1)
		if err != nil {
			return Filter{}, err
		}
		subs = append(subs, f)
	}
	if _, err := p.next("", key); err != nil { // ']'
		return Filter{}, err
	}
	if key == "$and" {
		return and(subs), nil
	}
	if len(subs) == 1 {
		return subs[0], nil
	}
	return Filter{&node{op: opOr, subs: subs}}, nil
}

// cond reads field's condition: a value (equality) or an object of
// operators (their AND).
func (p *whereParser) cond(field string) (Filter, error) {
	tok, err := p.next(field, "")
	if err != nil {
		return Filter{}, err
	}
	if tok.kind == tokBeginArray {
		return Filter{}, invalidf("where: field %q: an array is not a value to compare (use {\"$in\": [...]} or {\"$contains\": \"tag\"})", field)
	}
	if err := p.term(1); err != nil {
		return Filter{}, err
	}
	if tok.kind != tokBeginObject {
		v, err := scalar(tok, field)
		if err != nil {
			return Filter{}, err
		}
		return leaf1(opEq, field, v), nil
	}
	if !p.sc.more() {
		return Filter{}, invalidf("where: field %q: empty operator object (want one of %s)", field, fieldOpList)
	}
	// At most one of each operator: parts fits on the stack.
	var parts [len(opNames)]Filter
	np, seen := 0, uint32(0)
	for first := true; p.sc.more(); first = false {
		tok, err := p.next(field, "")
		if err != nil {
			return Filter{}, err
		}
		if first && tok.is("$time") { // {"f": {"$time": "..."}}: equality with a time
			v, err := timeRest(p.sc, field)
			if err != nil {
				return Filter{}, err
			}
			if _, err := p.next(field, ""); err != nil {
				return Filter{}, err
			}
			return leaf1(opEq, field, v), nil
		}
		o, ok := fieldOps[string(tok.raw)]
		if ok && seen&(1<<o) != 0 {
			return Filter{}, invalidf("where: field %q: operator %q given twice", field, tok.raw)
		}
		if !ok {
			return Filter{}, invalidf("where: field %q: unknown operator %q (want one of %s)", field, tok.raw, fieldOpList)
		}
		seen |= 1 << o
		if !first {
			if err := p.term(1); err != nil {
				return Filter{}, err
			}
		}
		f, err := p.operand(field, o)
		if err != nil {
			return Filter{}, err
		}
		parts[np] = f
		np++
	}
	if _, err := p.next(field, ""); err != nil {
		return Filter{}, err
	}
	if np == 1 {
		return parts[0], nil
	}
	return and(slices.Clone(parts[:np])), nil
}

// operandOf names field's operator o in an error.
func operandOf(field string, o op) string {
	return sprintf("where: field %q: %s", field, opNames[o])
}

// operand reads the operand of field's operator o.
func (p *whereParser) operand(field string, o op) (Filter, error) {
	tok, err := p.sc.next()
	if err != nil {
		return Filter{}, jsonErr(operandOf(field, o), err)
	}
	switch o {
	case opContains, opNotContains:
		if tok.kind != tokString {
			return Filter{}, invalidf("%s takes a string (a tag), got %s", operandOf(field, o), tok.describe())
		}
		return leaf1(o, field, KeywordOf(tok.str())), nil
	case opIn, opNin:
		if tok.kind != tokBeginArray {
			return Filter{}, invalidf("%s takes an array of values, got %s", operandOf(field, o), tok.describe())
		}
		n := p.sc.count(MaxWhereTerms)
		if err := p.term(n); err != nil {
			return Filter{}, err
		}
		var vs []Value
		if n > 0 {
			vs = make([]Value, 0, n)
		}
		for p.sc.more() {
			tok, err := p.sc.next()
			if err != nil {
				return Filter{}, jsonErr(operandOf(field, o), err)
			}
			v, err := p.value(tok, field, o)
			if err != nil {
				return Filter{}, err
			}
			vs = append(vs, v)
		}
		if _, err := p.sc.next(); err != nil {
			return Filter{}, jsonErr(operandOf(field, o), err)
		}
		return Filter{&node{op: o, field: field, vals: vs}}, nil
	}
	v, err := p.value(tok, field, o)
	if err != nil {
		return Filter{}, err
	}
	return leaf1(o, field, v), nil
}

// value reads one operand value of field's operator o starting at tok: a
// string, a number or {"$time": ...}.
func (p *whereParser) value(tok token, field string, o op) (Value, error) {
	switch tok.kind {
	case tokBeginObject:
		return parseTime(p.sc, field)
	case tokBeginArray, tokEndArray, tokEndObject:
		return Value{}, invalidf("%s: %s is not a value (want a string, a number or {\"$time\": ...})", operandOf(field, o), tok.describe())
	}
	return scalar(tok, field)
}

// scalar types a string or number token.
func scalar(tok token, field string) (Value, error) {
	switch tok.kind {
	case tokString:
		return KeywordOf(tok.str()), nil
	case tokNumber:
		return parseNumber(field, tok.raw)
	}
	return Value{}, invalidf("where: field %q: %s is not a value (want a string, a number or {\"$time\": ...})", field, tok.describe())
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
