package metaindex

import (
	"math"
	"math/bits"
	"slices"

	"github.com/umbravec/umbra/meta"
)

// Eval sets in out exactly the bits of the rows whose metadata matches f
// (bit i%64 of word i/64 for row i) and clears every other bit. out must
// have (Len()+63)/64 words. A filter naming a field the index does not know,
// an operator that does not apply to a field's kind, or a value of a kind
// the field cannot be compared with is an error naming them, and out is
// left as it was. See the package doc for the rules.
func (x *Index) Eval(f meta.Filter, out []uint64) error {
	if len(out) != words(x.n) {
		return invalidf("filter: the bitmap has %d words, but %d rows take %d", len(out), x.n, words(x.n))
	}
	p, err := x.Prepare(f)
	if err != nil {
		return err
	}
	return p.Eval(out)
}

// Prepared is a filter compiled and checked against an index's schema,
// to be answered as a list of rows (Rows) or a bitmap (Eval) without
// compiling it again.
type Prepared struct {
	x *Index
	n *node
}

// Prepare compiles f and checks it as Eval does: a filter naming a field
// the index does not know, an operator that does not apply to a field's
// kind, or a value of a kind the field cannot be compared with is an
// error naming them.
func (x *Index) Prepare(f meta.Filter) (Prepared, error) {
	n, err := compile(f, 0)
	if err != nil {
		return Prepared{}, err
	}
	if err := x.validate(n); err != nil {
		return Prepared{}, err
	}
	return Prepared{x: x, n: n}, nil
}

// Rows is Eval's answer as the ascending list of matching rows, where
// the filter is one equality on a keyword field or one $contains on a
// tags field, whose value's rows are kept as a list (a value of at most
// 1/32 of the rows; see bitmapMin): then ok is true and rows is that
// list, read-only and valid until the index next changes. A selective
// filter's rows are read this way without a bitmap over every row. For
// any other filter ok is false and Eval is the way.
func (p Prepared) Rows() (rows []uint32, ok bool) {
	n := p.n
	if n == nil || len(n.vals) != 1 {
		return nil, false
	}
	c := p.x.cols[n.field]
	if !(n.op == opEq && c.kind == meta.Keyword || n.op == opContains && c.kind == meta.Tags) {
		return nil, false
	}
	code, found := c.dict[n.vals[0].Str()]
	if !found {
		return []uint32{}, true
	}
	post := &c.posts[code]
	if post.bits != nil {
		return nil, false
	}
	return post.rows, true
}

// Eval is Index.Eval of the prepared filter.
func (p Prepared) Eval(out []uint64) error {
	if len(out) != words(p.x.n) {
		return invalidf("filter: the bitmap has %d words, but %d rows take %d", len(out), p.x.n, words(p.x.n))
	}
	p.x.eval(p.n, out)
	return nil
}

// Validate checks f against the index's schema as Eval does, without
// evaluating it.
func (x *Index) Validate(f meta.Filter) error {
	n, err := compile(f, 0)
	if err != nil {
		return err
	}
	return x.validate(n)
}

func (x *Index) validate(n *node) error {
	if n == nil {
		return nil
	}
	switch n.op {
	case opAnd, opOr, opNot:
		for _, s := range n.subs {
			if err := x.validate(s); err != nil {
				return err
			}
		}
		return nil
	}
	c, ok := x.cols[n.field]
	if !ok {
		return invalidf("filter: unknown field %q (%s)", n.field, x.known())
	}
	name := opNames[n.op]
	switch {
	case c.kind == meta.Tags && n.op != opContains && n.op != opNotContains:
		return invalidf("filter: field %q is tags: it takes $contains or $not_contains, not %s", n.field, name)
	case c.kind != meta.Tags && (n.op == opContains || n.op == opNotContains):
		return invalidf("filter: %s applies to tags fields; field %q is %s (use $eq or $in)", name, n.field, c.kind)
	case c.kind == meta.Keyword && n.op >= opGt && n.op <= opLte:
		return invalidf("filter: %s compares ints, floats and times; field %q is keyword", name, n.field)
	}
	for _, v := range n.vals {
		if err := filterValue(n.field, name, c.kind, v); err != nil {
			return err
		}
	}
	return nil
}

