package cluster

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Limits bound what the requests sent to a node (searches, lookups, the
// waits of writes) can make it hold: how long one may wait, how large one
// may be, how many may be in flight at once and the bytes they may take,
// and the hits one reply may carry. A request over a limit is answered at
// once with an error naming the limit (the client counts it a failed
// attempt: it asks another replica, or again, until its deadline) and
// counted in the node's Stats. Zero fields take the defaults below;
// docs/cluster.md ("Bounds on a node") gives the memory they bound a node
// to (MemoryBound).
type Limits struct {
	// MaxWait is the longest a request may wait for its replica to apply
	// the caller's writes (the request's own wait is clamped to it).
	// Clients ask 500 ms (searches) and 1 s (writes waiting for their
	// outcome). Default 2 s.
	MaxWait time.Duration
	// MaxRequestBytes is the largest request a node takes. A client cuts
	// its requests under the NATS max payload, so this should be at least
	// the server's max_payload (the embedded server's is 8 MiB). Default
	// 8 MiB.
	MaxRequestBytes int
	// MaxInFlight is how many requests a node handles at once, over every
	// shard it holds. Default 64.
	MaxInFlight int
	// MaxInFlightBytes is what the requests in flight may take together:
	// each is charged twice its size (the message and what is decoded
	// from it) and hitBytes for every hit its answer may hold, when it is
	// admitted, then its answer's exact size (hits, keys, payloads, the
	// encoded reply) before the reply is made. Default 128 MiB.
	MaxInFlightBytes int64
	// MaxHits is the most hits one request's answer may hold: k × queries
	// for a search, MaxHits × queries (or every row within the threshold,
	// when the search gives no MaxHits) for a range search. Default
	// 262,144.
	MaxHits int
	// PendingMsgs and PendingBytes bound what NATS buffers for each shard
	// subscription of the node before its callback admits or refuses a
	// request (past them NATS drops requests, which their clients see as
	// silence and ask again). Defaults 4096 messages and 32 MiB.
	PendingMsgs  int
	PendingBytes int
}

// The default limits.
const (
	DefaultMaxWait          = 2 * time.Second
	DefaultMaxRequestBytes  = 8 << 20
	DefaultMaxInFlight      = 64
	DefaultMaxInFlightBytes = 128 << 20
	DefaultMaxHits          = 1 << 18
	DefaultPendingMsgs      = 4096
	DefaultPendingBytes     = 32 << 20
)

// hitBytes is what one hit costs a node while a request is answered: the
// engine's selection (16 bytes), its Hit (48) and the reply's hit (48),
// rounded up. Keys and payloads are charged by their length on top.
const hitBytes = 128

// runtimeHeadroom is the Go runtime's own share beyond twice the live
// heap (stacks, the collector's metadata, memory not yet returned),
// counted in MemoryBound.
const runtimeHeadroom = 64 << 20

// WithDefaults returns l with its zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if l.MaxWait == 0 {
		l.MaxWait = DefaultMaxWait
	}
	set(&l.MaxRequestBytes, DefaultMaxRequestBytes)
	set(&l.MaxInFlight, DefaultMaxInFlight)
	if l.MaxInFlightBytes == 0 {
		l.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	set(&l.MaxHits, DefaultMaxHits)
	set(&l.PendingMsgs, DefaultPendingMsgs)
	set(&l.PendingBytes, DefaultPendingBytes)
	return l
}

