package metaindex

import (
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/umbravec/umbra/meta"
)

// Index holds the metadata of rows 0..Len()-1 as columns, one per field,
// and evaluates filters over them into row bitmaps (Eval). A keyword or tags
// field is a dictionary of its distinct values, a sorted posting list of
// rows per value (a bitmap instead once a value is in more than 1/32 of the
// rows) and a per-row column of value codes; an int, float or time field is
// a dense column of values. Every field has a presence bitmap.
//
// An Index is not safe for concurrent use with writes; concurrent Evals (and
// other reads) are safe.
type Index struct {
	lim   meta.Limits
	n     int
	cols  map[string]*column
	names []string // sorted keys of cols
}

// column is one field.
type column struct {
	name  string
	kind  meta.Kind
	has   []uint64 // presence; may be shorter than the index's words (missing = 0)
	count int      // rows that have the field

	// meta.Int, meta.Time, meta.Float: per row, the value's order key (intKey, floatKey:
	// unsigned order is the values' order); may be shorter than Len.
	nums []uint64

	codes   []uint32   // meta.Keyword: per row, the value's code
	rowTags [][]uint32 // meta.Tags: per row, the tags' codes
	tagRefs int        // meta.Tags: sum of len(rowTags[i])

	dict     map[string]uint32
	vals     []string // code → value ("" once freed)
	posts    []posting
	free     []uint32
	strBytes int64 // bytes of live dictionary values
	listLen  int64 // entries held in list postings
	bitWords int64 // words held in bitmap postings
}

// posting is the rows holding one keyword or tag value: a sorted list, or
// a bitmap when bits is non-nil (words past its end are zero).
type posting struct {
	rows []uint32
	bits []uint64
	n    int
}

// bitmapMin and the 1/32 share: a posting becomes a bitmap when it holds at
// least bitmapMin rows and 32·n ≥ rows (a bitmap then takes no more memory
// than the list), and a list again when 128·n < rows.
const bitmapMin = 64

func words(n int) int { return (n + 63) / 64 }

// NewIndex is an empty index with limits lim (zero fields take their
// defaults).
func NewIndex(lim meta.Limits) *Index {
	return &Index{lim: lim.WithDefaults(), cols: map[string]*column{}}
}

// Len is the number of rows.
func (x *Index) Len() int { return x.n }

// Limits are the index's limits, defaults filled in.
func (x *Index) Limits() meta.Limits { return x.lim }

// Schema is every field the index knows with its kind: those declared and
// those of every value ever added (a field's kind is fixed by its first
// value). Truncate and Keep do not forget fields; LoadSchema can.
func (x *Index) Schema() map[string]meta.Kind {
	s := make(map[string]meta.Kind, len(x.cols))
	for n, c := range x.cols {
		s[n] = c.kind
	}
	return s
}

// Declare fixes field's kind before any value of it is added. Declaring a
// known field again with its kind is a no-op; with another kind an error.
func (x *Index) Declare(field string, k meta.Kind) error {
	if err := checkName(field, x.lim); err != nil {
		return err
	}
	if !validKind(k) {
		return invalidf("field %q: declared with an invalid kind %d", field, uint8(k))
	}
	if c, ok := x.cols[field]; ok {
		if c.kind != k {
			return invalidf("field %q: declared %s, but it is already %s", field, k, c.kind)
		}
		return nil
	}
	if len(x.cols) >= x.lim.MaxSchema {
		return tooLargef("field %q: the index already has %d fields, the limit", field, len(x.cols))
	}
	x.addColumn(field, k)
	return nil
}

func (x *Index) addColumn(name string, k meta.Kind) *column {
	c := &column{name: name, kind: k}
	if k == meta.Keyword || k == meta.Tags {
		c.dict = map[string]uint32{}
	}
	x.cols[name] = c
	i, _ := slices.BinarySearch(x.names, name)
	x.names = slices.Insert(x.names, i, name)
	return c
}

