package protocol

import (
	"errors"
	"fmt"
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

// Check refuses limits that cannot work, naming the field.
func (l Limits) Check() error {
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

// shape is what a node reads of a request before admitting it: its kind,
// wait and how many hits its answer may hold, from the fixed fields alone
// (nothing is decoded or copied). The layout is request's (wire.go).
type Shape struct {
	Kind    byte
	WaitMs  uint32
	NQ      int
	K       int
	MaxHits int
	Keys    int // kind lookup, get: the keys or IDs it names
	Where   int // the where filter's bytes
	// hits is what admission charges: the most hits the answer holds
	// (search: queries × (k + sentinelMargin); range: the same with
	// MaxHits, or at most rangeGuess a query without it, the answer's
	// exact size being charged once known; lookup: its keys).
	Hits int64
}

// rangeGuess is the hits a query of a range search without MaxHits is
// charged when admitted; its answer's exact size is charged before its
// reply is made.
const RangeGuess = 1024

// peekRequest reads a request's fixed fields, once its frame's checksum
// holds (so a damaged request is refused as damaged, not for what its
// damaged counts would cost; the CRC runs at ~15 GB/s, a fraction of a
// millisecond for the largest request). It checks no more than it needs:
// decodeRequest, in the request's goroutine, refuses the rest.
func Peek(b []byte) (Shape, error) {
	body, err := OpenFrame(b)
	if err != nil {
		return Shape{}, err
	}
	r := &reader{b: body}
	s := Shape{Kind: r.u8()}
	r.u64() // minSeq
	s.WaitMs = r.u32()
	switch s.Kind {
	case KindSearch, KindRange:
		s.K = int(r.u32())
		r.u32() // threshold
		s.MaxHits = int(r.u32())
		if n := r.u32(); n != NoFilter && r.err == nil {
			if uint64(n) > uint64(len(r.b))/8 {
				r.err = fmt.Errorf("%w: an allow list of %d IDs in %d bytes", ErrWire, n, len(r.b))
			}
			r.take(8 * int(n))
		}
		s.NQ = int(r.u32())
		dim := int(r.u32())
		if r.err == nil && (dim <= 0 || s.NQ > len(r.b)/4/dim) {
			r.err = fmt.Errorf("%w: %d queries of dimension %d in %d bytes", ErrWire, s.NQ, dim, len(r.b))
		}
		r.take(4 * s.NQ * dim)
		if n := r.u32(); n != NoFilter {
			s.Where = int(n)
		}
		nq := int64(s.NQ)
		switch {
		case s.Kind == KindSearch:
			s.Hits = nq * (int64(s.K) + SentinelMargin)
		case s.MaxHits > 0:
			s.Hits = nq * (int64(s.MaxHits) + SentinelMargin)
		default:
			s.Hits = nq * (RangeGuess + SentinelMargin)
		}
	case KindLookup:
		s.Keys = int(r.u32())
		s.Hits = int64(s.Keys)
	case KindGet:
		r.u64() // from
		s.K = int(r.u32())
		r.u8() // include
		if n := r.u32(); n != NoFilter && r.err == nil {
			if uint64(n) > uint64(len(r.b))/8 {
				r.err = fmt.Errorf("%w: %d IDs in %d bytes", ErrWire, n, len(r.b))
			}
			r.take(8 * int(n))
			s.Keys = int(n)
		}
		if n := r.u32(); n != NoFilter && r.err == nil {
			s.Keys = int(n)
			if uint64(n) > uint64(len(r.b))/4 {
				r.err = fmt.Errorf("%w: %d keys in %d bytes", ErrWire, n, len(r.b))
			}
			for range n {
				if r.take(int(r.u32())); r.err != nil {
					break
				}
			}
		}
		if n := r.u32(); n != NoFilter {
			s.Where = int(n)
		}
		s.Hits = int64(max(s.K, s.Keys))
	case KindCount:
		if n := r.u32(); n != NoFilter {
			s.Where = int(n)
		}
	}
	return s, r.err
}