// filterValue checks that operand v of field (of kind k) can be compared.
func filterValue(field, op string, k meta.Kind, v meta.Value) error {
	switch v.Kind() {
	case meta.Float:
		if math.IsNaN(v.Float()) || math.IsInf(v.Float(), 0) {
			return invalidf("filter: field %q: %s %v is not finite", field, op, v.Float())
		}
	case meta.Time:
		if badTime(v) {
			return invalidf("filter: field %q: %s time outside 1677-09-21..2262-04-11", field, op)
		}
	case 0:
		return invalidf("filter: field %q: %s has no value (the zero meta.Value)", field, op)
	}
	ok := v.Kind() == k
	switch k {
	case meta.Int, meta.Float:
		ok = v.Kind() == meta.Int || v.Kind() == meta.Float
	case meta.Tags:
		ok = v.Kind() == meta.Keyword // the tag of $contains
	}
	if !ok {
		return invalidf("filter: field %q is %s, but %s is given the %s value %s", field, k, op, v.Kind(), v)
	}
	return nil
}

func (x *Index) eval(n *node, out []uint64) {
	if n == nil {
		x.fill(out)
		return
	}
	switch n.op {
	case opAnd:
		x.evalAnd(n.subs, out)
	case opOr:
		if len(n.subs) == 0 {
			if n.op == opAnd {
				x.fill(out)
			} else {
				clear(out)
			}
			return
		}
		x.eval(n.subs[0], out)
		var tmp []uint64
		for _, s := range n.subs[1:] {
			if n.op == opAnd && allZero(out) {
				return
			}
			if tmp == nil {
				tmp = make([]uint64, len(out))
			}
			x.eval(s, tmp)
			if n.op == opAnd {
				for i, w := range tmp {
					out[i] &= w
				}
			} else {
				for i, w := range tmp {
					out[i] |= w
				}
			}
		}
	case opNot:
		x.eval(n.subs[0], out)
		x.invert(out)
	default:
		o, neg := n.op.negated()
		x.leaf(n, o, out)
		if neg {
			x.invert(out)
		}
	}
}

// evalAnd evaluates the AND of subs into out. Range conditions on one
// numeric field merge into one interval; conditions answered by postings go
// first; ranges are evaluated last and only over the words where rows are
// still set.
func (x *Index) evalAnd(subs []*node, out []uint64) {
	type span struct {
		c      *column
		lo, hi uint64
	}
	var spans []span
	var posts, rest []*node
outer:
	for _, s := range subs {
		n := s
		if n != nil && n.op >= opEq && n.op <= opLte && n.op != opNe {
			if c := x.cols[n.field]; numeric(c.kind) {
				lo, hi, ok := keyBounds(c.kind, n.op, n.vals[0])
				if !ok {
					clear(out)
					return
				}
				for i := range spans {
					if spans[i].c == c {
						spans[i].lo, spans[i].hi = max(spans[i].lo, lo), min(spans[i].hi, hi)
						if spans[i].lo > spans[i].hi {
							clear(out)
							return
						}
						continue outer
					}
				}
				spans = append(spans, span{c, lo, hi})
				continue
			}
			posts = append(posts, s)
			continue
		}
		if n != nil && (n.op == opIn || n.op == opContains) && !numeric(x.cols[n.field].kind) {
			posts = append(posts, s)
			continue
		}
		rest = append(rest, s)
	}
	rest = append(posts, rest...)
	if len(rest) == 0 {
		if len(spans) == 0 { // And() of nothing
			x.fill(out)
			return
		}
		clear(out)
		keyRange(spans[0].c.nums, spans[0].c.has, spans[0].lo, spans[0].hi, out)
		spans = spans[1:]
	} else {
		x.eval(rest[0], out)
		var tmp []uint64
		for _, s := range rest[1:] {
			if allZero(out) {
				return
			}
			if tmp == nil {
				tmp = make([]uint64, len(out))
			}
			x.eval(s, tmp)
			for i, w := range tmp {
				out[i] &= w
			}
		}
	}
	for _, sp := range spans {
		andRange(sp.c.nums, sp.c.has, sp.lo, sp.hi, out)
	}
}

func allZero(b []uint64) bool {
	for _, w := range b {
		if w != 0 {
			return false
		}
	}
	return true
}

// fill sets the bits of every row.
func (x *Index) fill(out []uint64) {
	for i := range out {
		out[i] = ^uint64(0)
	}
	x.maskTail(out)
}

// invert complements out over the rows.
func (x *Index) invert(out []uint64) {
	for i := range out {
		out[i] = ^out[i]
	}
	x.maskTail(out)
}

func (x *Index) maskTail(out []uint64) {
	if r := x.n & 63; r != 0 {
		out[len(out)-1] &= 1<<uint(r) - 1
	}
}

