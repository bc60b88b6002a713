package engine

import (
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"sync"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/metaindex"
	"github.com/umbravec/umbra/internal/storefile"
	"github.com/umbravec/umbra/meta"
)

// A memory is more than its vector: each row may carry typed metadata
// (package meta: keywords, integers, floats, times, tag sets) that a
// search filters on exactly (Where), and an opaque payload (the text or
// JSON document the vector embeds) that a search returns on request
// (WithPayload). Both are written with the row, in the same log record, and
// kept in the store's base file beside it.

// callAttrs are the metadata and payloads one write gives its rows, in the
// call's row order.
type callAttrs struct {
	meta     []meta.Fields
	payloads [][]byte
	metaSet  bool
	paySet   bool
	// encoded is meta in the log's encoding, made once by checkAttrs,
	// which counts its bytes (nil until then).
	encoded [][]byte
}

func (a *callAttrs) given() bool { return a.metaSet || a.paySet }

// logInto makes rec, a write's log record, carry a's metadata and payloads
// (op 6, an upsert or not), so that they are replayed with their rows,
// whole or not at all. Without them rec is left as it is.
func (a *callAttrs) logInto(rec *storefile.Record, upsert bool) {
	if !a.given() {
		return
	}
	rec.Op, rec.Upsert = storefile.OpWrite, upsert
	if a.metaSet {
		if a.encoded == nil {
			a.encoded = encodeMeta(a.meta)
		}
		rec.Meta = a.encoded
	}
	if a.paySet {
		rec.Payloads = a.payloads
	}
}

// pick returns the attributes of the call's rows idx, in that order.
func (a *callAttrs) pick(idx []int) callAttrs {
	out := callAttrs{metaSet: a.metaSet, paySet: a.paySet}
	if a.metaSet {
		out.meta = make([]meta.Fields, len(idx))
		for j, i := range idx {
			out.meta[j] = a.meta[i]
		}
	}
	if a.paySet {
		out.payloads = make([][]byte, len(idx))
		for j, i := range idx {
			out.payloads[j] = a.payloads[i]
		}
	}
	return out
}

// fits refuses attributes that cannot pair one to one with n rows (n < 0:
// not known yet).
func (a *callAttrs) fits(n int) error {
	switch {
	case n < 0:
	case a.metaSet && len(a.meta) != n:
		return fmt.Errorf("%w: %d metadata rows for %d vectors", umbra.ErrIDCount, len(a.meta), n)
	case a.paySet && len(a.payloads) != n:
		return fmt.Errorf("%w: %d payloads for %d vectors", umbra.ErrIDCount, len(a.payloads), n)
	}
	return nil
}

// rowAttrs holds every row's metadata and payload, parallel to the slab's
// rows (dead ones too, until compaction). Each half is nil until a row
// that has one is stored, so an index that uses neither pays nothing. The
// writers change it under wmu and ix.mu; searches read it under ix.mu.
type rowAttrs struct {
	meta     *metaindex.Index
	payloads [][]byte // nil, or one entry per row (nil: none)
	payBytes int64
}

func (ix *Index) metaLimits() meta.Limits { return ix.cfg.Limits.Meta.WithDefaults() }

func (ix *Index) maxPayload() int {
	if n := ix.cfg.Limits.MaxPayloadBytes; n > 0 {
		return n
	}
	return umbra.DefaultMaxPayloadBytes
}

// bytes is the host memory the attributes take.
func (r *rowAttrs) bytes() int64 {
	b := r.payBytes + int64(len(r.payloads))*24
	if r.meta != nil {
		b += r.meta.Bytes()
	}
	return b
}

