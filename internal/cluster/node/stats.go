package node

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// counters are a node's request counts.
type counters struct {
	answered, behind, failed, clamped atomic.Uint64
	refused                           [refuseReasons]atomic.Uint64
	dropped                           atomic.Uint64 // of subscriptions no longer held
}

// count records how a request was answered.
func (c *counters) count(p *protocol.Reply, t *ticket) {
	switch {
	case t != nil && t.refused >= 0:
		c.refused[t.refused].Add(1)
	case p.Status == protocol.StatusOK:
		c.answered.Add(1)
	case p.Status == protocol.StatusBehind:
		c.behind.Add(1)
	default:
		c.failed.Add(1)
	}
}

// keepDropped adds what NATS dropped from a subscription about to go.
func (c *counters) keepDropped(sub *nats.Subscription) {
	if d, err := sub.Dropped(); err == nil && d > 0 {
		c.dropped.Add(uint64(d))
	}
}

// ticket is one admitted request's charge against the node's budget.
type ticket struct {
	b       *budget
	base    int64 // what the request itself takes (twice its size)
	charged int64
	refused int // a refuse reason when its answer did not fit, else -1
}

// set charges the request total bytes in all; refused when that would
// take the bytes in flight over the limit.
func (t *ticket) set(total int64) error {
	if t == nil {
		return nil
	}
	if err := t.b.grow(total - t.charged); err != nil {
		t.refused = refuseReplyBytes
		return err
	}
	t.charged = total
	return nil
}

// setAnswer charges the request what it takes with its answer p made.
func (t *ticket) setAnswer(p *protocol.Reply) error {
	if t == nil {
		return nil
	}
	return t.set(t.base + answerBytes(p))
}

// add charges the request n bytes more.
func (t *ticket) add(n int64) error {
	if t == nil {
		return nil
	}
	return t.set(t.charged + n)
}

func (t *ticket) release() {
	if t != nil {
		t.b.done(t.charged)
	}
}

// admit admits a request to replica r, or answers it at once with the
// limit it meets (or drops it, when it has no reply subject) and returns
// nil. It reads only the request's fixed fields.
func (n *Node) admit(m *nats.Msg, r *replica) *ticket {
	if m.Reply == "" {
		return nil // nobody to answer
	}
	size := len(m.Data)
	if size > n.limits.MaxRequestBytes {
		n.refuse(m, r, fmt.Sprintf("request too large: %d bytes, over the node's limit of %d (Limits.MaxRequestBytes)", size, n.limits.MaxRequestBytes), refuseRequestBytes)
		return nil
	}
	s, err := protocol.Peek(m.Data)
	if err != nil {
		n.counts.failed.Add(1)
		n.reply(m, &protocol.Reply{Status: protocol.StatusError, Applied: r.applied.Load(), Msg: "request refused: " + err.Error()}, protocol.KindSearch)
		return nil
	}
	if msg := checkShape(s, n.limits); msg != "" {
		n.refuse(m, r, msg, refuseHits)
		return nil
	}
	if s.Kind == protocol.KindGet {
		s.Hits = min(s.Hits, int64(n.limits.MaxHits)) // its answer is cut there
	}
	cost := costOf(s, size)
	if msg, reason := n.budget.admit(cost); msg != "" {
		n.refuse(m, r, msg, reason)
		return nil
	}
	return &ticket{b: n.budget, base: 2 * int64(size), charged: cost, refused: -1}
}

// refuse answers a request with the limit it met, and counts it.
func (n *Node) refuse(m *nats.Msg, r *replica, msg string, reason int) {
	n.counts.refused[reason].Add(1)
	n.reply(m, &protocol.Reply{Status: protocol.StatusError, Applied: r.applied.Load(), Msg: msg}, protocol.KindSearch)
}

// Stats returns the node's request counts and limits.
func (n *Node) Stats() protocol.NodeStats {
	s := protocol.NodeStats{Node: n.id, Limits: n.limits, Answered: n.counts.answered.Load(), Behind: n.counts.behind.Load(),
		Failed: n.counts.failed.Load(), ClampedWaits: n.counts.clamped.Load(), Dropped: n.counts.dropped.Load()}
	s.Host, _ = os.Hostname()
	s.InFlight, s.InFlightBytes = n.budget.load()
	rf := &n.counts.refused
	s.Refused = protocol.RefusedStats{InFlight: rf[refuseInFlight].Load(), InFlightBytes: rf[refuseInFlightBytes].Load(),
		RequestBytes: rf[refuseRequestBytes].Load(), Hits: rf[refuseHits].Load(), ReplyBytes: rf[refuseReplyBytes].Load(),
		Closing: rf[refuseClosing].Load()}
	n.mu.Lock()
	for _, reps := range n.replicas {
		for _, r := range reps {
			if r != nil && r.sub != nil {
				s.Shards++
				if d, err := r.sub.Dropped(); err == nil && d > 0 {
					s.Dropped += uint64(d)
				}
			}
		}
	}
	n.mu.Unlock()
	s.MemoryBound = n.limits.MemoryBound(s.Shards)
	return s
}

// startStats names the node and answers the stats requests to it.
func (n *Node) startStats() error {
	n.id = n.cfg.ID
	if n.id == "" {
		if id, err := nodeID(n.cfg.Dir); err == nil {
			n.id = id
		}
	}
	sub, err := n.c.NC.Subscribe(protocol.StatsSubject, func(m *nats.Msg) {
		// The request is an empty frame; anything else is not umbra's.
		if body, err := protocol.OpenFrame(m.Data); m.Reply != "" && err == nil && len(body) == 0 {
			_ = n.c.NC.Publish(m.Reply, protocol.EncodeStats(n.Stats()))
		}
	})
	if err != nil {
		return fmt.Errorf("node: answering %s: %w", protocol.StatsSubject, err)
	}
	// A stats request has an empty body: what NATS buffers for them is small
	// (within the runtime headroom of MemoryBound).
	if err := sub.SetPendingLimits(64, 1<<20); err != nil {
		_ = sub.Unsubscribe()
		return err
	}
	n.statsSub = sub
	return nil
}

func (n *Node) stopStats() {
	if n.statsSub != nil {
		_ = n.statsSub.Unsubscribe()
	}
}

// maxHits is the node's MaxHits (0, no limit, without a ticket).
func (t *ticket) maxHits() int {
	if t == nil {
		return 0
	}
	return t.b.l.MaxHits
}