// leaf evaluates the positive operator o of leaf n (validated) into out.
func (x *Index) leaf(n *node, o op, out []uint64) {
	clear(out)
	c := x.cols[n.field]
	switch c.kind {
	case meta.Keyword, meta.Tags:
		for _, v := range n.vals {
			if code, ok := c.dict[v.Str()]; ok {
				c.posts[code].orInto(out)
			}
		}
	default:
		if o == opEq || o == opIn {
			pts := make([]uint64, 0, len(n.vals))
			for _, v := range n.vals {
				if lo, _, ok := keyBounds(c.kind, opEq, v); ok {
					pts = append(pts, lo)
				}
			}
			keyPoints(c.nums, c.has, pts, out)
			return
		}
		if lo, hi, ok := keyBounds(c.kind, o, n.vals[0]); ok {
			keyRange(c.nums, c.has, lo, hi, out)
		}
	}
}

// keyBounds is the closed interval [lo, hi] of order keys of a column of
// kind k whose values satisfy "value o v"; ok is false when none does.
func keyBounds(k meta.Kind, o op, v meta.Value) (lo, hi uint64, ok bool) {
	if k == meta.Float {
		flo, fhi, ok := floatBounds(o, v)
		if flo == 0 {
			flo = 0 // -0 → +0: the stored 0 is +0, and 0 ≥ -0
		}
		if fhi == 0 {
			fhi = 0
		}
		return floatKey(flo), floatKey(fhi), ok
	}
	ilo, ihi, ok := intBounds(o, v)
	return intKey(ilo), intKey(ihi), ok
}

// orInto sets p's rows in out.
func (p *posting) orInto(out []uint64) {
	if p.bits != nil {
		for i, w := range p.bits[:min(len(p.bits), len(out))] {
			out[i] |= w
		}
		return
	}
	for _, r := range p.rows {
		out[r>>6] |= 1 << (r & 63)
	}
}

const two63 = 9223372036854775808.0 // 2^63, exactly

// intBounds is the closed interval [lo, hi] of int64 column values v (meta.Int
// or meta.Time; for an meta.Int column also meta.Float) that satisfy "value o v", exactly;
// ok is false when none does.
func intBounds(o op, v meta.Value) (lo, hi int64, ok bool) {
	if v.Kind() != meta.Float {
		b := intOf(v)
		switch o {
		case opEq:
			return b, b, true
		case opGt:
			return b + 1, math.MaxInt64, b != math.MaxInt64
		case opGte:
			return b, math.MaxInt64, true
		case opLt:
			return math.MinInt64, b - 1, b != math.MinInt64
		case opLte:
			return math.MinInt64, b, true
		}
		return 0, 0, false
	}
	x := v.Float()
	switch o {
	case opEq:
		if x != math.Trunc(x) || x >= two63 || x < -two63 {
			return 0, 0, false
		}
		return int64(x), int64(x), true
	case opGt: // v ≥ ⌊x⌋+1
		if x >= two63 {
			return 0, 0, false
		}
		if x < -two63 {
			return math.MinInt64, math.MaxInt64, true
		}
		return int64(math.Floor(x)) + 1, math.MaxInt64, true
	case opGte: // v ≥ ⌈x⌉
		if x >= two63 {
			return 0, 0, false
		}
		if x <= -two63 {
			return math.MinInt64, math.MaxInt64, true
		}
		return int64(math.Ceil(x)), math.MaxInt64, true
	case opLt: // v ≤ ⌈x⌉-1
		if x <= -two63 {
			return 0, 0, false
		}
		if x >= two63 {
			return math.MinInt64, math.MaxInt64, true
		}
		return math.MinInt64, int64(math.Ceil(x)) - 1, true
	case opLte: // v ≤ ⌊x⌋
		if x < -two63 {
			return 0, 0, false
		}
		if x >= two63 {
			return math.MinInt64, math.MaxInt64, true
		}
		return math.MinInt64, int64(math.Floor(x)), true
	}
	return 0, 0, false
}

// cmpFloatInt compares r, an integer-valued float, with i exactly.
func cmpFloatInt(r float64, i int64) int {
	if r >= two63 {
		return 1
	}
	if r < -two63 {
		return -1
	}
	switch ri := int64(r); {
	case ri < i:
		return -1
	case ri > i:
		return 1
	}
	return 0
}