// checkAttrs refuses attributes a write cannot store beside its rows: a
// payload over the limit, metadata that breaks the schema or the limits,
// or more bytes than MaxHostBytes leaves room for. It changes nothing; the
// caller holds wmu.
func (ix *Index) checkAttrs(a *callAttrs) error {
	var incoming int64
	if a.paySet {
		limit := ix.maxPayload()
		for i, p := range a.payloads {
			if len(p) > limit {
				return fmt.Errorf("%w: the payload of vector %d is %d bytes, over the limit of %d (Limits.MaxPayloadBytes)", umbra.ErrTooLarge, i, len(p), limit)
			}
			incoming += int64(len(p)) + 24
		}
	}
	if a.metaSet {
		mi := ix.attrs.meta
		if mi == nil {
			mi = ix.newMetaIndex()
		}
		if err := mi.Check(a.meta, nil); err != nil {
			return fmt.Errorf("%w: %w", umbra.ErrInvalidMeta, err)
		}
		a.encoded = encodeMeta(a.meta)
		for _, b := range a.encoded {
			incoming += int64(len(b))
		}
	}
	if limit := ix.cfg.Limits.MaxHostBytes; limit > 0 && incoming > 0 {
		held := ix.hostBytes(ix.slab.Rows)
		if held+incoming > limit {
			return fmt.Errorf("%w: the metadata and payloads of this write (%d bytes) would take host memory to %d bytes, over MaxHostBytes %d",
				umbra.ErrTooLarge, incoming, held+incoming, limit)
		}
	}
	return nil
}

// newMetaIndex is an empty metadata index under the configured limits and
// declared fields.
func (ix *Index) newMetaIndex() *metaindex.Index {
	mi := metaindex.NewIndex(ix.metaLimits())
	for _, name := range slices.Sorted(maps.Keys(ix.cfg.Fields)) {
		_ = mi.Declare(name, ix.cfg.Fields[name]) // validated by Config.validate
	}
	return mi
}

// appendAttrs gives the rows from row old on (n of them, just staged) the
// call's attributes, and returns what undoes it: the rows' attributes
// dropped and the metadata schema as it was (a refused write fixes no
// field's kind). The caller holds wmu and ix.mu. On error nothing changed.
func (ix *Index) appendAttrs(old, n int, a *callAttrs) (undo func(), err error) {
	r := &ix.attrs
	var schema []byte
	if a.metaSet || r.meta != nil {
		if r.meta == nil {
			r.meta = ix.newMetaIndex()
		}
		schema = r.meta.MarshalSchema()
		if err := r.meta.Append(make([]meta.Fields, old-r.meta.Len())); err != nil {
			return nil, err
		}
		rows := a.meta
		if !a.metaSet {
			rows = make([]meta.Fields, n)
		}
		if err := r.meta.Append(rows); err != nil {
			_ = r.meta.Truncate(old)
			return nil, fmt.Errorf("%w: %w", umbra.ErrInvalidMeta, err)
		}
	}
	if a.paySet || r.payloads != nil {
		if r.payloads == nil {
			r.payloads = make([][]byte, old, old+n)
		}
		r.payloads = r.payloads[:old]
		for i := range n {
			var p []byte
			if a.paySet && len(a.payloads[i]) > 0 {
				p = slices.Clone(a.payloads[i])
			}
			r.payloads = append(r.payloads, p)
			r.payBytes += int64(len(p))
		}
	}
	return func() {
		ix.truncateAttrs(old)
		if schema != nil {
			_ = r.meta.LoadSchema(schema) // the rows that held new fields are gone
		}
	}, nil
}

// truncateAttrs forgets the attributes of rows n and after (an append
// undone). The caller holds wmu and ix.mu.
func (ix *Index) truncateAttrs(n int) {
	r := &ix.attrs
	if r.meta != nil && r.meta.Len() > n {
		_ = r.meta.Truncate(n)
	}
	if len(r.payloads) > n {
		for _, p := range r.payloads[n:] {
			r.payBytes -= int64(len(p))
		}
		clear(r.payloads[n:])
		r.payloads = r.payloads[:n]
	}
}

