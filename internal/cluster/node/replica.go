package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/metaindex"
	"github.com/umbravec/umbra/meta"
)

// outcomeRing is how many write messages' outcomes a replica keeps.
const outcomeRing = 4096

// replica is one shard of one collection held by this node: an engine
// store on disk, fed by the shard's stream in order.
//
// The applied sequence lives inside the store: applying stream message s
// writes, in the same engine call that changes the rows (one atomic,
// logged store write), a row with the reserved ID ReservedIDs+s. On open
// the largest reserved ID present is the applied sequence. When a message
// needs two engine calls (an upsert by key that adds new keys and
// replaces stored ones; a delete), every call but the last is idempotent
// under replay and the sentinel goes into the last: a crash between them
// leaves the old sequence, and replaying the message from that state
// reaches the same rows. So a restart resumes exactly where the store
// stands, with no side file that could disagree with it, and a snapshot
// (the store's own base file) carries its sequence inside it.
type replica struct {
	coll  string
	shard int
	ix    *engine.Index
	ixMu  sync.RWMutex // held to read ix by searches, to replace it by recovery

	applied atomic.Uint64 // the last stream sequence applied
	mu      sync.Mutex    // guards the fields below and orders applies
	cond    *sync.Cond    // broadcast when applied moves
	live    []uint64      // sentinel IDs present, ascending
	outs    map[uint64]protocol.Outcome
	broken  error // a *stopError: a message a newer build may apply, and the shard stops here until one does or an operator skips it
	logf    func(format string, args ...any)

	// The node's hold on the replica: ctx ends its follower, wg counts
	// its follower and request goroutines, sub is its subscription to
	// the shard's searches (made once applied reaches since), and
	// stopped (under stop) turns requests away once it is being dropped.
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	sub     *nats.Subscription
	since   uint64
	stop    sync.RWMutex
	stopped bool
}

// answering says whether the replica answers its shard's searches.
func (r *replica) answering() bool { return r.sub != nil }

// openReplica opens (or creates) the shard's store at path.
func openReplica(ctx context.Context, coll string, shard int, path string, cfg engine.Config) (*replica, error) {
	ix, err := engine.Open(ctx, path, cfg)
	if err != nil {
		return nil, err
	}
	r := &replica{coll: coll, shard: shard, ix: ix, outs: map[uint64]protocol.Outcome{}, logf: func(string, ...any) {}}
	r.cond = sync.NewCond(&r.mu)
	if err := r.loadSentinels(ctx); err != nil {
		ix.Close()
		return nil, err
	}
	return r, nil
}

// loadSentinels reads the applied sequence from the store and deletes the
// stale sentinels a crash may have left.
func (r *replica) loadSentinels(ctx context.Context) error {
	sentinels, err := r.ix.Get(ctx, umbra.Selection{From: protocol.ReservedIDs})
	if err != nil {
		return err
	}
	r.live = make([]uint64, len(sentinels))
	for i, rec := range sentinels {
		r.live[i] = rec.ID
	}
	if len(r.live) > 0 {
		r.applied.Store(r.live[len(r.live)-1] - protocol.ReservedIDs)
	}
	return r.trimSentinels(ctx, 1)
}

// trimSentinels deletes all but the newest keep sentinels (mu held, or
// before the replica is shared).
func (r *replica) trimSentinels(ctx context.Context, keep int) error {
	if len(r.live) <= keep {
		return nil
	}
	old := r.live[:len(r.live)-keep]
	if err := r.ix.Delete(ctx, umbra.WithIDs(old...)); err != nil {
		return fmt.Errorf("shard %d: dropping old sequence rows: %w", r.shard, err)
	}
	r.live = append([]uint64(nil), r.live[len(r.live)-keep:]...)
	return nil
}

func (r *replica) close() error { return r.ix.Close() }

// store is the replica's engine store (mu held).
func (r *replica) store() *engine.Index { return r.ix }

