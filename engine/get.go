package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/keyrule"
	"github.com/umbravec/umbra/internal/resolve"
	"github.com/umbravec/umbra/meta"
)

// The index is an umbra.Collection: what a program written against the
// interface (the umbra command, an HTTP face) holds for a store or an
// in-memory index alike.
var _ umbra.Collection = (*Index)(nil)

// Get returns the stored rows sel selects, in ID order: every row, the
// rows of sel.IDs or sel.Keys (those not stored are skipped), narrowed by
// sel.Where and sel.From, then sel.Offset and sel.Limit; with each row's
// vector, metadata and payload when sel asks. A key that no write could
// have stored is ErrInvalidKey, a filter the index cannot evaluate
// ErrInvalidFilter.
func (ix *Index) Get(ctx context.Context, sel umbra.Selection) (recs []umbra.Record, err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	if err := resolve.Selection(sel.IDs, sel.Keys, sel.Offset, sel.Limit); err != nil {
		return nil, err
	}
	for i, k := range sel.Keys {
		if err := keyrule.Check(k); err != nil {
			return nil, fmt.Errorf("%w: Selection.Keys[%d]: %v", umbra.ErrInvalidKey, i, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return nil, umbra.ErrClosed
	}
	if err := ix.mapped.check(); err != nil {
		return nil, err
	}
	ids, err := ix.selected(sel)
	if err != nil {
		return nil, err
	}
	recs = make([]umbra.Record, len(ids))
	for i, id := range ids {
		row := ix.rid.rowOf[id]
		r := umbra.Record{ID: id, Key: ix.keys.key[id]}
		if sel.Vectors {
			r.Vector = slices.Clone(ix.slab.Row(row))
		}
		if sel.Meta && ix.attrs.meta != nil && row < ix.attrs.meta.Len() {
			r.Meta = ix.attrs.meta.Row(row)
		}
		if sel.Payloads && row < len(ix.attrs.payloads) && len(ix.attrs.payloads[row]) > 0 {
			r.Payload = slices.Clone(ix.attrs.payloads[row])
		}
		recs[i] = r
	}
	if err := ix.mapped.check(); err != nil {
		return nil, err
	}
	return recs, nil
}

// selected returns the IDs of the live rows sel selects, ascending, after
// its From, Offset and Limit. The caller holds ix.mu.
func (ix *Index) selected(sel umbra.Selection) ([]uint64, error) {
	var ids []uint64
	switch {
	case sel.IDs != nil:
		for _, id := range sel.IDs {
			if _, ok := ix.rid.rowOf[id]; ok {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
	case sel.Keys != nil:
		for _, k := range sel.Keys {
			if id, ok := ix.keys.id[k]; ok {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
	default:
		ids = ix.rid.liveIDs()
	}
	if sel.From > 0 {
		at, _ := slices.BinarySearch(ids, sel.From)
		ids = ids[at:]
	}
	if sel.Where != (meta.Filter{}) {
		m, err := ix.mask(&searchOptions{where: sel.Where, whereSet: true})
		if err != nil {
			return nil, err
		}
		ids = slices.DeleteFunc(ids, func(id uint64) bool {
			row := ix.rid.rowOf[id]
			return m.bits[row>>6]&(1<<(uint(row)&63)) == 0
		})
		m.release()
	}
	ids = ids[min(sel.Offset, len(ids)):]
	if sel.Limit > 0 && len(ids) > sel.Limit {
		ids = ids[:sel.Limit]
	}
	return ids, nil
}

// Count returns how many stored rows where matches (the zero Filter: every
// row); a filter the index cannot evaluate is ErrInvalidFilter.
func (ix *Index) Count(ctx context.Context, where meta.Filter) (n int, err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return 0, umbra.ErrClosed
	}
	if where == (meta.Filter{}) {
		return ix.rid.live(), nil
	}
	m, err := ix.mask(&searchOptions{where: where, whereSet: true})
	if err != nil {
		return 0, err
	}
	defer m.release()
	return m.n, nil
}

// Summary describes the index: its store's path (empty in memory), its
// rows, dimension, metric, precision and metadata fields, one shard, and
// in Backend where its searches run (Info's first line: the device, the
// adapter or the CPU kernel).
func (ix *Index) Summary(ctx context.Context) (umbra.Summary, error) {
	if err := ctx.Err(); err != nil {
		return umbra.Summary{}, err
	}
	ix.mu.RLock()
	closed, rows := ix.closed, ix.rid.live()
	ix.mu.RUnlock()
	if closed {
		return umbra.Summary{}, umbra.ErrClosed
	}
	backend, _, _ := strings.Cut(ix.Info().String(), "\n")
	return umbra.Summary{
		Name: ix.path(), Rows: rows, Dim: ix.cfg.Dim, Metric: ix.cfg.Metric, Precision: ix.cfg.Precision,
		Fields: ix.Schema(), Shards: 1, Backend: backend,
	}, nil
}

// path is the store's file ("" for an index in memory).
func (ix *Index) path() string {
	if ix.store != nil {
		return ix.store.path
	}
	return ix.readOnly
}
