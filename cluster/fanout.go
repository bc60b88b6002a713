package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// shardsError is ErrShardsUnavailable with the shards that gave no
// answer and, for each, the last thing heard.
type shardsError struct {
	Collection string
	Shards     []int
	Reasons    []string // one per shard
	// Stopped are the shards (of Shards) whose replica last said it
	// stopped at a message it cannot apply; its reason names the message
	// and the way out.
	Stopped []int
}

func (e *shardsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: collection %q: no answer by the deadline from shard", ErrShardsUnavailable, e.Collection)
	if len(e.Shards) > 1 {
		b.WriteString("s")
	}
	for i, s := range e.Shards {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %d (%s)", s, e.Reasons[i])
	}
	return b.String()
}

func (e *shardsError) Unwrap() []error {
	if len(e.Stopped) > 0 {
		return []error{ErrShardsUnavailable, ErrShardStopped}
	}
	return []error{ErrShardsUnavailable}
}

// shardState is one shard's progress through a fan-out call.
type shardState struct {
	attempt int
	sentAt  time.Time
	retryAt time.Time // zero: waiting for the answer to the current attempt
	pieces  [][]byte
	got     int
	reason  string
	reply   *protocol.Reply
	backoff time.Duration
	stopped bool // the last answer: the replica stopped at a message
}

// fanout sends each shard's request to one replica of that shard (a queue
// group picks which), retries on another when a replica is behind, fails,
// is absent or goes silent, and returns every shard's reply, or an
// ErrShardsUnavailable naming the shards that gave none by the deadline:
// never some of them.
func (c *Client) fanout(ctx context.Context, coll string, kind byte, reqs map[int][]byte) (map[int]*protocol.Reply, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.timeout)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	inbox := c.x.NC.NewRespInbox()
	// A channel subscription hands over the no-responders status as a
	// message (a synchronous one turns it into an error that does not say
	// for which shard).
	ch := make(chan *nats.Msg, 4096)
	sub, err := c.x.NC.ChanSubscribe(inbox+".>", ch)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()

	states := map[int]*shardState{}
	send := func(shard int, st *shardState) {
		st.attempt++
		st.pieces, st.got, st.retryAt = nil, 0, time.Time{}
		st.sentAt = time.Now()
		err := c.x.NC.PublishMsg(&nats.Msg{
			Subject: protocol.QuerySubject(coll, shard),
			Reply:   fmt.Sprintf("%s.%d.%d", inbox, shard, st.attempt),
			Data:    reqs[shard],
		})
		if err != nil {
			st.reason = err.Error()
			st.retryAt = time.Now().Add(100 * time.Millisecond)
		}
	}
	retry := func(st *shardState, reason string, after time.Duration) {
		st.reason, st.stopped = reason, false
		if st.backoff == 0 {
			st.backoff = after
		}
		st.retryAt = time.Now().Add(st.backoff)
		st.backoff = min(2*st.backoff, time.Second)
	}
	for shard := range reqs {
		st := &shardState{reason: "no answer"}
		states[shard] = st
		send(shard, st)
	}
	pending := len(states)
	silence := c.attemptTimeout
	for pending > 0 {
		// The next moment something is due: a retry, or an attempt that
		// has been silent too long (its replica may have died mid-call).
		now := time.Now()
		next := deadline
		for shard, st := range states {
			if st.reply != nil {
				continue
			}
			if !st.retryAt.IsZero() && !now.Before(st.retryAt) || st.retryAt.IsZero() && now.Sub(st.sentAt) >= silence {
				if st.retryAt.IsZero() {
					st.reason = "the replica asked went silent"
				}
				send(shard, st)
			}
			due := st.retryAt
			if due.IsZero() {
				due = st.sentAt.Add(silence)
			}
			if due.Before(next) {
				next = due
			}
		}
		timer := time.NewTimer(time.Until(next))
		var msg *nats.Msg
		select {
		case msg = <-ch:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		if ctx.Err() != nil {
			break
		}
		if msg == nil {
			continue
		}
		// inbox.SHARD.ATTEMPT
		parts := strings.Split(msg.Subject[len(inbox)+1:], ".")
		if len(parts) != 2 {
			continue
		}
		shard, err1 := strconv.Atoi(parts[0])
		attempt, err2 := strconv.Atoi(parts[1])
		st := states[shard]
		if err1 != nil || err2 != nil || st == nil || st.reply != nil || attempt != st.attempt || !st.retryAt.IsZero() {
			continue // an answer to an attempt given up on
		}
		if msg.Header.Get("Status") == "503" {
			retry(st, "no replica serves it", 50*time.Millisecond)
			continue
		}
		var i, n int
		if _, err := fmt.Sscanf(msg.Header.Get(protocol.HdrChunk), "%d/%d", &i, &n); err != nil || n < 1 || i < 0 || i >= n || n > 1<<20 {
			retry(st, "a malformed reply", 50*time.Millisecond)
			continue
		}
		if st.pieces == nil {
			st.pieces = make([][]byte, n)
		}
		if len(st.pieces) != n || st.pieces[i] != nil {
			retry(st, "a malformed reply", 50*time.Millisecond)
			continue
		}
		st.pieces[i] = msg.Data
		st.got++
		if st.got < n {
			st.sentAt = time.Now() // pieces are coming: the replica lives
			continue
		}
		// The checksum covers the reply whole: a piece damaged or out of
		// place fails it, and the attempt counts as failed.
		p, err := protocol.DecodeReply(slices.Concat(st.pieces...), kind)
		switch {
		case err != nil:
			retry(st, "a reply refused: "+err.Error(), 50*time.Millisecond)
		case p.Status == protocol.StatusStopped:
			// Another replica may read the message (a newer build), or an
			// operator may skip it meanwhile: asked again to the deadline.
			retry(st, p.Msg, 100*time.Millisecond)
			st.stopped = true
		case p.Status == protocol.StatusBehind:
			retry(st, fmt.Sprintf("replicas behind the caller's writes (one had applied %d)", p.Applied), 20*time.Millisecond)
		case p.Status == protocol.StatusError:
			retry(st, p.Msg, 100*time.Millisecond)
		default:
			st.reply = p
			pending--
		}
	}
	if pending == 0 {
		out := make(map[int]*protocol.Reply, len(states))
		for shard, st := range states {
			out[shard] = st.reply
		}
		return out, nil
	}
	e := &shardsError{Collection: coll}
	for shard, st := range states {
		if st.reply == nil {
			e.Shards = append(e.Shards, shard)
		}
	}
	slices.Sort(e.Shards)
	for _, s := range e.Shards {
		e.Reasons = append(e.Reasons, states[s].reason)
		if states[s].stopped {
			e.Stopped = append(e.Stopped, s)
		}
	}
	return nil, e
}