// sentinelRow is the vector stored under a sentinel ID: any valid row
// (non-zero, so cosine accepts it).
func (r *replica) sentinelRow() []float32 {
	v := make([]float32, r.ix.Dim())
	v[0] = 1
	return v
}

// apply applies stream message seq. A non-nil error is a failure of this
// machine (the caller retries the same message), or a *stopError: the
// message verifies but is of a newer format, and the follower stops there
// unless an operator's repair record skips it (repair.go). A refusal every
// replica reaches alike is the message's outcome, not an error; so is a
// message no build can read (too short for a checksum, a checksum that
// fails, a body that does not decode): every replica skips it, recording
// codeUnreadable as its outcome and moving its applied sequence past it
// with nothing else changed, and logs it.
func (r *replica) apply(ctx context.Context, seq uint64, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken != nil {
		return r.broken
	}
	if seq <= r.applied.Load() {
		return nil // applied before (a replay after restart)
	}
	if want := r.applied.Load() + 1; seq != want {
		return fmt.Errorf("shard %d: stream message %d arrived, %d expected", r.shard, seq, want)
	}
	m, a, err := protocol.ReadWrite(data, r.ix.Dim())
	if ve := (*protocol.VersionError)(nil); errors.As(err, &ve) {
		return newStopError(r.coll, r.shard, seq, data, ve)
	}
	sid := protocol.ReservedIDs + seq
	if err != nil {
		r.logf("shard %s/%d: skipping stream message %d of %s (%d bytes, first bytes %s): %v", r.coll, r.shard, seq, protocol.StreamName(r.coll, r.shard), len(data), protocol.HeadHex(data), err)
		if err := r.mark(ctx, sid); err != nil {
			return err
		}
		r.record(ctx, seq, sid, protocol.Outcome{Code: protocol.CodeUnreadable, Msg: fmt.Sprintf("stream message %d of shard %d (%d bytes): %v", seq, r.shard, len(data), err)})
		return nil
	}
	out, err := r.applyMsg(ctx, m, a, sid)
	if err != nil {
		return err
	}
	r.record(ctx, seq, sid, out)
	return nil
}

// mark stores the sentinel sid alone: the sequence moves, the rows stay
// (mu held).
func (r *replica) mark(ctx context.Context, sid uint64) error {
	_, err := r.ix.Upsert(ctx, umbra.Flat(r.sentinelRow(), r.ix.Dim()), umbra.WithIDs(sid))
	return err
}

// record notes that message seq is applied, its sentinel sid stored, with
// outcome out (mu held).
func (r *replica) record(ctx context.Context, seq, sid uint64, out protocol.Outcome) {
	r.live = append(r.live, sid)
	r.applied.Store(seq)
	r.outs[seq] = out
	delete(r.outs, seq-outcomeRing)
	r.cond.Broadcast()
	if len(r.live) > protocol.SentinelCap {
		// Not atomic with the apply, and need not be: a crash before it
		// leaves old sentinels, which the next open deletes. A failure
		// leaves them to the next apply.
		_ = r.trimSentinels(ctx, 1)
	}
}

// stopAt stops the replica at se's message: applies wait, and requests
// are answered with se, until skip.
func (r *replica) stopAt(se *stopError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.broken = se
	r.cond.Broadcast()
}

// skip passes se's message as an operator's repair record says, every
// replica alike: the sequence moves past it, nothing else changes, and
// the outcome is codeSkipped.
func (r *replica) skip(ctx context.Context, se *stopError, rec *protocol.RepairRecord) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if want := r.applied.Load() + 1; se.seq != want {
		return fmt.Errorf("shard %d: skipping stream message %d, %d expected", r.shard, se.seq, want)
	}
	sid := protocol.ReservedIDs + se.seq
	if err := r.mark(ctx, sid); err != nil {
		return err
	}
	r.broken = nil
	r.record(ctx, se.seq, sid, protocol.Outcome{Code: protocol.CodeSkipped, Msg: fmt.Sprintf("stream message %d of shard %d (%d bytes, format version %d) skipped by the repair record %s/%s of %s",
		se.seq, r.shard, se.size, se.version, protocol.BucketRepairs, protocol.RepairKey(r.coll, r.shard, se.seq), rec.At.Format(time.RFC3339))})
	return nil
}