// floatBounds is the closed interval [lo, hi] of finite float column values
// that satisfy "value o v" (v meta.Float or meta.Int, compared exactly); ok is false
// when none does.
func floatBounds(o op, v meta.Value) (lo, hi float64, ok bool) {
	inf := math.Inf(1)
	up := func(f float64) float64 { return math.Nextafter(f, inf) }
	down := func(f float64) float64 { return math.Nextafter(f, -inf) }
	if v.Kind() == meta.Float {
		x := v.Float()
		if x == 0 {
			x = 0
		}
		switch o {
		case opEq:
			return x, x, true
		case opGt:
			return up(x), inf, true
		case opGte:
			return x, inf, true
		case opLt:
			return -inf, down(x), true
		case opLte:
			return -inf, x, true
		}
		return 0, 0, false
	}
	r := float64(intOf(v)) // rounded to nearest; an integer value
	c := cmpFloatInt(r, intOf(v))
	switch o {
	case opEq:
		return r, r, c == 0
	case opGt: // the least float > i
		if c <= 0 {
			r = up(r)
		}
		return r, inf, true
	case opGte: // the least float ≥ i
		if c < 0 {
			r = up(r)
		}
		return r, inf, true
	case opLt: // the greatest float < i
		if c >= 0 {
			r = down(r)
		}
		return -inf, r, true
	case opLte: // the greatest float ≤ i
		if c > 0 {
			r = down(r)
		}
		return -inf, r, true
	}
	return 0, 0, false
}

// keyRange sets the present rows whose key is in [lo, hi] (lo ≤ hi).
func keyRange(col []uint64, has []uint64, lo, hi uint64, out []uint64) {
	span := hi - lo
	for w, h := range has {
		if h == 0 {
			continue
		}
		out[w] = rangeWord(col, w, lo, span) & h
	}
}

// andRange clears in out the rows whose key is not in [lo, hi] or which
// lack the field. It reads the column only in chunks of andChunk words
// where out still has a row set, and reads such a chunk whole: skipping
// single words defeats the hardware prefetcher and costs more than reading
// them (measured: a scan skipping a random half of the words took twice
// the time of a full one).
func andRange(col []uint64, has []uint64, lo, hi uint64, out []uint64) {
	const andChunk = 16
	span := hi - lo
	for c := 0; c < len(out); c += andChunk {
		chunk := out[c:min(c+andChunk, len(out))]
		if allZero(chunk) {
			continue
		}
		for i, o := range chunk {
			w := c + i
			if w >= len(has) || has[w] == 0 {
				chunk[i] = 0
				continue
			}
			chunk[i] = o & has[w] & rangeWord(col, w, lo, span)
		}
	}
}

// rangeWord is the bits of the 64 rows of word w whose key k has
// k-lo ≤ span, branch-free: a full word in four independent chains (twice
// as fast as one), a short last word one row at a time.
func rangeWord(col []uint64, w int, lo, span uint64) uint64 {
	base := w << 6
	if base+64 > len(col) {
		var m uint64
		for j, k := range col[base:] {
			_, out := bits.Sub64(span, k-lo, 0) // 1 when k-lo > span
			m |= (out ^ 1) << uint(j)
		}
		return m
	}
	c := (*[64]uint64)(col[base : base+64])
	var m0, m1, m2, m3 uint64 // bits set where a key is out of range
	for j := range 16 {
		_, o0 := bits.Sub64(span, c[j]-lo, 0)
		_, o1 := bits.Sub64(span, c[j+16]-lo, 0)
		_, o2 := bits.Sub64(span, c[j+32]-lo, 0)
		_, o3 := bits.Sub64(span, c[j+48]-lo, 0)
		m0 |= o0 << uint(j)
		m1 |= o1 << uint(j)
		m2 |= o2 << uint(j)
		m3 |= o3 << uint(j)
	}
	return ^(m0 | m1<<16 | m2<<32 | m3<<48)
}

// keyPoints sets the present rows whose key is one of pts.
func keyPoints(col []uint64, has []uint64, pts []uint64, out []uint64) {
	slices.Sort(pts)
	pts = slices.Compact(pts)
	switch len(pts) {
	case 0:
		return
	case 1:
		keyRange(col, has, pts[0], pts[0], out)
		return
	}
	for w, h := range has {
		for h != 0 {
			j := trailingZeros(h)
			h &= h - 1
			if _, ok := slices.BinarySearch(pts, col[w<<6|j]); ok {
				out[w] |= 1 << uint(j)
			}
		}
	}
}
