package cluster

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/keyrule"
	"github.com/umbravec/umbra/internal/resolve"
	"github.com/umbravec/umbra/internal/topk"
	"github.com/umbravec/umbra/meta"
)

// searchOptions are a search's options as the collection reads them, from
// the resolved umbra.SearchOptions.
type searchOptions struct {
	allow    []uint64
	allowSet bool
	maxHits  int
	token    []uint64
	eventual bool
	where    meta.Filter
	whereSet bool
	payload  bool
}

// collectSearch resolves opts for a search of kind (the rules of every
// collection), refusing what a collection cannot honour: Approximate (its
// answers are always exact: its replicas hold float32 rows) and AllowFunc
// (a predicate cannot travel to the nodes that hold the rows).
func collectSearch(kind byte, opts []umbra.SearchOption) (searchOptions, error) {
	verb := "SearchBatch"
	if kind == protocol.KindRange {
		verb = "SearchRange"
	}
	p, err := resolve.Search(verb, opts)
	if err != nil {
		return searchOptions{}, err
	}
	if err := p.Refuse("a cluster collection's searches are always exact", "Approximate"); err != nil {
		return searchOptions{}, err
	}
	if err := p.Refuse("a predicate cannot travel to the nodes that hold the rows: give the IDs (Allow) or a Where filter", "AllowFunc"); err != nil {
		return searchOptions{}, err
	}
	return searchOptions{
		allow: p.Allow, allowSet: p.Allow != nil, maxHits: p.MaxHits, token: p.After, eventual: p.Eventual,
		where: p.Where, whereSet: p.Where != (meta.Filter{}), payload: p.Payload,
	}, nil
}

// better reports whether a ranks before b: the ordering rule of every
// path (topk's: higher score under Cosine and Dot, lower under L2, equal
// scores by lower ID, NaN last).
func better(metric umbra.Metric, a, b protocol.Hit) bool {
	return topk.Before(metric, a.Score, a.ID, b.Score, b.ID)
}

// Search returns the k rows most similar to query, best first, equal
// scores by lower ID: the exact answer over every shard, or an error.
func (col *Collection) Search(ctx context.Context, query []float32, k int, opts ...umbra.SearchOption) ([]umbra.Hit, error) {
	all, err := col.SearchBatch(ctx, [][]float32{query}, k, opts...)
	if err != nil {
		return nil, err
	}
	return all[0], nil
}

// SearchBatch runs Search for every query.
func (col *Collection) SearchBatch(ctx context.Context, queries [][]float32, k int, opts ...umbra.SearchOption) ([][]umbra.Hit, error) {
	if k < 1 {
		return nil, umbra.ErrInvalidK
	}
	return col.search(ctx, protocol.KindSearch, queries, k, 0, opts)
}

// SearchRange returns every row whose score for query is within threshold
// (at least it under Cosine and Dot, at most under L2), best first; MaxHits
// caps how many.
func (col *Collection) SearchRange(ctx context.Context, query []float32, threshold float32, opts ...umbra.SearchOption) ([]umbra.Hit, error) {
	if math.IsNaN(float64(threshold)) {
		return nil, fmt.Errorf("%w: threshold is NaN", umbra.ErrNonFinite)
	}
	all, err := col.search(ctx, protocol.KindRange, [][]float32{query}, 0, threshold, opts)
	if err != nil {
		return nil, err
	}
	return all[0], nil
}