// stoppedReply is the answer of a stopped replica to any request, or nil.
func (r *replica) stoppedReply() *protocol.Reply {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken == nil {
		return nil
	}
	return &protocol.Reply{Status: protocol.StatusStopped, Applied: r.applied.Load(), Msg: r.broken.Error()}
}

// refuse is a refusal outcome.
func (r *replica) refuse(code byte, format string, args ...any) protocol.Outcome {
	return protocol.Outcome{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// applyMsg makes the engine calls of one message, the sentinel sid in the
// last of them, and returns the message's outcome.
func (r *replica) applyMsg(ctx context.Context, m *protocol.WriteMsg, a *protocol.MsgAttrs, sid uint64) (protocol.Outcome, error) {
	dim := r.ix.Dim()
	row := func(i int) []float32 { return m.Rows[i*dim : (i+1)*dim] }
	withSentinel := func(rows []float32) []float32 {
		out := make([]float32, 0, len(rows)+dim)
		return append(append(out, rows...), r.sentinelRow()...)
	}
	mark := func() error { return r.mark(ctx, sid) }
	// refused records a deterministic refusal: the rows stay as they are,
	// and only the sequence moves.
	refused := func(o protocol.Outcome) (protocol.Outcome, error) {
		if err := mark(); err != nil {
			return protocol.Outcome{}, err
		}
		return o, nil
	}
	// engineErr splits an engine error into a refusal and a failure.
	engineErr := func(err error) (protocol.Outcome, error) {
		if c := protocol.DeterministicCode(err); c != protocol.CodeOther {
			return refused(protocol.Outcome{Code: c, Msg: err.Error()})
		}
		return protocol.Outcome{}, err
	}
	// A payload over the engine's limit is refused here, by the limit
	// every replica has, rather than by the engine's ErrTooLarge, which
	// also means a full device.
	for i, p := range a.Payloads {
		if len(p) > umbra.DefaultMaxPayloadBytes {
			return refused(r.refuse(protocol.CodeTooLarge, "%v: the payload of row %d is %d bytes, over the limit of %d", umbra.ErrTooLarge, i, len(p), umbra.DefaultMaxPayloadBytes))
		}
	}
	all := protocol.Indices(m.N())
	switch {
	case m.Op == protocol.OpAdd && m.Keys == nil:
		for _, id := range m.IDs {
			if r.ix.Has(id) {
				return refused(r.refuse(protocol.CodeIDExists, "%v: ID %d", umbra.ErrIDExists, id))
			}
		}
		if _, err := r.ix.Add(ctx, umbra.Flat(withSentinel(m.Rows), dim), append(a.Opts(all, 1), umbra.WithIDs(append(slices.Clone(m.IDs), sid)...))...); err != nil {
			return engineErr(err)
		}
		return protocol.Outcome{IDs: m.IDs}, nil

	case m.Op == protocol.OpAdd:
		for _, k := range m.Keys {
			if _, ok := r.ix.Lookup(k); ok {
				return refused(r.refuse(protocol.CodeKeyExists, "%v: key %q", umbra.ErrKeyExists, k))
			}
		}
		for _, id := range m.IDs {
			if r.ix.Has(id) {
				return refused(r.refuse(protocol.CodeIDExists, "%v: ID %d", umbra.ErrIDExists, id))
			}
		}
		keys := append(slices.Clone(m.Keys), "") // the sentinel has no key
		if _, err := r.ix.Add(ctx, umbra.Flat(withSentinel(m.Rows), dim), append(a.Opts(all, 1), umbra.WithIDs(append(slices.Clone(m.IDs), sid)...), umbra.WithKeys(keys...))...); err != nil {
			return engineErr(err)
		}
		return protocol.Outcome{IDs: m.IDs}, nil

	case m.Op == protocol.OpUpsert && m.Keys == nil:
		if _, err := r.ix.Upsert(ctx, umbra.Flat(withSentinel(m.Rows), dim), append(a.Opts(all, 1), umbra.WithIDs(append(slices.Clone(m.IDs), sid)...))...); err != nil {
			return engineErr(err)
		}
		return protocol.Outcome{IDs: m.IDs}, nil

	case m.Op == protocol.OpUpsert:
		// New keys are added first under the IDs the message chose; then
		// the stored ones are replaced, with the sentinel. Replayed after
		// a crash between the two, the first call's keys are stored ones
		// and are replaced by the same rows: the same end state.
		ids := make([]uint64, len(m.Keys))
		var newRows, oldRows []float32
		var newIDs, oldIDs []uint64
		var newKeys []string
		var newIdx, oldIdx []int
		for i, k := range m.Keys {
			if id, ok := r.ix.Lookup(k); ok {
				ids[i] = id
				oldIDs, oldRows, oldIdx = append(oldIDs, id), append(oldRows, row(i)...), append(oldIdx, i)
			} else {
				if r.ix.Has(m.IDs[i]) {
					return refused(r.refuse(protocol.CodeIDExists, "%v: ID %d chosen for key %q", umbra.ErrIDExists, m.IDs[i], k))
				}
				ids[i] = m.IDs[i]
				newIDs, newRows, newKeys, newIdx = append(newIDs, m.IDs[i]), append(newRows, row(i)...), append(newKeys, k), append(newIdx, i)
			}
		}
		if len(newIDs) > 0 {
			if _, err := r.ix.Add(ctx, umbra.Flat(newRows, dim), append(a.Opts(newIdx, 0), umbra.WithIDs(newIDs...), umbra.WithKeys(newKeys...))...); err != nil {
				return engineErr(err)
			}
		}
		if _, err := r.ix.Upsert(ctx, umbra.Flat(withSentinel(oldRows), dim), append(a.Opts(oldIdx, 1), umbra.WithIDs(append(oldIDs, sid)...))...); err != nil {
			if len(newIDs) == 0 {
				// Nothing was added: a refusal (metadata of another
				// kind than the stored rows') is the message's outcome.
				return engineErr(err)
			}
			return protocol.Outcome{}, err // the adds stand; a retry replaces them with the same rows
		}
		return protocol.Outcome{IDs: ids}, nil

	default: // delete
		ids := m.IDs
		if m.Keys != nil {
			ids = make([]uint64, len(m.Keys))
			for i, k := range m.Keys {
				id, ok := r.ix.Lookup(k)
				if !ok {
					return refused(r.refuse(protocol.CodeNotFound, "%v: key %q", umbra.ErrNotFound, k))
				}
				ids[i] = id
			}
		}
		for _, id := range ids {
			if !r.ix.Has(id) {
				return refused(r.refuse(protocol.CodeNotFound, "%v: ID %d", umbra.ErrNotFound, id))
			}
		}
		// The delete, then the sentinel: replayed after a crash between
		// them, the rows are gone and the delete is refused as not found,
		// which changes nothing: the same end state.
		if len(ids) > 0 {
			if err := r.ix.Delete(ctx, umbra.WithIDs(ids...)); err != nil {
				return engineErr(err)
			}
		}
		if err := mark(); err != nil {
			return protocol.Outcome{}, err
		}
		return protocol.Outcome{IDs: ids}, nil
	}
}

// waitApplied waits until the replica has applied seq, or until ctx ends.
func (r *replica) waitApplied(ctx context.Context, seq uint64) bool {
	if r.applied.Load() >= seq {
		return true
	}
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.applied.Load() < seq && ctx.Err() == nil && r.broken == nil {
		r.cond.Wait()
	}
	return r.applied.Load() >= seq
}

// answer serves one request, admitted under t: searches on the engine
// with the sentinels dropped, the outcomes of awaited writes, the IDs of
// keys, or the rows held. The answer's exact size is charged to t before
// the reply is made (and payloads one by one as they are copied); one that
// does not fit the node's bytes in flight is an error instead.
func (r *replica) answer(ctx context.Context, q *protocol.Request, t *ticket) *protocol.Reply {
	if p := r.stoppedReply(); p != nil {
		return p
	}
	applied := r.applied.Load()
	var p *protocol.Reply
	// Awaits and row counts read under mu, which applies and recovery
	// hold (recovery takes mu, then ixMu: holding ixMu here while asking
	// for mu could deadlock with it); the rest under ixMu alone.
	switch q.Kind {
	case protocol.KindAwait:
		p = &protocol.Reply{Applied: applied}
		r.mu.Lock()
		for _, s := range q.Seqs {
			o, ok := r.outs[s]
			if !ok {
				p = &protocol.Reply{Status: protocol.StatusError, Applied: applied, Msg: fmt.Sprintf("%v: shard %d message %d: its outcome is no longer kept (applied before this replica's restart, or over %d messages ago)", protocol.ErrOutcomeUnknown, r.shard, s, outcomeRing)}
				break
			}
			p.Outcomes = append(p.Outcomes, o)
		}
		r.mu.Unlock()
	case protocol.KindRows:
		// No apply runs under mu: the rows and the sentinels agree.
		r.mu.Lock()
		p = &protocol.Reply{Applied: applied, Rows: uint64(r.ix.Len() - len(r.live))}
		r.mu.Unlock()
	case protocol.KindGet:
		p = r.get(ctx, q, t)
	case protocol.KindCount:
		p = r.count(ctx, q)
	case protocol.KindSearch, protocol.KindRange:
		if q.Payload {
			p = r.searchWithPayloads(ctx, q, t)
			break
		}
		p, _ = r.search(ctx, q, applied, t)
	default:
		p, _ = r.search(ctx, q, applied, t)
	}
	if p.Status == protocol.StatusOK {
		if err := t.setAnswer(p); err != nil {
			return &protocol.Reply{Status: protocol.StatusError, Applied: p.Applied, Msg: err.Error()}
		}
	}
	return p
}

// searchWithPayloads searches without payloads, then copies the hits'
// payloads once their size is charged to t, under mu with no write
// applied since the search (so every payload is the searched row's). When
// writes keep coming between the two, the third try searches under mu.
func (r *replica) searchWithPayloads(ctx context.Context, q *protocol.Request, t *ticket) *protocol.Reply {
	for try := 0; ; try++ {
		locked := try >= 2
		if locked {
			r.mu.Lock()
		}
		applied := r.applied.Load()
		p, ix := r.search(ctx, q, applied, t)
		if !locked {
			r.mu.Lock()
		}
		if p.Status != protocol.StatusOK || r.applied.Load() == applied && r.ix == ix {
			if p.Status == protocol.StatusOK {
				p = r.fillPayloads(ctx, ix, p, t)
			}
			r.mu.Unlock()
			return p
		}
		r.mu.Unlock()
	}
}

// fillPayloads copies the payloads of p's hits from ix, charging each to
// t first (mu held, so no write changes them meanwhile).
func (r *replica) fillPayloads(ctx context.Context, ix *engine.Index, p *protocol.Reply, t *ticket) *protocol.Reply {
	if err := t.setAnswer(p); err != nil {
		return &protocol.Reply{Status: protocol.StatusError, Applied: p.Applied, Msg: err.Error()}
	}
	for _, hs := range p.Hits {
		for i := range hs {
			recs, err := ix.Get(ctx, umbra.Selection{IDs: []uint64{hs[i].ID}, Payloads: true})
			if err == nil && len(recs) == 0 {
				err = fmt.Errorf("%w: ID %d", umbra.ErrNotFound, hs[i].ID)
			}
			if err != nil {
				return &protocol.Reply{Status: protocol.StatusError, Applied: p.Applied, Msg: fmt.Sprintf("payload of ID %d: %v", hs[i].ID, err)}
			}
			b := recs[0].Payload
			if err := t.add(2 * int64(len(b))); err != nil {
				return &protocol.Reply{Status: protocol.StatusError, Applied: p.Applied, Msg: err.Error()}
			}
			hs[i].Payload = string(b)
		}
	}
	p.Payloads = true
	return p
}

// search answers a search, range search or lookup from the engine index
// (ixMu held for it), without payloads, and returns the index it read.
func (r *replica) search(ctx context.Context, q *protocol.Request, applied uint64, t *ticket) (*protocol.Reply, *engine.Index) {
	r.ixMu.RLock()
	defer r.ixMu.RUnlock()
	ix := r.ix
	if q.Kind == protocol.KindLookup {
		held := make([]protocol.Hit, 0, len(q.Keys))
		for _, k := range q.Keys {
			if id, ok := ix.Lookup(k); ok {
				held = append(held, protocol.Hit{ID: id, Key: k})
			}
		}
		return &protocol.Reply{Applied: applied, Hits: [][]protocol.Hit{held}}, ix
	}
	if q.Dim != ix.Dim() {
		return &protocol.Reply{Status: protocol.StatusError, Applied: applied, Msg: fmt.Sprintf("%v: queries of dimension %d for a collection of dimension %d", umbra.ErrDimMismatch, q.Dim, ix.Dim())}, ix
	}
	var opts []umbra.SearchOption
	if q.Allow != nil {
		opts = append(opts, umbra.Allow(q.Allow...))
	}
	if q.Where != nil {
		f, err := localFilter(q.Where, ix.Schema())
		if err != nil {
			return &protocol.Reply{Status: protocol.StatusError, Applied: applied, Msg: err.Error()}, ix
		}
		opts = append(opts, umbra.Where(f))
	}
	nq := len(q.Queries) / q.Dim
	p := &protocol.Reply{Applied: applied, Hits: make([][]protocol.Hit, nq)}
	keep := func(hs []umbra.Hit, limit int) []protocol.Hit {
		out := make([]protocol.Hit, 0, len(hs))
		for _, h := range hs {
			if h.ID >= protocol.ReservedIDs {
				continue
			}
			if limit > 0 && len(out) == limit {
				break
			}
			out = append(out, protocol.Hit{ID: h.ID, Score: h.Score, Key: h.Key})
		}
		return out
	}
	if q.Kind == protocol.KindSearch {
		qs := make([][]float32, nq)
		for i := range qs {
			qs[i] = q.Queries[i*q.Dim : (i+1)*q.Dim]
		}
		all, err := ix.SearchBatch(ctx, qs, q.K+protocol.SentinelMargin, opts...)
		if err != nil {
			return &protocol.Reply{Status: protocol.StatusError, Applied: applied, Msg: err.Error()}, ix
		}
		for i, hs := range all {
			p.Hits[i] = keep(hs, q.K)
		}
		return p, ix
	}
	// A range search without MaxHits may hold at most the node's MaxHits
	// hits in all: asked for one past them (and the sentinels), a larger
	// answer shows, and is refused rather than cut.
	limit := t.maxHits()
	total := 0
	for i := range nq {
		o := opts
		if q.MaxHits > 0 {
			o = append(slices.Clone(opts), umbra.MaxHits(q.MaxHits+protocol.SentinelMargin))
		} else if limit > 0 {
			o = append(slices.Clone(opts), umbra.MaxHits(limit-total+protocol.SentinelMargin+1))
		}
		hs, err := ix.SearchRange(ctx, q.Queries[i*q.Dim:(i+1)*q.Dim], q.Threshold, o...)
		if err != nil {
			return &protocol.Reply{Status: protocol.StatusError, Applied: applied, Msg: err.Error()}, ix
		}
		p.Hits[i] = keep(hs, q.MaxHits)
		total += len(p.Hits[i])
		if q.MaxHits == 0 && limit > 0 && total > limit {
			t.refused = refuseHits
			return &protocol.Reply{Status: protocol.StatusError, Applied: applied, Msg: fmt.Sprintf("request too large: the range search's answer holds over %d hits, the node's limit (Limits.MaxHits); give MaxHits or a narrower threshold", limit)}, ix
		}
	}
	return p, ix
}

// get answers a get: the rows the request selects, in ID order from its
// from on, at most its limit and the node's MaxHits, the sentinels left
// out. Their IDs and keys
// are read first (the request was charged for limit rows), then each
// row's vector, metadata and payload, charged to t before the next is
// read: a row that does not fit the node's bytes in flight cuts the answer
// short (cut: the client asks again from the last ID), or refuses it when
// it is the first. Applies wait meanwhile (mu), so every row is read as of
// one applied sequence.
func (r *replica) get(ctx context.Context, q *protocol.Request, t *ticket) *protocol.Reply {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ixMu.RLock()
	defer r.ixMu.RUnlock()
	ix := r.ix
	applied := r.applied.Load()
	fail := func(err error) *protocol.Reply {
		return &protocol.Reply{Status: protocol.StatusError, Applied: applied, Msg: err.Error()}
	}
	sel := umbra.Selection{IDs: q.IDs, Keys: q.Keys, From: q.From, Limit: q.Limit}
	if sel.Limit > 0 && sel.IDs == nil && sel.Keys == nil {
		sel.Limit += len(r.live) // the sentinels come last, in ID order
	}
	if q.Where != nil {
		f, err := localFilter(q.Where, ix.Schema())
		if err != nil {
			return fail(err)
		}
		sel.Where = f
	}
	named, err := ix.Get(ctx, sel)
	if err != nil {
		return fail(err)
	}
	p := &protocol.Reply{Applied: applied, Include: q.Include, Dim: ix.Dim()}
	most := t.maxHits() // the node's MaxHits: past it the answer is cut
	for _, rec := range named {
		if rec.ID >= protocol.ReservedIDs || q.Limit > 0 && len(p.Recs) == q.Limit {
			break
		}
		if most > 0 && len(p.Recs) == most {
			p.Cut = true
			break
		}
		out := protocol.Row{ID: rec.ID, Key: rec.Key}
		if q.Include != 0 {
			full, err := ix.Get(ctx, umbra.Selection{IDs: []uint64{rec.ID}, Vectors: q.Include&protocol.IncludeVector != 0,
				Meta: q.Include&protocol.IncludeMeta != 0, Payloads: q.Include&protocol.IncludePayload != 0})
			if err != nil {
				return fail(err)
			}
			if len(full) == 1 {
				out.Vector, out.Payload = full[0].Vector, full[0].Payload
				if full[0].Meta != nil {
					out.Meta = metaindex.AppendBinary(nil, full[0].Meta)
				}
			}
		}
		if err := t.add(recordBytes(out)); err != nil {
			if len(p.Recs) == 0 {
				return fail(err)
			}
			p.Cut = true
			break
		}
		p.Recs = append(p.Recs, out)
	}
	return p
}

// count answers a count: the rows the request's where matches (every
// row without one), the sentinels left out.
func (r *replica) count(ctx context.Context, q *protocol.Request) *protocol.Reply {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ixMu.RLock()
	defer r.ixMu.RUnlock()
	ix := r.ix
	applied := r.applied.Load()
	fail := func(err error) *protocol.Reply {
		return &protocol.Reply{Status: protocol.StatusError, Applied: applied, Msg: err.Error()}
	}
	var where meta.Filter
	if q.Where != nil {
		f, err := localFilter(q.Where, ix.Schema())
		if err != nil {
			return fail(err)
		}
		where = f
	}
	n, err := ix.Count(ctx, where)
	if err != nil {
		return fail(err)
	}
	if len(r.live) > 0 {
		// The sentinels the filter matches (none has metadata).
		sent, err := ix.Get(ctx, umbra.Selection{IDs: r.live, Where: where})
		if err != nil {
			return fail(err)
		}
		n -= len(sent)
	}
	return &protocol.Reply{Applied: applied, Rows: uint64(n)}
}
