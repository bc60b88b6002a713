package cluster

import (
	"context"
	"fmt"
	"slices"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/keyrule"
	"github.com/umbravec/umbra/internal/metaindex"
	"github.com/umbravec/umbra/internal/resolve"
	"github.com/umbravec/umbra/meta"
)

// A collection is an umbra.Collection: what a program written against the
// interface (the umbra command, an HTTP face) holds for a store and a
// cluster collection alike.
var _ umbra.Collection = (*Collection)(nil)

// getPage is how many rows one get request asks of a shard: its answer
// is bounded by the node's MaxHits and bytes in flight, and a node cuts it
// shorter when its rows' bytes would not fit.
const getPage = 1024

// Get returns the stored rows sel selects, in ID order, as
// engine.Index.Get does for one store: the rows of sel.IDs or sel.Keys
// (those not stored are skipped) or every row, narrowed by sel.Where and
// sel.From, then sel.Offset and sel.Limit, after the handle's own writes
// (its token), with each row's vector, metadata and payload when sel
// asks. Each shard is asked for its rows a page at a time, in ID order,
// and the pages are merged by ID: every request is bounded like a
// search's. A selection by Offset reads the IDs of the rows it skips (not
// their vectors, metadata or payloads); From reads from an ID on at once.
func (col *Collection) Get(ctx context.Context, sel umbra.Selection) ([]umbra.Record, error) {
	if err := col.live(); err != nil {
		return nil, err
	}
	if err := resolve.Selection(sel.IDs, sel.Keys, sel.Offset, sel.Limit); err != nil {
		return nil, err
	}
	for i, k := range sel.Keys {
		if err := keyrule.Check(k); err != nil {
			return nil, fmt.Errorf("%w: Selection.Keys[%d]: %v", umbra.ErrInvalidKey, i, err)
		}
	}
	where, err := col.whereBytes(ctx, sel.Where)
	if err != nil {
		return nil, err
	}
	var include byte
	if sel.Vectors {
		include |= protocol.IncludeVector
	}
	if sel.Meta {
		include |= protocol.IncludeMeta
	}
	if sel.Payloads {
		include |= protocol.IncludePayload
	}
	tok := col.Token()
	var rows []protocol.Row
	if sel.IDs != nil || sel.Keys != nil {
		if rows, err = col.getNamed(ctx, tok, sel.IDs, sel.Keys, sel.From, where, include); err != nil {
			return nil, err
		}
		rows = rows[min(sel.Offset, len(rows)):]
		if sel.Limit > 0 && len(rows) > sel.Limit {
			rows = rows[:sel.Limit]
		}
	} else {
		if rows, err = col.scan(ctx, tok, sel.From, sel.Offset, sel.Limit, where); err != nil {
			return nil, err
		}
		if include != 0 && len(rows) > 0 {
			ids := make([]uint64, len(rows))
			for i, r := range rows {
				ids[i] = r.ID
			}
			// The rows read whole, by ID; one deleted meanwhile is left out.
			if rows, err = col.getNamed(ctx, tok, ids, nil, 0, nil, include); err != nil {
				return nil, err
			}
		}
	}
	out := make([]umbra.Record, len(rows))
	for i, r := range rows {
		out[i] = umbra.Record{ID: r.ID, Key: r.Key, Vector: r.Vector, Payload: r.Payload}
		if len(r.Meta) > 0 {
			if out[i].Meta, err = metaindex.DecodeBinary(r.Meta, protocol.DecodeLimits); err != nil {
				return nil, fmt.Errorf("%w: row %d's metadata: %w", ErrShardsUnavailable, r.ID, err)
			}
		}
	}
	return out, nil
}

// whereBytes checks f against the collection's schema and returns it as a
// request carries it (nil for the zero Filter, which every row passes).
func (col *Collection) whereBytes(ctx context.Context, f meta.Filter) ([]byte, error) {
	if f == (meta.Filter{}) {
		return nil, nil
	}
	if err := col.checkFilter(ctx, f); err != nil {
		return nil, err
	}
	return f.AppendJSON(nil), nil
}

