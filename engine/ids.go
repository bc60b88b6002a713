package engine

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/umbravec/umbra"
)

// rowIDs maps the slab's rows to the caller's IDs. Rows are never reordered
// except by compaction; a deleted row stays in the slab, marked dead, until
// then, so a delete costs a bit and no data moves (on the GPU neither).
type rowIDs struct {
	ids    []uint64       // row → ID
	rowOf  map[uint64]int // ID of a live row → row
	dead   []uint64       // bitmap over rows: deleted, not yet compacted
	nDead  int
	nextID uint64 // the next ID Add assigns: past every ID ever stored
	// inOrder rows from row 0 have IDs that increase with the row, and
	// disorder says the row after them does not (its ID is not above its
	// predecessor's): see ordered. appendIDs, truncate and a store's load
	// keep them.
	inOrder  int
	disorder bool
}

func newRowIDs() rowIDs { return rowIDs{rowOf: map[uint64]int{}} }

func (m *rowIDs) live() int { return len(m.ids) - m.nDead }

func (m *rowIDs) isDead(row int) bool {
	return m.dead != nil && m.dead[row>>6]&(1<<(uint(row)&63)) != 0
}

// assign returns n fresh IDs from nextID on, or an error when they would
// run past the largest uint64.
func (m *rowIDs) assign(n int) ([]uint64, error) {
	if uint64(n) > math.MaxUint64-m.nextID {
		return nil, fmt.Errorf("%w: no %d IDs are left after %d", umbra.ErrTooLarge, n, m.nextID)
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = m.nextID + uint64(i)
	}
	return ids, nil
}

// checkNew refuses IDs repeated inside one call and, unless upsert, IDs that
// are already stored; it changes nothing.
func (m *rowIDs) checkNew(ids []uint64, upsert bool) error {
	// IDs given in increasing order (as a bulk load usually gives them)
	// repeat none, and an empty index holds none: no map is built then.
	increasing := true
	for i := 1; i < len(ids) && increasing; i++ {
		increasing = ids[i-1] < ids[i]
	}
	if increasing {
		if len(m.rowOf) == 0 || upsert {
			return nil
		}
		for i, id := range ids {
			if _, ok := m.rowOf[id]; ok {
				return fmt.Errorf("%w: ID %d (vector %d); use Upsert to replace it", umbra.ErrIDExists, id, i)
			}
		}
		return nil
	}
	seen := make(map[uint64]int, len(ids))
	for i, id := range ids {
		if j, ok := seen[id]; ok {
			return fmt.Errorf("%w: ID %d is given for vectors %d and %d", umbra.ErrDuplicateID, id, j, i)
		}
		seen[id] = i
		if _, ok := m.rowOf[id]; ok && !upsert {
			return fmt.Errorf("%w: ID %d (vector %d); use Upsert to replace it", umbra.ErrIDExists, id, i)
		}
	}
	return nil
}

// appendIDs records ids for the rows appended after the existing ones.
func (m *rowIDs) appendIDs(ids []uint64) {
	if len(m.rowOf) == 0 && len(ids) > 64 {
		// A first bulk load sizes the map once instead of growing it
		// through every doubling.
		m.rowOf = make(map[uint64]int, len(ids))
	}
	base := len(m.ids)
	m.ids = append(m.ids, ids...)
	for i, id := range ids {
		m.rowOf[id] = base + i
		m.bump(id)
	}
	if m.dead != nil {
		m.growDead()
	}
	m.checkOrder()
}

// checkOrder extends inOrder over the rows past it while their IDs keep
// increasing, and sets disorder where they stop. Each row is looked at
// once until a truncate drops it.
func (m *rowIDs) checkOrder() {
	if m.disorder {
		return
	}
	i := m.inOrder
	for ; i < len(m.ids); i++ {
		if i > 0 && m.ids[i] <= m.ids[i-1] {
			m.disorder = true
			break
		}
	}
	m.inOrder = i
}

// ordered reports whether the IDs increase with the row, so that the
// lower row holds the lower ID: then ranking ties by row ranks them by ID,
// which is what the device and the fallback do without IDs.
func (m *rowIDs) ordered() bool { return !m.disorder && m.inOrder == len(m.ids) }

// tieIDs is what a search ranks equal scores by: nil when the IDs increase
// with the row (the row order is the ID order), else the row → ID slice.
func (m *rowIDs) tieIDs() []uint64 {
	if m.ordered() {
		return nil
	}
	return m.ids
}

// bump keeps nextID past id. Past the largest ID nothing is left to
// assign (id+1 wraps to 0, so nextID stays at id), and assign refuses.
func (m *rowIDs) bump(id uint64) { m.nextID = max(m.nextID, id, id+1) }

// truncate forgets the rows from row n on (an append being undone).
func (m *rowIDs) truncate(n int) {
	for _, id := range m.ids[n:] {
		delete(m.rowOf, id)
	}
	m.ids = m.ids[:n]
	if n <= m.inOrder {
		m.inOrder, m.disorder = n, false
	}
}

func (m *rowIDs) growDead() {
	if need := (len(m.ids) + 63) / 64; len(m.dead) < need {
		m.dead = append(m.dead, make([]uint64, need-len(m.dead))...)
	}
}

// deadRows lists the dead rows, in order.
func (m *rowIDs) deadRows() []int {
	var out []int
	for i, w := range m.dead {
		for ; w != 0; w &= w - 1 {
			out = append(out, i*64+bits.TrailingZeros64(w))
		}
	}
	return out
}

// kill marks the row of each ID dead and returns those rows.
func (m *rowIDs) kill(ids []uint64) []int {
	m.growDead()
	rows := make([]int, 0, len(ids))
	for _, id := range ids {
		row := m.rowOf[id]
		rows = append(rows, row)
		delete(m.rowOf, id)
		m.dead[row>>6] |= 1 << (uint(row) & 63)
		m.nDead++
	}
	return rows
}

// liveIDs returns the stored IDs in ascending order.
func (m *rowIDs) liveIDs() []uint64 {
	out := make([]uint64, 0, m.live())
	for id := range m.rowOf {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// mask returns the bitmap of rows a search may return — live, and allowed
// by o's filter — and how many there are; nil when every row may be
// returned. It is written into buf when buf is large enough (any content),
// else into a new slice.
func (m *rowIDs) mask(o *searchOptions, buf []uint64) ([]uint64, int) {
	if m.nDead == 0 && !o.filtered() {
		return nil, len(m.ids)
	}
	words := (len(m.ids) + 63) / 64
	out := buf[:0]
	if cap(buf) < words {
		out = make([]uint64, words)
	}
	out = out[:words]
	if o.allowIDs != nil || o.allowFn != nil {
		clear(out)
	}
	switch {
	case o.allowIDs != nil:
		for _, id := range o.allowIDs {
			if row, ok := m.rowOf[id]; ok {
				out[row>>6] |= 1 << (uint(row) & 63)
			}
		}
	case o.allowFn != nil:
		for row, id := range m.ids {
			if !m.isDead(row) && o.allowFn(id) {
				out[row>>6] |= 1 << (uint(row) & 63)
			}
		}
	default:
		for i := range out {
			out[i] = ^uint64(0)
			if m.dead != nil {
				out[i] &^= m.dead[i]
			}
		}
		if tail := len(m.ids) & 63; tail != 0 {
			out[words-1] &= 1<<uint(tail) - 1
		}
	}
	n := 0
	for _, w := range out {
		n += bits.OnesCount64(w)
	}
	return out, n
}
