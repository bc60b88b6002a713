package protocol

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// statsSubject is where every node answers for its counters and limits
// (no queue group: each node answers).
const StatsSubject = "umbra.stats"

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

// encodeStats and decodeStats are a stats reply on the wire: JSON.
// encodeStats frames a node's stats (JSON) like every other cluster
// message: format version and CRC-32C (wire.go).
func EncodeStats(s NodeStats) []byte { return FrameJSON(s) }

func DecodeStats(b []byte) (NodeStats, error) {
	var s NodeStats
	if err := OpenJSON(b, &s); err != nil {
		return s, fmt.Errorf("a node's stats: %w", err)
	}
	return s, nil
}

// FetchStats asks every node of the cluster on nc for its stats and returns the
// answers that came within wait (nodes by ID). A node that does not
// answer in time is missing from the list; nodes that answer something
// this build cannot read are named in the error, beside the others'
// stats.
func FetchStats(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]NodeStats, error) {
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(StatsSubject, inbox, SealFrame(NewFrame(0))); err != nil {
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
			s, err := DecodeStats(m.Data)
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