// getNamed returns the stored rows among ids or keys (one of them
// non-nil) from ID from on that where admits, sorted by ID: each name is
// asked of its shard, in requests of at most getPage names under the max
// payload, again from past the last row a replica returned when it cut its
// answer short.
func (col *Collection) getNamed(ctx context.Context, tok token, ids []uint64, keys []string, from uint64, where []byte, include byte) ([]protocol.Row, error) {
	S := col.meta.Shards
	type names struct {
		ids  []uint64
		keys []string
	}
	byShard := make([]names, S)
	for _, id := range ids {
		if id < protocol.ReservedIDs {
			s := protocol.ShardOfID(id, S)
			byShard[s].ids = append(byShard[s].ids, id)
		}
	}
	for _, k := range keys {
		s := protocol.ShardOfKey(k, S)
		byShard[s].keys = append(byShard[s].keys, k)
	}
	limit := int(col.c.x.NC.MaxPayload()) - protocol.ChunkRoom - 64 - len(where)
	type cursor struct {
		names
		from uint64
	}
	todo := map[int]*cursor{}
	for s, n := range byShard {
		if len(n.ids)+len(n.keys) > 0 {
			todo[s] = &cursor{names: n, from: from}
		}
	}
	var out []protocol.Row
	for len(todo) > 0 {
		// One request a shard a round: its next piece of names.
		reqs := map[int][]byte{}
		sent := map[int]names{}
		for s, c := range todo {
			var piece names
			size := 0
			if c.ids != nil {
				n := min(len(c.ids), getPage, max(1, limit/8))
				piece.ids = c.ids[:n]
			} else {
				n := 0
				for n < len(c.keys) && n < getPage && (n == 0 || size+4+len(c.keys[n]) <= limit) {
					size += 4 + len(c.keys[n])
					n++
				}
				piece.keys = c.keys[:n]
			}
			sent[s] = piece
			reqs[s] = (&protocol.Request{Kind: protocol.KindGet, MinSeq: tok[s], WaitMs: 500, From: c.from, Include: include,
				IDs: piece.ids, Keys: piece.keys, Where: where}).Encode()
		}
		replies, err := col.c.fanout(ctx, col.meta.Name, protocol.KindGet, reqs)
		if err != nil {
			return nil, err
		}
		for s, c := range todo {
			p, piece := replies[s], sent[s]
			out = append(out, p.Recs...)
			if p.Cut && len(p.Recs) > 0 {
				c.from = p.Recs[len(p.Recs)-1].ID + 1 // the same names again, past the rows read
				continue
			}
			c.ids, c.keys, c.from = c.ids[len(piece.ids):], c.keys[len(piece.keys):], from
			if len(c.ids)+len(c.keys) == 0 {
				delete(todo, s)
			}
		}
	}
	slices.SortFunc(out, func(a, b protocol.Row) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return slices.CompactFunc(out, func(a, b protocol.Row) bool { return a.ID == b.ID }), nil
}

// scan returns the IDs and keys of the rows from ID from on that where
// admits, in ID order, past the first offset of them, at most limit (0:
// every one): each shard is read a page at a time in ID order and the
// pages merged, a shard asked for its next page only once the merge has
// used up the one before.
func (col *Collection) scan(ctx context.Context, tok token, from uint64, offset, limit int, where []byte) ([]protocol.Row, error) {
	S := col.meta.Shards
	next := make([]uint64, S)
	for s := range next {
		next[s] = from
	}
	bufs := make([][]protocol.Row, S)
	done := make([]bool, S)
	var out []protocol.Row
	skipped := 0
	for {
		reqs := map[int][]byte{}
		for s := range S {
			if len(bufs[s]) == 0 && !done[s] {
				reqs[s] = (&protocol.Request{Kind: protocol.KindGet, MinSeq: tok[s], WaitMs: 500, From: next[s], Limit: getPage, Where: where}).Encode()
			}
		}
		if len(reqs) > 0 {
			replies, err := col.c.fanout(ctx, col.meta.Name, protocol.KindGet, reqs)
			if err != nil {
				return nil, err
			}
			for s := range reqs {
				p := replies[s]
				bufs[s] = p.Recs
				if len(p.Recs) > 0 {
					next[s] = p.Recs[len(p.Recs)-1].ID + 1
				}
				done[s] = len(p.Recs) < getPage && !p.Cut
			}
		}
		// Merge while every shard not done has rows buffered: the least ID
		// among the heads is the next row of the whole collection.
		for {
			best := -1
			for s := range S {
				if len(bufs[s]) == 0 {
					if !done[s] {
						best = -2 // its next page first
						break
					}
					continue
				}
				if best == -1 || bufs[s][0].ID < bufs[best][0].ID {
					best = s
				}
			}
			if best == -1 {
				return out, nil
			}
			if best == -2 {
				break
			}
			r := bufs[best][0]
			bufs[best] = bufs[best][1:]
			if skipped < offset {
				skipped++
				continue
			}
			out = append(out, r)
			if limit > 0 && len(out) == limit {
				return out, nil
			}
		}
	}
}

// Count returns how many rows where matches (the zero Filter: every row),
// after the handle's own writes: each shard counts its own.
func (col *Collection) Count(ctx context.Context, where meta.Filter) (int, error) {
	if err := col.live(); err != nil {
		return 0, err
	}
	w, err := col.whereBytes(ctx, where)
	if err != nil {
		return 0, err
	}
	tok := col.Token()
	reqs := map[int][]byte{}
	for s := range col.meta.Shards {
		reqs[s] = (&protocol.Request{Kind: protocol.KindCount, MinSeq: tok[s], WaitMs: 500, Where: w}).Encode()
	}
	replies, err := col.c.fanout(ctx, col.meta.Name, protocol.KindCount, reqs)
	if err != nil {
		return 0, err
	}
	n := 0
	for s := range col.meta.Shards {
		n += int(replies[s].Rows)
	}
	return n, nil
}

// Summary describes the collection: its name, its rows (every shard's,
// after the handle's writes), dimension, metric and metadata fields as
// its record holds them now, its shards, and in Backend the cluster it
// lives in, in words.
func (col *Collection) Summary(ctx context.Context) (umbra.Summary, error) {
	if err := col.live(); err != nil {
		return umbra.Summary{}, err
	}
	rows, err := col.Count(ctx, meta.Filter{})
	if err != nil {
		return umbra.Summary{}, err
	}
	rec, _, err := col.readRecord(ctx)
	if err != nil {
		return umbra.Summary{}, err
	}
	fields, err := rec.Schema()
	if err != nil {
		return umbra.Summary{}, err
	}
	backend := fmt.Sprintf("cluster at %s: %d shards, each a JetStream stream of %d replicas", col.c.x.NC.ConnectedUrlRedacted(), rec.Shards, rec.Replicas)
	if rec.NodeReplicas > 0 {
		backend += fmt.Sprintf(", held by %d nodes each under placement", rec.NodeReplicas)
	}
	return umbra.Summary{Name: rec.Name, Rows: rows, Dim: rec.Dim, Metric: col.metric, Precision: umbra.F32,
		Fields: fields, Shards: rec.Shards, Backend: backend}, nil
}

// Close ends the handle: its calls return umbra.ErrClosed from then on.
// The Client it came from stays open (Client.Close closes it).
func (col *Collection) Close() error {
	col.closed.Store(true)
	return nil
}

// live refuses a call on a closed handle.
func (col *Collection) live() error {
	if col.closed.Load() {
		return fmt.Errorf("%w: collection %s", umbra.ErrClosed, col.meta.Name)
	}
	return nil
}
