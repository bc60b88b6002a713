package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// statsSubject is where every node answers for its counters and limits
// (no queue group: each node answers).
const statsSubject = "umbra.stats"

// NodeStats is what a node says of the requests it handled since it
// started, and the limits it handles them under.
type NodeStats struct {
	// Node is the node's ID (NodeConfig.ID, or the one kept in its
	// directory), Host the machine's name.
	Node string `json:"node"`
	Host string `json:"host"`
	// Limits are the node's, defaults filled in; MemoryBound is what
	// they bound request handling to for the shards it answers
	// (Limits.MemoryBound).
	Limits      Limits `json:"limits"`
	MemoryBound int64  `json:"memory_bound"`
	// Shards is how many shard replicas the node answers requests for.
	Shards int `json:"shards"`
	// InFlight and InFlightBytes are the requests being handled now and
	// the bytes they are charged.
	InFlight      int   `json:"in_flight"`
	InFlightBytes int64 `json:"in_flight_bytes"`
	// Answered, Behind and Failed count the requests answered: with an
	// answer, as behind the caller's writes after the wait, and with an
	// error other than a refusal (a shard stopped at a message, a failed
	// search, a request that cannot be read).
	Answered uint64 `json:"answered"`
	Behind   uint64 `json:"behind"`
	Failed   uint64 `json:"failed"`
	// Refused counts the requests refused, by reason.
	Refused RefusedStats `json:"refused"`
	// ClampedWaits counts requests that asked a wait over MaxWait (they
	// waited MaxWait).
	ClampedWaits uint64 `json:"clamped_waits"`
	// Dropped counts requests NATS dropped from a full subscription
	// buffer (PendingMsgs, PendingBytes) before the node saw them.
	Dropped uint64 `json:"dropped"`
}

// RefusedStats counts refused requests by the limit they met.
type RefusedStats struct {
	InFlight      uint64 `json:"in_flight"`       // MaxInFlight requests were in flight
	InFlightBytes uint64 `json:"in_flight_bytes"` // MaxInFlightBytes were taken, or the request alone needs more
	RequestBytes  uint64 `json:"request_bytes"`   // the request was over MaxRequestBytes
	Hits          uint64 `json:"hits"`            // its answer would hold over MaxHits hits
	ReplyBytes    uint64 `json:"reply_bytes"`     // its answer, once made, did not fit MaxInFlightBytes
	Closing       uint64 `json:"closing"`         // the node or the replica was closing
}

// Total is every refusal.
func (r RefusedStats) Total() uint64 {
	return r.InFlight + r.InFlightBytes + r.RequestBytes + r.Hits + r.ReplyBytes + r.Closing
}

// counters are a node's request counts.
type counters struct {
	answered, behind, failed, clamped atomic.Uint64
	refused                           [refuseReasons]atomic.Uint64
	dropped                           atomic.Uint64 // of subscriptions no longer held
}

// count records how a request was answered.
func (c *counters) count(p *reply, t *ticket) {
	switch {
	case t != nil && t.refused >= 0:
		c.refused[t.refused].Add(1)
	case p.status == statusOK:
		c.answered.Add(1)
	case p.status == statusBehind:
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
func (t *ticket) setAnswer(p *reply) error {
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
	s, err := peekRequest(m.Data)
	if err != nil {
		n.counts.failed.Add(1)
		n.reply(m, &reply{status: statusError, applied: r.applied.Load(), msg: "request refused: " + err.Error()}, kindSearch)
		return nil
	}
	if msg := s.check(n.limits); msg != "" {
		n.refuse(m, r, msg, refuseHits)
		return nil
	}
	if s.kind == kindGet {
		s.hits = min(s.hits, int64(n.limits.MaxHits)) // its answer is cut there
	}
	cost := s.cost(size)
	if msg, reason := n.budget.admit(cost); msg != "" {
		n.refuse(m, r, msg, reason)
		return nil
	}
	return &ticket{b: n.budget, base: 2 * int64(size), charged: cost, refused: -1}
}

// refuse answers a request with the limit it met, and counts it.
func (n *Node) refuse(m *nats.Msg, r *replica, msg string, reason int) {
	n.counts.refused[reason].Add(1)
	n.reply(m, &reply{status: statusError, applied: r.applied.Load(), msg: msg}, kindSearch)
}

// Stats returns the node's request counts and limits.
func (n *Node) Stats() NodeStats {
	s := NodeStats{Node: n.id, Limits: n.limits, Answered: n.counts.answered.Load(), Behind: n.counts.behind.Load(),
		Failed: n.counts.failed.Load(), ClampedWaits: n.counts.clamped.Load(), Dropped: n.counts.dropped.Load()}
	s.Host, _ = os.Hostname()
	s.InFlight, s.InFlightBytes = n.budget.load()
	rf := &n.counts.refused
	s.Refused = RefusedStats{InFlight: rf[refuseInFlight].Load(), InFlightBytes: rf[refuseInFlightBytes].Load(),
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
	sub, err := n.c.nc.Subscribe(statsSubject, func(m *nats.Msg) {
		// The request is an empty frame; anything else is not umbra's.
		if body, err := openFrame(m.Data); m.Reply != "" && err == nil && len(body) == 0 {
			_ = n.c.nc.Publish(m.Reply, encodeStats(n.Stats()))
		}
	})
	if err != nil {
		return fmt.Errorf("node: answering %s: %w", statsSubject, err)
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

// encodeStats and decodeStats are a stats reply on the wire: JSON.
// encodeStats frames a node's stats (JSON) like every other cluster
// message: format version and CRC-32C (wire.go).
func encodeStats(s NodeStats) []byte { return frameJSON(s) }

func decodeStats(b []byte) (NodeStats, error) {
	var s NodeStats
	if err := openJSON(b, &s); err != nil {
		return s, fmt.Errorf("a node's stats: %w", err)
	}
	return s, nil
}

// NodeStats asks every node of the cluster for its stats and returns the
// answers that came within wait (nodes by ID). A node that does not
// answer in time is missing from the list; nodes that answer something
// this build cannot read are named in the error, beside the others'
// stats.
func (c *Client) NodeStats(ctx context.Context, wait time.Duration) ([]NodeStats, error) {
	inbox := c.nc.NewRespInbox()
	ch := make(chan *nats.Msg, 256)
	sub, err := c.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := c.nc.PublishRequest(statsSubject, inbox, sealFrame(newFrame(0))); err != nil {
		return nil, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var out []NodeStats
	var bad []string
	for {
		select {
		case m := <-ch:
			if m.Header.Get("Status") != "" {
				continue // no responders: no node runs
			}
			s, err := decodeStats(m.Data)
			if err != nil {
				bad = append(bad, err.Error())
				continue
			}
			out = append(out, s)
			continue
		case <-timer.C:
		case <-ctx.Done():
		}
		break
	}
	slices.SortFunc(out, func(a, b NodeStats) int { return strings.Compare(a.Node, b.Node) })
	if len(bad) > 0 {
		return out, fmt.Errorf("%d nodes answered stats this build cannot read: %s", len(bad), strings.Join(bad, "; "))
	}
	return out, ctx.Err()
}

// maxHits is the node's MaxHits (0, no limit, without a ticket).
func (t *ticket) maxHits() int {
	if t == nil {
		return 0
	}
	return t.b.l.MaxHits
}
