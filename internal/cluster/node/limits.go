package node

import (
	"fmt"
	"math"
	"sync"

	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// hitBytes is what one hit costs a node while a request is answered: the
// engine's selection (16 bytes), its Hit (48) and the reply's hit (48),
// rounded up. Keys and payloads are charged by their length on top.
const hitBytes = 128

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
	l     protocol.Limits
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

// check refuses a request whose answer may hold more than MaxHits hits. A
// get is not refused: its replica answers at most MaxHits rows, and says
// it cut the answer short (the client asks again from the last row).
func checkShape(s protocol.Shape, l protocol.Limits) string {
	var asked int64
	what := ""
	switch {
	case s.Kind == protocol.KindSearch:
		asked, what = int64(s.NQ)*int64(s.K), fmt.Sprintf("%d queries × k %d", s.NQ, s.K)
	case s.Kind == protocol.KindRange && s.MaxHits > 0:
		asked, what = int64(s.NQ)*int64(s.MaxHits), fmt.Sprintf("%d queries × MaxHits %d", s.NQ, s.MaxHits)
	case s.Kind == protocol.KindLookup:
		asked, what = int64(s.Keys), fmt.Sprintf("%d keys", s.Keys)
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
func costOf(s protocol.Shape, size int) int64 {
	h := s.Hits
	if h < 0 || h > math.MaxInt64/hitBytes/2 {
		h = math.MaxInt64 / hitBytes / 2
	}
	return 2*int64(size) + h*hitBytes + int64(s.Where)*whereBytes
}

// answerBytes is what an answer costs the node once made: its hits (and
// their keys and payloads, held and then copied into the reply) and the
// encoded reply (an upper bound of reply.encode's length).
func answerBytes(p *protocol.Reply) int64 {
	n := int64(64 + len(p.Msg))
	for _, hs := range p.Hits {
		n += 4
		for _, h := range hs {
			n += hitBytes + 2*int64(len(h.Key)+len(h.Payload)) + 24
		}
	}
	for _, o := range p.Outcomes {
		n += 16 + int64(len(o.Msg)) + 8*int64(len(o.IDs))
	}
	for _, rec := range p.Recs {
		n += recordBytes(rec)
	}
	return n
}

// recordBytes is what one row of a get's answer costs the node: the row
// as read from the index and its copy in the reply.
func recordBytes(rec protocol.Row) int64 {
	return hitBytes + 2*int64(len(rec.Key)+4*len(rec.Vector)+len(rec.Meta)+len(rec.Payload))
}