// check refuses limits that cannot work, naming the field.
func (l Limits) check() error {
	var errs []error
	bad := func(field string, v any, want string) {
		errs = append(errs, fmt.Errorf("node limits: %s %v: %s", field, v, want))
	}
	if l.MaxWait < 0 {
		bad("MaxWait", l.MaxWait, "a duration, 0 for the default")
	}
	if l.MaxRequestBytes < 0 {
		bad("MaxRequestBytes", l.MaxRequestBytes, "a size in bytes, 0 for the default")
	}
	if l.MaxInFlight < 0 {
		bad("MaxInFlight", l.MaxInFlight, "a count, 0 for the default")
	}
	if l.MaxInFlightBytes < 0 {
		bad("MaxInFlightBytes", l.MaxInFlightBytes, "a size in bytes, 0 for the default")
	}
	if l.MaxHits < 0 {
		bad("MaxHits", l.MaxHits, "a count, 0 for the default")
	}
	if l.PendingMsgs < 0 {
		bad("PendingMsgs", l.PendingMsgs, "a count, 0 for the default")
	}
	if l.PendingBytes < 0 {
		bad("PendingBytes", l.PendingBytes, "a size in bytes, 0 for the default")
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	d := l.WithDefaults()
	if int64(d.MaxRequestBytes)*2 > d.MaxInFlightBytes {
		return fmt.Errorf("node limits: MaxInFlightBytes %d is under twice MaxRequestBytes %d: the largest request could never be admitted", d.MaxInFlightBytes, d.MaxRequestBytes)
	}
	return nil
}

// MemoryBound is the most memory, in bytes, that handling requests adds to
// a node answering shards shard subscriptions, beyond what it holds at
// rest (its stores): NATS's buffers (PendingBytes a subscription), the
// requests in flight (MaxInFlightBytes), the message being read and the
// one being refused (MaxRequestBytes each), doubled because Go's collector
// lets the heap grow to twice what is live before it collects (GOGC=100),
// plus the runtime's own headroom (64 MiB). It takes MaxRequestBytes to be
// at least the NATS max_payload (no message is larger). The one thing
// outside it: a
// range search gathers every row within its threshold (16 bytes each)
// before MaxHits keeps the best; at most 16 bytes × the shard's rows per
// range search in flight (docs/cluster.md).
func (l Limits) MemoryBound(shards int) int64 {
	d := l.WithDefaults()
	live := int64(max(shards, 1))*int64(d.PendingBytes) + d.MaxInFlightBytes + 2*int64(d.MaxRequestBytes)
	return 2*live + runtimeHeadroom
}

// Reasons a node refuses a request (NodeStats.Refused).
const (
	refuseInFlight      = iota // MaxInFlight requests already in flight
	refuseInFlightBytes        // MaxInFlightBytes already taken
	refuseRequestBytes         // the request is over MaxRequestBytes
	refuseHits                 // its answer would hold over MaxHits hits
	refuseReplyBytes           // its answer would take the bytes in flight over MaxInFlightBytes
	refuseClosing              // the node or the replica is closing
	refuseMalformed            // the request cannot be read
	refuseReasons
)

// budget counts the requests a node has in flight and the bytes they take.
type budget struct {
	l     Limits
	mu    sync.Mutex
	n     int
	bytes int64
}

// admit takes one request of cost bytes, or says why not (the message for
// the client, and the reason).
func (b *budget) admit(cost int64) (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n >= b.l.MaxInFlight {
		return fmt.Sprintf("node busy: %d requests in flight (limit %d, Limits.MaxInFlight)", b.n, b.l.MaxInFlight), refuseInFlight
	}
	if cost > b.l.MaxInFlightBytes {
		return fmt.Sprintf("request too large: it needs %d bytes to answer, over the node's limit of %d bytes in flight (Limits.MaxInFlightBytes)", cost, b.l.MaxInFlightBytes), refuseInFlightBytes
	}
	if b.bytes+cost > b.l.MaxInFlightBytes {
		return fmt.Sprintf("node busy: %d bytes in flight and %d for this request, over the limit of %d (Limits.MaxInFlightBytes)", b.bytes, cost, b.l.MaxInFlightBytes), refuseInFlightBytes
	}
	b.n++
	b.bytes += cost
	return "", 0
}

// grow changes an admitted request's charge by delta bytes (negative:
// gives bytes back), or says why it cannot: the answer would take the
// bytes in flight over the limit.
func (b *budget) grow(delta int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if delta > 0 && b.bytes+delta > b.l.MaxInFlightBytes {
		return fmt.Errorf("node busy: the answer needs %d bytes more, with %d in flight over the limit of %d (Limits.MaxInFlightBytes)", delta, b.bytes, b.l.MaxInFlightBytes)
	}
	b.bytes += delta
	return nil
}

// done gives an admitted request's charge back.
func (b *budget) done(cost int64) {
	b.mu.Lock()
	b.n--
	b.bytes -= cost
	b.mu.Unlock()
}

func (b *budget) load() (int, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n, b.bytes
}

// shape is what a node reads of a request before admitting it: its kind,
// wait and how many hits its answer may hold, from the fixed fields alone
// (nothing is decoded or copied). The layout is request's (wire.go).
type shape struct {
	kind    byte
	waitMs  uint32
	nq      int
	k       int
	maxHits int
	keys    int // kind lookup, get: the keys or IDs it names
	where   int // the where filter's bytes
	// hits is what admission charges: the most hits the answer holds
	// (search: queries × (k + sentinelMargin); range: the same with
	// MaxHits, or at most rangeGuess a query without it, the answer's
	// exact size being charged once known; lookup: its keys).
	hits int64
}

// rangeGuess is the hits a query of a range search without MaxHits is
// charged when admitted; its answer's exact size is charged before its
// reply is made.
const rangeGuess = 1024

// peekRequest reads a request's fixed fields, once its frame's checksum
// holds (so a damaged request is refused as damaged, not for what its
// damaged counts would cost; the CRC runs at ~15 GB/s, a fraction of a
// millisecond for the largest request). It checks no more than it needs:
// decodeRequest, in the request's goroutine, refuses the rest.
func peekRequest(b []byte) (shape, error) {
	body, err := openFrame(b)
	if err != nil {
		return shape{}, err
	}
	r := &reader{b: body}
	s := shape{kind: r.u8()}
	r.u64() // minSeq
	s.waitMs = r.u32()
	switch s.kind {
	case kindSearch, kindRange:
		s.k = int(r.u32())
		r.u32() // threshold
		s.maxHits = int(r.u32())
		if n := r.u32(); n != noFilter && r.err == nil {
			if uint64(n) > uint64(len(r.b))/8 {
				r.err = fmt.Errorf("%w: an allow list of %d IDs in %d bytes", errWire, n, len(r.b))
			}
			r.take(8 * int(n))
		}
		s.nq = int(r.u32())
		dim := int(r.u32())
		if r.err == nil && (dim <= 0 || s.nq > len(r.b)/4/dim) {
			r.err = fmt.Errorf("%w: %d queries of dimension %d in %d bytes", errWire, s.nq, dim, len(r.b))
		}
		r.take(4 * s.nq * dim)
		if n := r.u32(); n != noFilter {
			s.where = int(n)
		}
		nq := int64(s.nq)
		switch {
		case s.kind == kindSearch:
			s.hits = nq * (int64(s.k) + sentinelMargin)
		case s.maxHits > 0:
			s.hits = nq * (int64(s.maxHits) + sentinelMargin)
		default:
			s.hits = nq * (rangeGuess + sentinelMargin)
		}
	case kindLookup:
		s.keys = int(r.u32())
		s.hits = int64(s.keys)
	case kindGet:
		r.u64() // from
		s.k = int(r.u32())
		r.u8() // include
		if n := r.u32(); n != noFilter && r.err == nil {
			if uint64(n) > uint64(len(r.b))/8 {
				r.err = fmt.Errorf("%w: %d IDs in %d bytes", errWire, n, len(r.b))
			}
			r.take(8 * int(n))
			s.keys = int(n)
		}
		if n := r.u32(); n != noFilter && r.err == nil {
			s.keys = int(n)
			if uint64(n) > uint64(len(r.b))/4 {
				r.err = fmt.Errorf("%w: %d keys in %d bytes", errWire, n, len(r.b))
			}
			for range n {
				if r.take(int(r.u32())); r.err != nil {
					break
				}
			}
		}
		if n := r.u32(); n != noFilter {
			s.where = int(n)
		}
		s.hits = int64(max(s.k, s.keys))
	case kindCount:
		if n := r.u32(); n != noFilter {
			s.where = int(n)
		}
	}
	return s, r.err
}

// check refuses a request whose answer may hold more than MaxHits hits. A
// get is not refused: its replica answers at most MaxHits rows, and says
// it cut the answer short (the client asks again from the last row).
func (s shape) check(l Limits) string {
	var asked int64
	what := ""
	switch {
	case s.kind == kindSearch:
		asked, what = int64(s.nq)*int64(s.k), fmt.Sprintf("%d queries × k %d", s.nq, s.k)
	case s.kind == kindRange && s.maxHits > 0:
		asked, what = int64(s.nq)*int64(s.maxHits), fmt.Sprintf("%d queries × MaxHits %d", s.nq, s.maxHits)
	case s.kind == kindLookup:
		asked, what = int64(s.keys), fmt.Sprintf("%d keys", s.keys)
	}
	if asked > int64(l.MaxHits) {
		return fmt.Sprintf("request too large: %s asks %d hits, over the node's limit of %d (Limits.MaxHits)", what, asked, l.MaxHits)
	}
	return ""
}

// whereBytes is what a where filter is charged a byte: reading it on the
// node (localFilter, then meta.ParseWhere) allocated 70× (a 1 MiB $or or
// $in) to 101× (nested $and, $or, $not) its size.
const whereBytes = 128

// cost is what admission charges a request of size bytes.
func (s shape) cost(size int) int64 {
	h := s.hits
	if h < 0 || h > math.MaxInt64/hitBytes/2 {
		h = math.MaxInt64 / hitBytes / 2
	}
	return 2*int64(size) + h*hitBytes + int64(s.where)*whereBytes
}

// answerBytes is what an answer costs the node once made: its hits (and
// their keys and payloads, held and then copied into the reply) and the
// encoded reply (an upper bound of reply.encode's length).
func answerBytes(p *reply) int64 {
	n := int64(64 + len(p.msg))
	for _, hs := range p.hits {
		n += 4
		for _, h := range hs {
			n += hitBytes + 2*int64(len(h.Key)+len(h.Payload)) + 24
		}
	}
	for _, o := range p.outcomes {
		n += 16 + int64(len(o.msg)) + 8*int64(len(o.ids))
	}
	for _, rec := range p.recs {
		n += recordBytes(rec)
	}
	return n
}

// recordBytes is what one row of a get's answer costs the node: the row
// as read from the index and its copy in the reply.
func recordBytes(rec record) int64 {
	return hitBytes + 2*int64(len(rec.key)+4*len(rec.vec)+len(rec.meta)+len(rec.payload))
}