// MarshalSchema is the schema (Schema) as a canonical blob for a store
// file; LoadSchema reads it back.
func (x *Index) MarshalSchema() []byte { return appendSchema(nil, x.Schema()) }

// LoadSchema makes the index's schema the one in blob (MarshalSchema's).
// meta.Fields of the blob are declared; fields of the index the blob lacks are
// forgotten, which is allowed only while no row has them (so that saving
// the schema before an append and loading it after Truncate undoes the
// append's new fields). A malformed blob, a kind conflict or a forgotten
// field that rows still hold is an error, and changes nothing.
func (x *Index) LoadSchema(b []byte) error {
	s, err := decodeSchema(b, x.lim)
	if err != nil {
		return err
	}
	for name, k := range s {
		if c, ok := x.cols[name]; ok && c.kind != k {
			return invalidf("schema blob: field %q is %s, but the index has it as %s", name, k, c.kind)
		}
	}
	for name, c := range x.cols {
		if _, ok := s[name]; !ok && c.count > 0 {
			return invalidf("schema blob: lacks field %q, which %d rows hold", name, c.count)
		}
	}
	for _, name := range slices.Clone(x.names) {
		if _, ok := s[name]; !ok {
			delete(x.cols, name)
			i, _ := slices.BinarySearch(x.names, name)
			x.names = slices.Delete(x.names, i, i+1)
		}
	}
	for name, k := range s {
		if _, ok := x.cols[name]; !ok {
			x.addColumn(name, k)
		}
	}
	return nil
}

