package meta

import (
	"math"
	"slices"
)

// Eval sets in out exactly the bits of the rows whose metadata matches f
// (bit i%64 of word i/64 for row i) and clears every other bit. out must
// have (Len()+63)/64 words. A filter naming a field the index does not know,
// an operator that does not apply to a field's kind, or a value of a kind
// the field cannot be compared with is an error naming them, and out is
// left as it was. See the package doc for the rules.
func (x *Index) Eval(f Filter, out []uint64) error {
	if len(out) != words(x.n) {
		return invalidf("filter: the bitmap has %d words, but %d rows take %d", len(out), x.n, words(x.n))
	}
	if err := x.validate(f, 0); err != nil {
		return err
	}
	x.eval(f, out)
	return nil
}

// Validate checks f against the index's schema as Eval does, without
// evaluating it.
func (x *Index) Validate(f Filter) error { return x.validate(f, 0) }

func (x *Index) validate(f Filter, depth int) error {
	n := f.n
	if n == nil {
		return nil
	}
	if depth > 10*maxWhereDepth {
		return tooLargef("filter: nested deeper than %d", 10*maxWhereDepth)
	}
	switch n.op {
	case opAnd, opOr, opNot:
		for _, s := range n.subs {
			if err := x.validate(s, depth+1); err != nil {
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
	case c.kind == Tags && n.op != opContains && n.op != opNotContains:
		return invalidf("filter: field %q is tags: it takes $contains or $not_contains, not %s", n.field, name)
	case c.kind != Tags && (n.op == opContains || n.op == opNotContains):
		return invalidf("filter: %s applies to tags fields; field %q is %s (use $eq or $in)", name, n.field, c.kind)
	case c.kind == Keyword && n.op >= opGt && n.op <= opLte:
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
func filterValue(field, op string, k Kind, v Value) error {
	switch v.kind {
	case Float:
		if math.IsNaN(v.f) || math.IsInf(v.f, 0) {
			return invalidf("filter: field %q: %s %v is not finite", field, op, v.f)
		}
	case Time:
		if v.bad {
			return invalidf("filter: field %q: %s time outside 1677-09-21..2262-04-11", field, op)
		}
	case 0:
		return invalidf("filter: field %q: %s has no value (the zero Value)", field, op)
	}
	ok := v.kind == k
	switch k {
	case Int, Float:
		ok = v.kind == Int || v.kind == Float
	case Tags:
		ok = v.kind == Keyword // the tag of $contains
	}
	if !ok {
		return invalidf("filter: field %q is %s, but %s is given the %s value %s", field, k, op, v.kind, v)
	}
	return nil
}

func (x *Index) eval(f Filter, out []uint64) {
	n := f.n
	if n == nil {
		x.fill(out)
		return
	}
	switch n.op {
	case opAnd, opOr:
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
	case Keyword, Tags:
		for _, v := range n.vals {
			if code, ok := c.dict[v.s]; ok {
				c.posts[code].orInto(out)
			}
		}
	case Int, Time:
		if o == opEq || o == opIn {
			pts := make([]int64, 0, len(n.vals))
			for _, v := range n.vals {
				if lo, _, ok := intBounds(opEq, v); ok {
					pts = append(pts, lo)
				}
			}
			intPoints(c.ints, c.has, pts, out)
			return
		}
		if lo, hi, ok := intBounds(o, n.vals[0]); ok {
			intRange(c.ints, c.has, lo, hi, out)
		}
	case Float:
		if o == opEq || o == opIn {
			pts := make([]float64, 0, len(n.vals))
			for _, v := range n.vals {
				if lo, _, ok := floatBounds(opEq, v); ok {
					pts = append(pts, lo)
				}
			}
			floatPoints(c.floats, c.has, pts, out)
			return
		}
		if lo, hi, ok := floatBounds(o, n.vals[0]); ok {
			floatRange(c.floats, c.has, lo, hi, out)
		}
	}
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

// intBounds is the closed interval [lo, hi] of int64 column values v (Int
// or Time; for an Int column also Float) that satisfy "value o v", exactly;
// ok is false when none does.
func intBounds(o op, v Value) (lo, hi int64, ok bool) {
	if v.kind != Float {
		b := v.i
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
	x := v.f
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
// that satisfy "value o v" (v Float or Int, compared exactly); ok is false
// when none does.
func floatBounds(o op, v Value) (lo, hi float64, ok bool) {
	inf := math.Inf(1)
	up := func(f float64) float64 { return math.Nextafter(f, inf) }
	down := func(f float64) float64 { return math.Nextafter(f, -inf) }
	if v.kind == Float {
		x := v.f
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
	r := float64(v.i) // rounded to nearest; an integer value
	c := cmpFloatInt(r, v.i)
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

// intRange sets the present rows whose value is in [lo, hi].
func intRange(col []int64, has []uint64, lo, hi int64, out []uint64) {
	span := uint64(hi - lo)
	for w, h := range has {
		if h == 0 {
			continue
		}
		base := w << 6
		var m uint64
		for j, v := range col[base:min(base+64, len(col))] {
			if uint64(v-lo) <= span {
				m |= 1 << uint(j)
			}
		}
		out[w] = m & h
	}
}

// floatRange sets the present rows whose value is in [lo, hi].
func floatRange(col []float64, has []uint64, lo, hi float64, out []uint64) {
	for w, h := range has {
		if h == 0 {
			continue
		}
		base := w << 6
		var m uint64
		for j, v := range col[base:min(base+64, len(col))] {
			if v >= lo && v <= hi {
				m |= 1 << uint(j)
			}
		}
		out[w] = m & h
	}
}

// intPoints sets the present rows whose value is one of pts.
func intPoints(col []int64, has []uint64, pts []int64, out []uint64) {
	slices.Sort(pts)
	pts = slices.Compact(pts)
	switch len(pts) {
	case 0:
		return
	case 1:
		intRange(col, has, pts[0], pts[0], out)
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

// floatPoints sets the present rows whose value is one of pts.
func floatPoints(col []float64, has []uint64, pts []float64, out []uint64) {
	slices.Sort(pts)
	pts = slices.Compact(pts)
	switch len(pts) {
	case 0:
		return
	case 1:
		floatRange(col, has, pts[0], pts[0], out)
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