func (col *Collection) search(ctx context.Context, kind byte, queries [][]float32, k int, threshold float32, opts []umbra.SearchOption) ([][]umbra.Hit, error) {
	if err := col.live(); err != nil {
		return nil, err
	}
	o, err := collectSearch(kind, opts)
	if err != nil {
		return nil, err
	}
	dim := col.meta.Dim
	for i, q := range queries {
		if len(q) != dim {
			return nil, fmt.Errorf("%w: query %d has %d components, the collection %d", umbra.ErrDimMismatch, i, len(q), dim)
		}
		for j, v := range q {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("%w: query %d, component %d", umbra.ErrNonFinite, i, j)
			}
		}
	}
	out := make([][]umbra.Hit, len(queries))
	if len(queries) == 0 {
		return out, nil
	}
	tok := col.Token()
	if o.eventual {
		tok = make(token, col.meta.Shards)
	}
	for s := range min(len(tok), len(o.token)) {
		tok[s] = max(tok[s], o.token[s])
	}
	var where []byte
	if o.whereSet {
		if err := col.checkFilter(ctx, o.where); err != nil {
			return nil, err
		}
		where = o.where.AppendJSON(nil)
	}
	var allow []uint64
	if o.allowSet {
		allow = o.allow
		if allow == nil {
			allow = []uint64{}
		}
	}
	// Queries go in groups whose request fits the max payload; replies
	// come back in pieces when they do not.
	limit := int(col.c.x.NC.MaxPayload()) - protocol.ChunkRoom
	fixed := 72 + 8*len(allow) + len(where)
	if fixed+4*dim > limit {
		return nil, fmt.Errorf("%w: an allow list of %d IDs and a filter of %d bytes do not fit a NATS message (max payload %d bytes)", umbra.ErrTooLarge, len(allow), len(where), col.c.x.NC.MaxPayload())
	}
	per := max(1, (limit-fixed)/(4*dim))
	if kind == protocol.KindSearch {
		// A node refuses a request whose answer may hold over its
		// MaxHits hits (k × queries): under the default, a batch goes in
		// requests that fit it.
		per = min(per, max(1, protocol.DefaultMaxHits/k))
	}
	for start := 0; start < len(queries); start += per {
		end := min(len(queries), start+per)
		flat := make([]float32, 0, (end-start)*dim)
		for _, q := range queries[start:end] {
			flat = append(flat, q...)
		}
		reqs := map[int][]byte{}
		for s := range col.meta.Shards {
			q := &protocol.Request{Kind: kind, MinSeq: tok[s], WaitMs: 500, K: k, Threshold: threshold, MaxHits: o.maxHits, Allow: allow, Dim: dim, Queries: flat, Where: where, Payload: o.payload}
			reqs[s] = q.Encode()
		}
		replies, err := col.c.fanout(ctx, col.meta.Name, kind, reqs)
		if err != nil {
			return nil, err
		}
		for qi := start; qi < end; qi++ {
			var merged []protocol.Hit
			for s := range col.meta.Shards {
				hs := replies[s].Hits
				if len(hs) != end-start {
					return nil, fmt.Errorf("%w: shard %d answered %d queries of %d", ErrShardsUnavailable, s, len(hs), end-start)
				}
				merged = append(merged, hs[qi-start]...)
			}
			slices.SortFunc(merged, func(a, b protocol.Hit) int {
				if better(col.metric, a, b) {
					return -1
				}
				if better(col.metric, b, a) {
					return 1
				}
				return 0
			})
			limit := k
			if kind == protocol.KindRange {
				limit = o.maxHits
			}
			if limit > 0 && len(merged) > limit {
				merged = merged[:limit]
			}
			hits := make([]umbra.Hit, len(merged))
			for i, h := range merged {
				hits[i] = umbra.Hit{ID: h.ID, Score: h.Score, Key: h.Key, Payload: h.Payload}
			}
			out[qi] = hits
		}
	}
	return out, nil
}

// Lookup returns the IDs of the keys the collection holds, as
// engine.Index.Lookup does for one store: a key not stored is absent from
// the map. Each key is asked of its shard (the one its writes go to),
// after the handle's own writes (its token), as a search is. A key that
// no write could have stored (empty, broken UTF-8, a line break, over
// 4096 bytes) is engine.ErrInvalidKey.
func (col *Collection) Lookup(ctx context.Context, keys ...string) (map[string]uint64, error) {
	if err := col.live(); err != nil {
		return nil, err
	}
	byShard := make([][]string, col.meta.Shards)
	for i, k := range keys {
		if err := keyrule.Check(k); err != nil {
			return nil, fmt.Errorf("%w: key %d: %w", umbra.ErrInvalidKey, i, err)
		}
		s := protocol.ShardOfKey(k, col.meta.Shards)
		byShard[s] = append(byShard[s], k)
	}
	tok := col.Token()
	limit := int(col.c.x.NC.MaxPayload()) - protocol.ChunkRoom - 32
	out := make(map[string]uint64, len(keys))
	// Rounds of at most one request a shard, each under the max payload.
	for {
		reqs := map[int][]byte{}
		for s, ks := range byShard {
			n, size := 0, 0
			for n < len(ks) && n < protocol.DefaultMaxHits && (n == 0 || size+4+len(ks[n]) <= limit) {
				size += 4 + len(ks[n])
				n++
			}
			if n == 0 {
				continue
			}
			reqs[s] = (&protocol.Request{Kind: protocol.KindLookup, MinSeq: tok[s], WaitMs: 500, Keys: ks[:n]}).Encode()
			byShard[s] = ks[n:]
		}
		if len(reqs) == 0 {
			return out, nil
		}
		replies, err := col.c.fanout(ctx, col.meta.Name, protocol.KindLookup, reqs)
		if err != nil {
			return nil, err
		}
		for s := range reqs {
			if hs := replies[s].Hits; len(hs) != 1 {
				return nil, fmt.Errorf("%w: shard %d answered a lookup with %d lists", ErrShardsUnavailable, s, len(hs))
			}
			for _, h := range replies[s].Hits[0] {
				out[h.Key] = h.ID
			}
		}
	}
}

// ShardRows returns how many rows each shard holds, as one replica of it
// answers after the handle's writes (its token): the sum is the
// collection's rows.
func (col *Collection) ShardRows(ctx context.Context) ([]int, error) {
	if err := col.live(); err != nil {
		return nil, err
	}
	tok := col.Token()
	reqs := map[int][]byte{}
	for s := range col.meta.Shards {
		reqs[s] = (&protocol.Request{Kind: protocol.KindRows, MinSeq: tok[s], WaitMs: 500}).Encode()
	}
	replies, err := col.c.fanout(ctx, col.meta.Name, protocol.KindRows, reqs)
	if err != nil {
		return nil, err
	}
	out := make([]int, col.meta.Shards)
	for s := range out {
		out[s] = int(replies[s].Rows)
	}
	return out, nil
}