// setAttrs replaces the given attributes of rows (a's entries in order)
// and returns what restores them. The caller holds wmu and ix.mu. On error
// nothing changed.
func (ix *Index) setAttrs(rows []int, a *callAttrs) (undo func(), err error) {
	r := &ix.attrs
	if len(rows) == 0 || !a.given() {
		return func() {}, nil
	}
	var oldMeta []meta.Fields
	var schema []byte
	if a.metaSet {
		if r.meta == nil {
			r.meta = ix.newMetaIndex()
			if err := r.meta.Append(make([]meta.Fields, ix.slab.Rows)); err != nil {
				return nil, err
			}
		}
		schema = r.meta.MarshalSchema()
		oldMeta = make([]meta.Fields, len(rows))
		for j, row := range rows {
			oldMeta[j] = r.meta.Row(row)
		}
		for j, row := range rows {
			if err := r.meta.Set(row, a.meta[j]); err != nil {
				for i := j - 1; i >= 0; i-- {
					_ = r.meta.Set(rows[i], oldMeta[i])
				}
				_ = r.meta.LoadSchema(schema)
				return nil, fmt.Errorf("%w: %w", umbra.ErrInvalidMeta, err)
			}
		}
	}
	var oldPay [][]byte
	if a.paySet {
		if r.payloads == nil {
			r.payloads = make([][]byte, ix.slab.Rows)
		}
		oldPay = make([][]byte, len(rows))
		for j, row := range rows {
			oldPay[j] = r.payloads[row]
			var p []byte
			if len(a.payloads[j]) > 0 {
				p = slices.Clone(a.payloads[j])
			}
			r.payBytes += int64(len(p)) - int64(len(oldPay[j]))
			r.payloads[row] = p
		}
	}
	return func() {
		for j, row := range rows {
			if oldMeta != nil {
				_ = r.meta.Set(row, oldMeta[j]) // a value the index held
			}
			if oldPay != nil {
				r.payBytes += int64(len(oldPay[j])) - int64(len(r.payloads[row]))
				r.payloads[row] = oldPay[j]
			}
		}
		if schema != nil {
			_ = r.meta.LoadSchema(schema)
		}
	}, nil
}

// keepAttrs keeps the attributes of rows (increasing), in that order: the
// rows compaction keeps. The caller holds wmu and ix.mu.
func (ix *Index) keepAttrs(rows []int) {
	r := &ix.attrs
	if r.meta != nil {
		_ = r.meta.Keep(rows) // the live rows, increasing
	}
	if r.payloads != nil {
		kept := make([][]byte, len(rows))
		r.payBytes = 0
		for i, row := range rows {
			kept[i] = r.payloads[row]
			r.payBytes += int64(len(kept[i]))
		}
		r.payloads = kept
	}
}

// encodeMeta returns rows' metadata encoded for the log, one entry per
// row (nil for a row without).
func encodeMeta(rows []meta.Fields) [][]byte {
	out := make([][]byte, len(rows))
	for i, f := range rows {
		if len(f) > 0 {
			out[i] = metaindex.AppendBinary(nil, f)
		}
	}
	return out
}