// Check says whether Append(rows) (replace == nil) or Set(replace[i],
// rows[i]) for every i would succeed, and changes nothing: every row valid
// and within the limits, each field's kind the schema's (or, for a new
// field, the same in the whole batch), the index's limits on fields and
// distinct values kept. The error names the row by its index i in rows and
// the field.
func (x *Index) Check(rows []meta.Fields, replace []int) error {
	if replace != nil && len(replace) != len(rows) {
		return invalidf("%d rows to replace, but %d rows of metadata", len(replace), len(rows))
	}
	for i, r := range replace {
		if r < 0 || r >= x.n {
			return invalidf("row %d: replaces row %d, outside 0..%d", i, r, x.n-1)
		}
	}
	newKinds := map[string]meta.Kind{} // new fields: kind, from the first row that has them
	newFrom := map[string]int{}
	newVals := map[string]map[string]struct{}{}
	for i, f := range rows {
		if err := f.Check(x.lim); err != nil {
			return rowErr(i, err)
		}
		for _, name := range names(f) {
			v := f[name]
			k, from := v.Kind(), ""
			if c, ok := x.cols[name]; ok {
				k, from = c.kind, "in the index"
			} else if nk, ok := newKinds[name]; ok {
				k, from = nk, sprintf("from row %d of this batch", newFrom[name])
			} else {
				if len(x.cols)+len(newKinds) >= x.lim.MaxSchema {
					return rowErr(i, tooLargef("field %q: a new field, but the index would pass its limit of %d fields", name, x.lim.MaxSchema))
				}
				newKinds[name], newFrom[name] = v.Kind(), i
			}
			if k != v.Kind() {
				hint := ""
				if k == meta.Float && v.Kind() == meta.Int {
					hint = " (write 2.0, not 2, for a float)"
				}
				return rowErr(i, invalidf("field %q: %s value, but the field is %s (%s)%s", name, v.Kind(), k, from, hint))
			}
			if k != meta.Keyword && k != meta.Tags {
				continue
			}
			var dict map[string]uint32
			distinct := 0
			if c := x.cols[name]; c != nil {
				dict, distinct = c.dict, len(c.dict)
			}
			nv := newVals[name]
			see := func(s string) error {
				if _, ok := dict[s]; ok {
					return nil
				}
				if _, ok := nv[s]; ok {
					return nil
				}
				if nv == nil {
					nv = map[string]struct{}{}
					newVals[name] = nv
				}
				nv[s] = struct{}{}
				if distinct+len(nv) > x.lim.MaxDistinct {
					return rowErr(i, tooLargef("field %q: more than %d distinct values in the index", name, x.lim.MaxDistinct))
				}
				return nil
			}
			if k == meta.Keyword {
				if err := see(v.Str()); err != nil {
					return err
				}
			} else {
				for _, t := range v.Tags() {
					if err := see(t); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// rowErr names row i in err, keeping what err wraps.
func rowErr(i int, err error) error {
	if e, ok := err.(*metaError); ok {
		return &metaError{e.kind, sprintf("row %d: %s", i, e.msg)}
	}
	return err
}

// Append adds len(rows) rows after the last (a nil or empty meta.Fields: a row
// without metadata). It checks first (Check) and on an error adds nothing.
func (x *Index) Append(rows []meta.Fields) error {
	if err := x.Check(rows, nil); err != nil {
		return err
	}
	for _, f := range rows {
		r := x.n
		x.n++
		x.put(r, f)
	}
	return nil
}

// Set replaces row's metadata (an Upsert in place); nil clears it. It
// checks first and on an error changes nothing.
func (x *Index) Set(row int, f meta.Fields) error {
	if err := x.Check([]meta.Fields{f}, []int{row}); err != nil {
		return err
	}
	for _, name := range x.names {
		x.cols[name].clear(row, x.n)
	}
	x.put(row, f)
	return nil
}

// put writes f into row, which holds no field.
func (x *Index) put(row int, f meta.Fields) {
	for name, v := range f {
		c := x.cols[name]
		if c == nil {
			c = x.addColumn(name, v.Kind())
		}
		c.put(row, v, x.n)
	}
}

// Row is a copy of row's metadata (nil when it has none or row is out of
// range).
func (x *Index) Row(row int) meta.Fields {
	if row < 0 || row >= x.n {
		return nil
	}
	var f meta.Fields
	for _, name := range x.names {
		c := x.cols[name]
		if !c.present(row) {
			continue
		}
		if f == nil {
			f = meta.Fields{}
		}
		f[name] = c.value(row)
	}
	return f
}

// EncodedRow is AppendBinary(nil, Row(row)): nothing for a row without
// metadata.
func (x *Index) EncodedRow(row int) []byte { return AppendBinary(nil, x.Row(row)) }

// Truncate forgets rows n.. (an undone append); n at or past Len changes
// nothing, a negative n is an error. The schema is kept (see LoadSchema).
func (x *Index) Truncate(n int) error {
	if n < 0 {
		return invalidf("truncate to %d rows", n)
	}
	if n >= x.n {
		return nil
	}
	for _, c := range x.cols {
		c.truncate(n, x.n)
	}
	x.n = n
	return nil
}

// Keep compacts the index: new row i is old row rows[i], and every row not
// in rows is dropped. rows must be strictly increasing and within 0..Len-1;
// otherwise Keep is an error and changes nothing.
func (x *Index) Keep(rows []int) error {
	for i, r := range rows {
		if r < 0 || r >= x.n {
			return invalidf("keep: rows[%d] = %d, outside 0..%d", i, r, x.n-1)
		}
		if i > 0 && r <= rows[i-1] {
			return invalidf("keep: rows[%d] = %d after %d: not strictly increasing", i, r, rows[i-1])
		}
	}
	for _, c := range x.cols {
		c.keep(rows)
	}
	x.n = len(rows)
	return nil
}

// Bytes estimates the memory the index holds: columns, presence bitmaps,
// dictionaries with their strings, and postings.
func (x *Index) Bytes() int64 {
	const colOverhead, wordBytes, dictEntry, postHdr = 256, 8, 64, 56
	var b int64
	for _, c := range x.cols {
		b += colOverhead + int64(len(c.name))
		b += int64(cap(c.has)) * wordBytes
		b += int64(cap(c.nums))*8 + int64(cap(c.codes))*4
		b += int64(cap(c.rowTags))*24 + int64(c.tagRefs)*4
		b += int64(len(c.dict))*dictEntry + c.strBytes
		b += int64(cap(c.vals))*16 + int64(cap(c.posts))*postHdr + int64(cap(c.free))*4
		b += c.listLen*4 + c.bitWords*wordBytes
	}
	return b
}

// known lists the index's fields for an error.
func (x *Index) known() string {
	if len(x.names) == 0 {
		return "the index has no fields"
	}
	const show = 20
	s := "known: " + strings.Join(x.names[:min(show, len(x.names))], ", ")
	if len(x.names) > show {
		s += sprintf(" and %d more", len(x.names)-show)
	}
	return s
}

// --- column ---

func (c *column) present(row int) bool {
	w := row >> 6
	return w < len(c.has) && c.has[w]&(1<<(uint(row)&63)) != 0
}

func (c *column) value(row int) meta.Value {
	switch c.kind {
	case meta.Keyword:
		return meta.KeywordOf(c.vals[c.codes[row]])
	case meta.Int:
		return meta.IntOf(keyInt(c.nums[row]))
	case meta.Time:
		return timeNanos(keyInt(c.nums[row]))
	case meta.Float:
		return meta.FloatOf(keyFloat(c.nums[row]))
	case meta.Tags:
		ts := make([]string, len(c.rowTags[row]))
		for i, code := range c.rowTags[row] {
			ts[i] = c.vals[code]
		}
		slices.Sort(ts)
		return tagsValue(ts)
	}
	return meta.Value{}
}

// grow extends s with zeros to hold index row.
func grow[T any](s []T, row int) []T {
	if row < len(s) {
		return s
	}
	var zero T
	for len(s) <= row {
		s = append(s, zero)
	}
	return s
}

// put stores v at row, which does not have the field; n is the index's
// row count.
func (c *column) put(row int, v meta.Value, n int) {
	c.has = grow(c.has, row>>6)
	c.has[row>>6] |= 1 << (uint(row) & 63)
	c.count++
	switch c.kind {
	case meta.Int, meta.Time:
		c.nums = grow(c.nums, row)
		c.nums[row] = intKey(intOf(v))
	case meta.Float:
		c.nums = grow(c.nums, row)
		c.nums[row] = floatKey(v.Float())
	case meta.Keyword:
		code := c.intern(v.Str())
		c.codes = grow(c.codes, row)
		c.codes[row] = code
		c.add(code, uint32(row), n)
	case meta.Tags:
		codes := make([]uint32, len(v.Tags()))
		for i, t := range v.Tags() {
			codes[i] = c.intern(t)
			c.add(codes[i], uint32(row), n)
		}
		c.rowTags = grow(c.rowTags, row)
		c.rowTags[row] = codes
		c.tagRefs += len(codes)
	}
}

// clear removes row's value, if it has one.
func (c *column) clear(row, n int) {
	if !c.present(row) {
		return
	}
	c.has[row>>6] &^= 1 << (uint(row) & 63)
	c.count--
	switch c.kind {
	case meta.Keyword:
		c.remove(c.codes[row], uint32(row), n)
		c.codes[row] = 0
	case meta.Tags:
		for _, code := range c.rowTags[row] {
			c.remove(code, uint32(row), n)
		}
		c.tagRefs -= len(c.rowTags[row])
		c.rowTags[row] = nil
	}
}

// intern is s's code, made if s is new.
func (c *column) intern(s string) uint32 {
	if code, ok := c.dict[s]; ok {
		return code
	}
	var code uint32
	if k := len(c.free); k > 0 {
		code = c.free[k-1]
		c.free = c.free[:k-1]
		c.vals[code] = s
	} else {
		code = uint32(len(c.vals))
		c.vals = append(c.vals, s)
		c.posts = append(c.posts, posting{})
	}
	c.dict[s] = code
	c.strBytes += int64(len(s))
	return code
}

// release frees code, whose posting is empty.
func (c *column) release(code uint32) {
	s := c.vals[code]
	delete(c.dict, s)
	c.strBytes -= int64(len(s))
	c.vals[code] = ""
	c.bitWords -= int64(len(c.posts[code].bits))
	c.listLen -= int64(len(c.posts[code].rows))
	c.posts[code] = posting{}
	c.free = append(c.free, code)
}

// add puts row into code's posting; n is the index's row count.
func (c *column) add(code, row uint32, n int) {
	p := &c.posts[code]
	p.n++
	if p.bits != nil {
		w := int(row >> 6)
		if w >= len(p.bits) {
			c.bitWords -= int64(len(p.bits))
			p.bits = grow(p.bits, w)
			c.bitWords += int64(len(p.bits))
		}
		p.bits[w] |= 1 << (row & 63)
		return
	}
	if k := len(p.rows); k == 0 || p.rows[k-1] < row {
		p.rows = append(p.rows, row)
	} else {
		i, _ := slices.BinarySearch(p.rows, row)
		p.rows = slices.Insert(p.rows, i, row)
	}
	c.listLen++
	if p.n >= bitmapMin && 32*p.n >= n {
		c.toBits(p, n)
	}
}

// remove takes row out of code's posting, freeing code when it empties.
func (c *column) remove(code, row uint32, n int) {
	p := &c.posts[code]
	p.n--
	if p.bits != nil {
		p.bits[row>>6] &^= 1 << (row & 63)
		if 128*p.n < n {
			c.toList(p)
		}
	} else {
		i, _ := slices.BinarySearch(p.rows, row)
		p.rows = slices.Delete(p.rows, i, i+1)
		c.listLen--
	}
	if p.n == 0 {
		c.release(code)
	}
}

func (c *column) toBits(p *posting, n int) {
	b := make([]uint64, words(n))
	for _, r := range p.rows {
		b[r>>6] |= 1 << (r & 63)
	}
	c.listLen -= int64(len(p.rows))
	c.bitWords += int64(len(b))
	p.rows, p.bits = nil, b
}

func (c *column) toList(p *posting) {
	rows := make([]uint32, 0, p.n)
	for w, x := range p.bits {
		for x != 0 {
			rows = append(rows, uint32(w<<6|bits.TrailingZeros64(x)))
			x &= x - 1
		}
	}
	c.bitWords -= int64(len(p.bits))
	c.listLen += int64(len(rows))
	p.rows, p.bits = rows, nil
}

// truncate drops rows m.. of n.
func (c *column) truncate(m, n int) {
	// From the last row down, so that each removal from a list posting
	// takes its last entry.
	for r := min(n, len(c.has)*64) - 1; r >= m; r-- {
		c.clear(r, n)
	}
	c.has = c.has[:min(len(c.has), words(m))]
	c.nums = c.nums[:min(len(c.nums), m)]
	c.codes = c.codes[:min(len(c.codes), m)]
	c.rowTags = c.rowTags[:min(len(c.rowTags), m)]
	for i := range c.posts {
		if p := &c.posts[i]; p.bits != nil && len(p.bits) > words(m) {
			c.bitWords -= int64(len(p.bits) - words(m))
			p.bits = p.bits[:words(m)]
		}
	}
	if len(c.free) >= 1024 && 2*len(c.free) > len(c.posts) {
		// Most of the dictionary is free: compact it (and the slices).
		rows := make([]int, m)
		for i := range rows {
			rows[i] = i
		}
		c.keep(rows)
	}
}

// keep compacts the column to rows (strictly increasing).
func (c *column) keep(rows []int) {
	n := len(rows)
	has := make([]uint64, words(n))
	count := 0
	var nums []uint64
	var codes []uint32
	var rowTags [][]uint32
	for i, r := range rows {
		if !c.present(r) {
			continue
		}
		has[i>>6] |= 1 << (uint(i) & 63)
		count++
		switch c.kind {
		case meta.Int, meta.Time, meta.Float:
			nums = grow(nums, i)
			nums[i] = c.nums[r]
		case meta.Keyword:
			codes = grow(codes, i)
			codes[i] = c.codes[r]
		case meta.Tags:
			rowTags = grow(rowTags, i)
			rowTags[i] = c.rowTags[r]
		}
	}
	c.has, c.count, c.nums, c.codes, c.rowTags = has, count, nums, codes, rowTags
	if c.kind != meta.Keyword && c.kind != meta.Tags {
		return
	}
	// Rebuild the dictionary (codes renumbered densely, in order of first
	// use, freed values dropped) and the postings, in row order.
	const none = ^uint32(0)
	remap := make([]uint32, len(c.posts))
	for i := range remap {
		remap[i] = none
	}
	dict := make(map[string]uint32)
	var vals []string
	var counts []int
	c.tagRefs, c.strBytes = 0, 0
	code := func(old uint32) uint32 {
		if remap[old] == none {
			remap[old] = uint32(len(vals))
			s := c.vals[old]
			vals = append(vals, s)
			dict[s] = remap[old]
			counts = append(counts, 0)
			c.strBytes += int64(len(s))
		}
		counts[remap[old]]++
		return remap[old]
	}
	for i := range n {
		if has[i>>6]&(1<<(uint(i)&63)) == 0 {
			continue
		}
		if c.kind == meta.Keyword {
			codes[i] = code(codes[i])
		} else {
			for j, old := range rowTags[i] {
				rowTags[i][j] = code(old)
			}
			c.tagRefs += len(rowTags[i])
		}
	}
	posts := make([]posting, len(vals))
	c.listLen, c.bitWords = 0, 0
	for code, k := range counts {
		p := &posts[code]
		p.n = k
		if k >= bitmapMin && 32*k >= n {
			p.bits = make([]uint64, words(n))
			c.bitWords += int64(len(p.bits))
		} else {
			p.rows = make([]uint32, 0, k)
			c.listLen += int64(k)
		}
	}
	put := func(code uint32, i int) {
		p := &posts[code]
		if p.bits != nil {
			p.bits[i>>6] |= 1 << (uint(i) & 63)
		} else {
			p.rows = append(p.rows, uint32(i))
		}
	}
	for i := range n {
		if has[i>>6]&(1<<(uint(i)&63)) == 0 {
			continue
		}
		if c.kind == meta.Keyword {
			put(codes[i], i)
		} else {
			for _, code := range rowTags[i] {
				put(code, i)
			}
		}
	}
	c.dict, c.vals, c.posts, c.free = dict, vals, posts, nil
}

// isLive says code is in the dictionary (not on the free list).
func (c *column) isLive(code uint32) bool {
	got, ok := c.dict[c.vals[code]]
	return ok && got == code
}

func trailingZeros(x uint64) int { return bits.TrailingZeros64(x) }

// intKey maps an int64 to a uint64 of the same order.
func intKey(i int64) uint64 { return uint64(i) ^ 1<<63 }

func keyInt(k uint64) int64 { return int64(k ^ 1<<63) }

// floatKey maps a float64 to a uint64 of the same order (for every float
// but NaN; -0 sorts just below +0, which is why -0 is never stored).
func floatKey(f float64) uint64 {
	b := math.Float64bits(f)
	return b ^ (uint64(int64(b)>>63) | 1<<63)
}

func keyFloat(k uint64) float64 {
	if k>>63 == 1 {
		return math.Float64frombits(k ^ 1<<63)
	}
	return math.Float64frombits(^k)
}