// loadAttrs fills the attributes of a new index from a base file's
// snapshot, whose rows are loaded. The caller holds wmu and ix.mu.
func (ix *Index) loadAttrs(schema []byte, metaRows, payloads [][]byte) error {
	r := &ix.attrs
	n := ix.slab.Rows
	if schema != nil || metaRows != nil {
		r.meta = metaindex.NewIndex(ix.metaLimits())
		if schema != nil {
			if err := r.meta.LoadSchema(schema); err != nil {
				return fmt.Errorf("%w: metadata schema: %v", ErrBadStore, err)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(ix.cfg.Fields)) {
			if err := r.meta.Declare(name, ix.cfg.Fields[name]); err != nil {
				return fmt.Errorf("%w: Fields: %v (the store's fields: %v)", umbra.ErrInvalidConfig, err, r.meta.Schema())
			}
		}
		rows := make([]meta.Fields, n)
		lim := ix.metaLimits()
		for i, b := range metaRows {
			if len(b) == 0 {
				continue
			}
			f, err := metaindex.DecodeBinary(b, lim)
			if err != nil {
				return fmt.Errorf("%w: metadata of row %d: %v", ErrBadStore, i, err)
			}
			rows[i] = f
		}
		if err := r.meta.Append(rows); err != nil {
			return fmt.Errorf("%w: metadata: %v", ErrBadStore, err)
		}
	}
	if payloads != nil {
		r.payloads = payloads
		for _, p := range payloads {
			r.payBytes += int64(len(p))
		}
	}
	return nil
}

// rowMask is the rows a search may return: bits, a bitmap over rows (nil:
// every row), holding n rows; words, when not nil, lists the indices of its
// words that are not zero, in order (a gather lists its rows from them
// without reading the rest). release gives the bitmaps back to the index's
// pool once the search is done with them.
type rowMask struct {
	bits    []uint64
	n       int
	words   []uint32
	rows    []uint32 // the admitted rows in order, where mask listed them already (listMask)
	release func()
}

// mask returns the rows a search with o may return — live, allowed by
// Allow or AllowFunc, matched by Where. Its bitmaps come from the index's
// pool (a million rows' is 122 KiB, too much to allocate afresh for every
// search). The caller holds ix.mu.
func (ix *Index) mask(o *searchOptions) (rowMask, error) {
	rows := len(ix.rid.ids)
	words := (rows + 63) / 64
	none := func() {}
	if !o.whereSet {
		if ix.rid.nDead == 0 && !o.filtered() {
			return rowMask{n: rows, release: none}, nil
		}
		buf := ix.bitmaps.get(words)
		mask, n := ix.rid.mask(o, *buf)
		*buf = mask
		return rowMask{bits: mask, n: n, release: func() { ix.bitmaps.put(buf) }}, nil
	}
	mi := ix.attrs.meta
	if mi == nil {
		mi = ix.newMetaIndex() // knows only declared fields: the filter is refused or matches nothing
		if err := mi.Append(make([]meta.Fields, rows)); err != nil {
			return rowMask{release: none}, err
		}
	}
	where, err := mi.Prepare(o.where)
	if err != nil {
		return rowMask{release: none}, fmt.Errorf("%w: %w", umbra.ErrInvalidFilter, err)
	}
	if o.allowIDs == nil && o.allowFn == nil {
		// A filter answered with a list (a selective equality) needs no
		// bitmap evaluated over every row.
		if list, ok := where.Rows(); ok {
			return ix.listMask(list, rows), nil
		}
	}
	selBuf := ix.bitmaps.get(max(words, (mi.Len()+63)/64))
	sel := (*selBuf)[:(mi.Len()+63)/64]
	if err := where.Eval(sel); err != nil {
		ix.bitmaps.put(selBuf)
		return rowMask{release: none}, fmt.Errorf("%w: %w", umbra.ErrInvalidFilter, err)
	}
	// Allow and AllowFunc (which leave out deleted rows themselves), or
	// the deleted rows, narrow the filter's rows in the same pass that
	// counts them and notes the words left with any.
	var allow []uint64
	if o.allowIDs != nil || o.allowFn != nil {
		allowBuf := ix.bitmaps.get(words)
		allow, _ = ix.rid.mask(o, *allowBuf)
		defer ix.bitmaps.put(allowBuf)
	}
	mask := (*selBuf)[:words]
	if len(sel) < words {
		clear(mask[len(sel):])
	}
	if rows&63 != 0 {
		mask[words-1] &= 1<<uint(rows&63) - 1
	}
	nz := ix.wordLists.get(words)
	n := narrow(mask, allow, ix.rid.dead, nz)
	return rowMask{bits: mask, n: n, words: *nz, release: func() {
		ix.bitmaps.put(selBuf)
		ix.wordLists.put(nz)
	}}, nil
}

// listMask is mask's answer for a filter whose rows come as an ascending
// list: the live ones below rows, their bitmap and its words with any
// rows, built from the list alone (the bitmap is cleared, not evaluated).
// The caller holds ix.mu.
func (ix *Index) listMask(list []uint32, rows int) rowMask {
	words := (rows + 63) / 64
	buf := ix.bitmaps.get(words)
	mask := (*buf)[:words]
	clear(mask)
	nz := ix.wordLists.get(words)
	wl := (*nz)[:0]
	admitted := make([]uint32, 0, len(list))
	for _, r := range list {
		if int(r) >= rows || ix.rid.isDead(int(r)) {
			continue
		}
		w := r >> 6
		if mask[w] == 0 {
			wl = append(wl, w)
		}
		mask[w] |= 1 << (r & 63)
		admitted = append(admitted, r)
	}
	*nz = wl
	return rowMask{bits: mask, n: len(admitted), words: wl, rows: admitted, release: func() {
		ix.bitmaps.put(buf)
		ix.wordLists.put(nz)
	}}
}

// narrow keeps in mask the rows allow admits (when not nil) or else the
// rows dead does not mark, returns how many are left, and lists in *nz the
// indices of the words left with any. The count skips four empty words at
// a time: a selective filter's words are nearly all zero.
func narrow(mask, allow, dead []uint64, nz *[]uint32) (n int) {
	switch {
	case allow != nil:
		allow = allow[:len(mask)]
		for i := range mask {
			mask[i] &= allow[i]
		}
	case len(dead) > 0:
		m := mask[:min(len(mask), len(dead))]
		dead = dead[:len(m)]
		for i := range m {
			m[i] &^= dead[i]
		}
	}
	list := (*nz)[:0]
	i := 0
	for ; i+4 <= len(mask); i += 4 {
		q := mask[i : i+4 : i+4]
		if q[0]|q[1]|q[2]|q[3] == 0 {
			continue
		}
		for j, w := range q {
			if w != 0 {
				n += bits.OnesCount64(w)
				list = append(list, uint32(i+j))
			}
		}
	}
	for ; i < len(mask); i++ {
		if w := mask[i]; w != 0 {
			n += bits.OnesCount64(w)
			list = append(list, uint32(i))
		}
	}
	*nz = list
	return n
}

// slicePool keeps the bitmaps (and lists of words) searches build, for
// the next search.
type slicePool[T any] struct{ p sync.Pool }

// get returns a slice of length n, of any content.
func (b *slicePool[T]) get(n int) *[]T {
	if v, ok := b.p.Get().(*[]T); ok && cap(*v) >= n {
		*v = (*v)[:n]
		return v
	}
	s := make([]T, n)
	return &s
}

func (b *slicePool[T]) put(v *[]T) { b.p.Put(v) }

// withPayloads sets each hit's payload. The
// caller holds ix.mu (the one the search held).
func (ix *Index) withPayloads(all [][]umbra.Hit) {
	pays := ix.attrs.payloads
	if pays == nil {
		return
	}
	for _, hits := range all {
		for i := range hits {
			if row, ok := ix.rid.rowOf[hits[i].ID]; ok && len(pays[row]) > 0 {
				hits[i].Payload = string(pays[row])
			}
		}
	}
}

// Schema returns the metadata fields the index knows and their kinds.
func (ix *Index) Schema() map[string]meta.Kind {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.attrs.meta == nil {
		out := make(map[string]meta.Kind, len(ix.cfg.Fields))
		for k, v := range ix.cfg.Fields {
			out[k] = v
		}
		return out
	}
	return ix.attrs.meta.Schema()
}

// attrSplit is an upsert's attributes: add for the rows it appends (in
// their order), set for the stored rows it replaces.
type attrSplit struct {
	add, set callAttrs
	rows     []int // the replaced rows
}

// applyAttrs stores an upsert's attributes before its rows are published:
// p's appended rows (nil: none) get add's, the replaced rows set's. It
// returns what undoes the replaced rows' (unpublish drops the appended
// ones). The caller holds wmu and ix.mu. On error nothing changed.
func (ix *Index) applyAttrs(p *appended, a *attrSplit) (undo func(), err error) {
	undoAppend := func() {}
	if p != nil && (a.add.given() || ix.attrs.meta != nil || ix.attrs.payloads != nil) {
		if undoAppend, err = ix.appendAttrs(p.old, len(p.ids), &a.add); err != nil {
			return nil, err
		}
	}
	undoSet, err := ix.setAttrs(a.rows, &a.set)
	if err != nil {
		undoAppend()
		return nil, err
	}
	return func() { undoSet(); undoAppend() }, nil
}

// loggedAttrs decodes the metadata and payloads of a logged write.
func (ix *Index) loggedAttrs(r storefile.Record) (*callAttrs, error) {
	a := &callAttrs{payloads: r.Payloads, paySet: r.Payloads != nil, metaSet: r.Meta != nil}
	if a.metaSet {
		lim := ix.metaLimits()
		a.meta = make([]meta.Fields, len(r.Meta))
		for i, b := range r.Meta {
			if len(b) == 0 {
				continue
			}
			f, err := metaindex.DecodeBinary(b, lim)
			if err != nil {
				return nil, fmt.Errorf("metadata of ID %d: %v", r.IDs[i], err)
			}
			a.meta[i] = f
		}
	}
	return a, nil
}
