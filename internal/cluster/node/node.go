package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// NodeConfig describes a node: a process holding replicas of shards.
type Config struct {
	// Dir keeps the replicas' stores: Dir/replicas/COLLECTION/shard-N.umbra.
	Dir string
	// Device is what the replicas search on (engine.Config.Device).
	Device engine.Device
	// Serve picks the shards this node holds; nil: every shard of every
	// collection.
	Serve func(collection string, shard int) bool
	// SnapshotEvery, when positive, snapshots each shard this node holds
	// at every multiple of that many messages (see Snapshot); of the
	// nodes holding a shard, the first to claim the round takes it.
	SnapshotEvery int
	// Logf receives what the node does and what goes wrong (nil: nothing).
	Logf func(format string, args ...any)
	// Placement makes the node hold only the shards a controller assigns
	// it (placement.go) rather than every shard; Serve must be nil.
	Placement bool
	// ID names the node under placement (default: kept in Dir/node-id,
	// made on first start).
	ID string
	// Memory is what the node offers under placement, in bytes (default:
	// the machine's memory); shards are spread in proportion to it.
	Memory int64
	// Limits bound what requests can make the node hold (limits.go;
	// zero fields take the defaults).
	Limits protocol.Limits
	// MaxStreamBytes is the largest byte limit of a shard's stream the
	// node gives a collection a client asks it to create (default
	// DefaultMaxStreamBytes).
	MaxStreamBytes int64
}

// Node serves shard replicas: it follows each shard's stream into an
// engine store and answers searches on it.
type Node struct {
	cfg    Config
	c      *protocol.Conn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// gate guards wg against Close: a request goroutine is added only
	// under gate's read lock while stopping is false, and Close sets
	// stopping under the write lock before it waits on wg, so nothing is
	// added to wg once that wait has begun.
	gate     sync.RWMutex
	stopping bool

	mu       sync.Mutex
	replicas map[string][]*replica // collection → shard → replica (nil: not held)
	metas    map[string]*protocol.CollectionRecord
	closed   bool

	place   *placement // nil without NodeConfig.Placement
	leaving atomic.Bool

	limits   protocol.Limits // cfg.Limits with the defaults
	budget   *budget         // the requests in flight
	counts   counters
	id       string             // the node's name in its stats
	statsSub *nats.Subscription // answers umbra.stats
	admin    nodeAdmin          // admin.go
}

// testHooks let tests widen the window between a request's arrival and
// its goroutine (request), see every request goroutine start (serve),
// slow a replica's applying (apply), make the controller's listing of
// the nodes miss one (listNodes), see each snapshot uploaded
// (snapshot), and leave out the frames' checksums (noChecksum, to measure
// what they cost beside the same run with them).
var TestHooks struct {
	Request, Serve atomic.Pointer[func(*Node)]
	Apply          atomic.Pointer[func(*Node)]                 // before each message a replica applies
	ListNodes      atomic.Pointer[func(id string) bool]        // true: the controller's listing of the nodes misses id
	Snapshot       atomic.Pointer[func(shard int, seq uint64)] // a snapshot uploaded, before its manifest is written
}

// StartNode starts a node on c's connection. It picks up every collection
// in the cluster, now and later.
func Start(ctx context.Context, c *protocol.Conn, cfg Config) (*Node, error) {
	if cfg.Dir == "" {
		return nil, errors.New("node: no directory")
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Placement && cfg.Serve != nil {
		return nil, errors.New("node: Placement and Serve exclude each other")
	}
	if err := cfg.Limits.Check(); err != nil {
		return nil, err
	}
	if p := c.NC.Opts.InboxPrefix; p != protocol.NodeInboxPrefix {
		return nil, fmt.Errorf("node: the connection's replies arrive under %q, where clients may read them; connect with cluster.AsNode() (or nats.CustomInboxPrefix(cluster.NodeInboxPrefix))", cmp.Or(p, "_INBOX"))
	}
	nctx, cancel := context.WithCancel(context.Background())
	n := &Node{cfg: cfg, c: c, ctx: nctx, cancel: cancel, replicas: map[string][]*replica{}, metas: map[string]*protocol.CollectionRecord{}}
	n.limits = cfg.Limits.WithDefaults()
	n.budget = &budget{l: n.limits}
	if err := n.startStats(); err != nil {
		cancel()
		return nil, err
	}
	m := c.Mark()
	// The bucket of writes with an idempotency key: made here, since a
	// client's credentials may not make buckets.
	if _, err := c.OpenCalls(ctx); err != nil {
		n.stopStats()
		cancel()
		return nil, fmt.Errorf("node: %w", c.BucketError(err, m))
	}
	w, err := c.Colls.WatchAll(nctx)
	if err != nil {
		n.stopStats()
		cancel()
		return nil, fmt.Errorf("node: watching the collections: %w", c.Explain(err, m))
	}
	// The collections there now are started before StartNode returns.
	for e := range w.Updates() {
		if e == nil {
			break
		}
		if err := n.startCollection(ctx, e); err != nil {
			w.Stop()
			n.Close()
			return nil, err
		}
	}
	if cfg.Placement {
		if err := n.startPlacement(ctx); err != nil {
			w.Stop()
			n.Close()
			return nil, err
		}
	}
	if err := n.startAdmin(); err != nil {
		w.Stop()
		n.Close()
		return nil, err
	}
	n.wg.Go(func() {
		defer w.Stop()
		for {
			select {
			case <-nctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil {
					if err := n.startCollection(nctx, e); err != nil {
						cfg.Logf("collection %s: %v", e.Key(), err)
					}
				}
			}
		}
	})
	return n, nil
}

func (n *Node) startCollection(ctx context.Context, e jetstream.KeyValueEntry) error {
	if e.Operation() != jetstream.KeyValuePut {
		return nil
	}
	meta, err := protocol.UnmarshalRecord(e.Value())
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	if _, ok := n.replicas[meta.Name]; ok {
		return nil
	}
	n.metas[meta.Name] = meta
	reps := make([]*replica, meta.Shards)
	n.replicas[meta.Name] = reps
	if n.cfg.Placement {
		return nil // the shards come as assigned (placement.go)
	}
	for s := range meta.Shards {
		if n.cfg.Serve != nil && !n.cfg.Serve(meta.Name, s) {
			continue
		}
		r, err := n.openShard(ctx, meta, s)
		if err != nil {
			for i, r := range reps {
				if r != nil {
					r.cancel()
					r.close()
					reps[i] = nil
				}
			}
			delete(n.replicas, meta.Name)
			delete(n.metas, meta.Name)
			return fmt.Errorf("shard %d: %w", s, err)
		}
		reps[s] = r
	}
	for _, r := range reps {
		if r == nil {
			continue
		}
		if err := n.startShard(r, meta); err != nil {
			return err
		}
	}
	n.cfg.Logf("collection %s: %d shards, holding %d", meta.Name, meta.Shards, countHeld(reps))
	return nil
}

// openShard opens the node's store of one shard. Called with n.mu held.
func (n *Node) openShard(ctx context.Context, meta *protocol.CollectionRecord, s int) (*replica, error) {
	metric, err := meta.ParseMetric()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(n.cfg.Dir, "replicas", meta.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "shard-"+strconv.Itoa(s)+".umbra")
	r, err := openReplica(ctx, meta.Name, s, path, engine.Config{Dim: meta.Dim, Metric: metric, Device: n.cfg.Device})
	if err != nil {
		return nil, err
	}
	r.ctx, r.cancel = context.WithCancel(n.ctx)
	r.logf = n.cfg.Logf
	n.cfg.Logf("shard %s/%d: store applied through message %d", meta.Name, s, r.applied.Load())
	return r, nil
}

// startShard starts following the shard's stream and, once the replica
// has applied through r.since, answering its searches. Called with n.mu
// held.
func (n *Node) startShard(r *replica, meta *protocol.CollectionRecord) error {
	r.wg.Add(1)
	n.wg.Go(func() {
		defer r.wg.Done()
		n.follow(r, meta)
	})
	return n.answerShard(r)
}

// answerShard subscribes the replica to its shard's searches when it has
// applied through r.since and is not yet subscribed. Called with n.mu
// held.
func (n *Node) answerShard(r *replica) error {
	if r.sub != nil || r.applied.Load() < r.since {
		return nil
	}
	sub, err := n.c.NC.QueueSubscribe(protocol.QuerySubject(r.coll, r.shard), protocol.QueueGroup(r.coll, r.shard), func(m *nats.Msg) {
		if h := TestHooks.Request.Load(); h != nil {
			(*h)(n)
		}
		n.gate.RLock()
		defer n.gate.RUnlock()
		r.stop.RLock()
		defer r.stop.RUnlock()
		if n.stopping || r.stopped {
			// Closing: say so at once, and the client asks another
			// replica (rather than after AttemptTimeout of silence).
			n.refuse(m, r, "the node is closing", refuseClosing)
			return
		}
		// Admitted or refused here, from the request's fixed fields,
		// before a goroutine is made or anything is decoded (limits.go).
		t := n.admit(m, r)
		if t == nil {
			return
		}
		r.wg.Add(1)
		n.wg.Go(func() {
			defer r.wg.Done()
			defer t.release()
			n.serve(r, m, t)
		})
	})
	if err != nil {
		return err
	}
	// NATS's own buffer for the subscription is bounded too: past it,
	// requests are dropped (their clients ask again after silence).
	if err := sub.SetPendingLimits(n.limits.PendingMsgs, n.limits.PendingBytes); err != nil {
		_ = sub.Unsubscribe()
		return err
	}
	r.sub = sub
	return nil
}

// hold makes the node hold shard s of meta, answering its searches once
// it has applied through since.
func (n *Node) hold(ctx context.Context, meta *protocol.CollectionRecord, s int, since uint64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	reps := n.replicas[meta.Name]
	if s >= len(reps) {
		return nil
	}
	r := reps[s]
	if r == nil {
		var err error
		if r, err = n.openShard(ctx, meta, s); err != nil {
			return fmt.Errorf("shard %s/%d: %w", meta.Name, s, err)
		}
		r.since = since
		reps[s] = r
		n.cfg.Logf("shard %s/%d: assigned here (answering from message %d)", meta.Name, s, since)
		return n.startShard(r, meta)
	}
	r.since = min(r.since, since)
	return n.answerShard(r)
}

// drop stops the node holding shard s of coll: its searches go to the
// other replicas (those in flight here are answered first), then its
// stream is no longer followed and its store is closed (kept on disk).
func (n *Node) drop(coll string, s int) {
	n.mu.Lock()
	reps := n.replicas[coll]
	if s >= len(reps) || reps[s] == nil {
		n.mu.Unlock()
		return
	}
	r := reps[s]
	reps[s] = nil
	n.mu.Unlock()
	if r.sub != nil {
		n.counts.keepDropped(r.sub)
		if err := r.sub.Drain(); err == nil {
			for deadline := time.Now().Add(5 * time.Second); r.sub.IsValid() && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	r.stop.Lock()
	r.stopped = true
	r.stop.Unlock()
	r.cancel()
	r.wg.Wait()
	if err := r.close(); err != nil {
		n.cfg.Logf("shard %s/%d: closing: %v", coll, s, err)
	}
	n.cfg.Logf("shard %s/%d: no longer held here", coll, s)
}

func countHeld(reps []*replica) int {
	c := 0
	for _, r := range reps {
		if r != nil {
			c++
		}
	}
	return c
}

// How a replica follows its stream. The node creates and watches the
// consumer itself rather than use jetstream's ordered consumer, whose
// recovery is out of reach: it notices a silent server only after 10 s
// (twice its 5 s heartbeat), then re-creates its consumer inside Next with
// 10 s requests and back-off up to 10 s between them, none of which the
// node can shorten or see. After a server pause (SIGSTOP, a partition) the
// requests sent while it was stopped are lost with its routes, and the
// replica stayed behind for tens of seconds after the server was back
// (TestClusterPartitionedServerConverges). Here a missed heartbeat
// (2 × followHeartbeat) or a gap in the consumer's delivery sequence ends
// the consumer; follow creates a new one from the replica's applied
// sequence, each request bounded by followRequestTimeout and the retries
// by followMaxBackoff.
const (
	followHeartbeat      = time.Second
	followExpiry         = 5 * time.Second // pull request lifetime (≥ 2 heartbeats)
	FollowRequestTimeout = 3 * time.Second // consumer create and delete
	followMaxBackoff     = time.Second
	// followInactive lets the server delete a consumer this node no
	// longer pulls from (one whose delete was lost, or whose creation
	// was answered after the node gave up on it).
	followInactive = time.Minute
)

// errReconnected: the connection was re-established; the replica follows
// again from what it applied.
var errReconnected = errors.New("the connection reconnected")

// errDeliveryGap: the consumer skipped a delivery (lost in transit); the
// replica follows again from what it applied.
var errDeliveryGap = errors.New("a delivery was lost (gap in the consumer sequence)")

// follow applies the shard's stream to the replica, from the message
// after the one its store says it applied, for as long as the node runs.
func (n *Node) follow(r *replica, meta *protocol.CollectionRecord) {
	backoff := 100 * time.Millisecond
	for r.ctx.Err() == nil {
		before := r.applied.Load()
		err := n.followOnce(r, meta)
		if r.ctx.Err() != nil {
			return
		}
		if se := (*stopError)(nil); errors.As(err, &se) {
			n.awaitRepair(r, se) // until a repair record skips it (repair.go)
			backoff = 100 * time.Millisecond
			continue
		}
		if r.applied.Load() != before {
			backoff = 100 * time.Millisecond
		}
		n.cfg.Logf("shard %s/%d: following its stream: %v (again in %v)", meta.Name, r.shard, err, backoff)
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, followMaxBackoff)
	}
}

func (n *Node) followOnce(r *replica, meta *protocol.CollectionRecord) error {
	stream := protocol.StreamName(meta.Name, r.shard)
	if r.applied.Load() == 0 {
		// A replica with nothing applied starts from the newest snapshot
		// where there is one, rather than from the stream's first message
		// kept (which may be a snapshot's worth of messages behind it).
		sctx, cancel := context.WithTimeout(r.ctx, FollowRequestTimeout)
		man, err := n.newestSnapshot(sctx, meta.Name, r.shard)
		cancel()
		if err != nil {
			return err
		}
		if man != nil && man.Seq > 0 {
			return n.recover(r, meta, man.Seq+1)
		}
	}
	// Listening before the consumer exists: a reconnect from here on
	// ends it (see below).
	status := n.c.NC.StatusChanged(nats.CONNECTED)
	defer n.c.NC.RemoveStatusListener(status)
	cctx, cancel := context.WithTimeout(r.ctx, FollowRequestTimeout)
	cons, err := n.c.JS.CreateConsumer(cctx, stream, jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       r.applied.Load() + 1,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: followInactive,
	})
	cancel()
	if err != nil {
		return fmt.Errorf("creating a consumer: %w", err)
	}
	name := cons.CachedInfo().Name
	defer n.wg.Go(func() {
		// Best effort: followInactive removes it otherwise.
		dctx, cancel := context.WithTimeout(n.ctx, FollowRequestTimeout)
		defer cancel()
		_ = n.c.JS.DeleteConsumer(dctx, stream, name)
	})
	it, err := cons.Messages(jetstream.PullMaxMessages(64), jetstream.PullExpiry(followExpiry),
		jetstream.PullHeartbeat(followHeartbeat), jetstream.WithMessagesErrOnMissingHeartbeat(true))
	if err != nil {
		return err
	}
	stop := context.AfterFunc(r.ctx, it.Stop)
	defer stop()
	defer it.Stop()
	// A reconnect loses what was in flight on the old connection, and
	// with AckNone the consumer never sends it again; the iterator would
	// pull on from there, and the loss would show only as a gap when the
	// next write arrives (never, on a quiet stream). So a reconnect ends
	// this consumer too.
	var reconnected atomic.Bool
	watchDone := make(chan struct{})
	defer close(watchDone)
	go func() {
		select {
		case _, ok := <-status:
			if ok {
				reconnected.Store(true)
				it.Stop()
			}
		case <-watchDone:
		}
	}()
	var delivered uint64
	for {
		msg, err := it.Next()
		if err != nil {
			if reconnected.Load() {
				return errReconnected
			}
			return err
		}
		md, err := msg.Metadata()
		if err != nil {
			return err
		}
		if md.Sequence.Consumer != delivered+1 {
			return errDeliveryGap
		}
		delivered++
		seq := md.Sequence.Stream
		if seq <= r.applied.Load() {
			continue
		}
		if want := r.applied.Load() + 1; seq != want {
			// The stream no longer holds the messages this replica
			// needs: they were trimmed below a snapshot.
			return n.recover(r, meta, seq)
		}
		if h := TestHooks.Apply.Load(); h != nil {
			(*h)(n)
		}
		for {
			err := r.apply(r.ctx, seq, msg.Data())
			if err == nil {
				break
			}
			if se := (*stopError)(nil); errors.As(err, &se) || r.ctx.Err() != nil {
				return err
			}
			n.cfg.Logf("shard %s/%d: applying message %d: %v (retrying)", meta.Name, r.shard, seq, err)
			select {
			case <-r.ctx.Done():
				return r.ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		if n.cfg.SnapshotEvery > 0 && seq%uint64(n.cfg.SnapshotEvery) == 0 {
			if err := n.periodicSnapshot(r.ctx, r, meta, seq); err != nil {
				n.cfg.Logf("shard %s/%d: snapshot: %v", meta.Name, r.shard, err)
			}
		}
	}
}

// serve answers one request to a replica, admitted under t, in pieces
// under the max payload.
func (n *Node) serve(r *replica, m *nats.Msg, t *ticket) {
	if h := TestHooks.Serve.Load(); h != nil {
		(*h)(n)
	}
	if m.Reply == "" {
		return
	}
	q, err := protocol.DecodeRequest(m.Data)
	var p *protocol.Reply
	kind := byte(protocol.KindSearch)
	if err != nil {
		p = &protocol.Reply{Status: protocol.StatusError, Applied: r.applied.Load(), Msg: "request refused: " + err.Error()}
	} else {
		kind = q.Kind
		// The caller's wait, clamped to the node's limit.
		wait := time.Duration(q.WaitMs) * time.Millisecond
		if wait > n.limits.MaxWait {
			wait = n.limits.MaxWait
			n.counts.clamped.Add(1)
		}
		wctx, cancel := context.WithTimeout(n.ctx, wait)
		ok := r.waitApplied(wctx, q.MinSeq)
		cancel()
		if !ok {
			// Stopped at a message it cannot apply, it will not catch up
			// until skipped or upgraded, and says so.
			if p = r.stoppedReply(); p == nil {
				p = &protocol.Reply{Status: protocol.StatusBehind, Applied: r.applied.Load()}
			}
		} else {
			p = r.answer(n.ctx, q, t)
		}
	}
	n.counts.count(p, t)
	n.reply(m, p, kind)
}

// reply sends p to m's reply subject in pieces under the max payload.
func (n *Node) reply(m *nats.Msg, p *protocol.Reply, kind byte) {
	if m.Reply == "" {
		return
	}
	pieces := protocol.Chunks(p.Encode(kind), n.c.NC.MaxPayload())
	for i, b := range pieces {
		out := nats.NewMsg(m.Reply)
		out.Header.Set(protocol.HdrChunk, fmt.Sprintf("%d/%d", i, len(pieces)))
		out.Data = b
		if err := n.c.NC.PublishMsg(out); err != nil {
			return
		}
	}
}

// Applied returns how far the node's replica of a shard has applied its
// stream, and whether the node holds it.
func (n *Node) Applied(collection string, shard int) (uint64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	reps := n.replicas[collection]
	if shard < 0 || shard >= len(reps) || reps[shard] == nil {
		return 0, false
	}
	return reps[shard].applied.Load(), true
}

// AppliedAll is Applied for each of a collection's shards (0 where the
// node holds none).
func (n *Node) AppliedAll(collection string, shards int) []uint64 {
	out := make([]uint64, shards)
	for s := range shards {
		out[s], _ = n.Applied(collection, s)
	}
	return out
}

// Close stops the node and closes its stores. What it applied is on disk.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	for _, reps := range n.replicas {
		for _, r := range reps {
			if r != nil && r.sub != nil {
				_ = r.sub.Unsubscribe()
			}
		}
	}
	n.mu.Unlock()
	n.stopStats()
	n.gate.Lock()
	n.stopping = true
	n.gate.Unlock()
	n.cancel()
	n.stopAdmin()
	n.wg.Wait()
	if n.place != nil {
		// After its loop stopped, so that no later put brings it back.
		n.place.unregister()
	}
	var errs []error
	for _, reps := range n.replicas {
		for _, r := range reps {
			if r != nil {
				errs = append(errs, r.close())
			}
		}
	}
	return errors.Join(errs...)
}

// ShardRows returns the rows the node's replica of a collection's shard
// holds, sentinels apart: IDs ascending and vectors (for tests).
func (n *Node) ShardRows(collection string, shard int) ([]uint64, [][]float32, error) {
	n.mu.Lock()
	reps := n.replicas[collection]
	n.mu.Unlock()
	if shard >= len(reps) || reps[shard] == nil {
		return nil, nil, fmt.Errorf("node %s holds no replica of %s/%d", n.id, collection, shard)
	}
	r := reps[shard]
	r.mu.Lock()
	defer r.mu.Unlock()
	recs, err := r.ix.Get(context.Background(), umbra.Selection{Vectors: true})
	if err != nil {
		return nil, nil, err
	}
	var ids []uint64
	var vs [][]float32
	for _, rec := range recs {
		if rec.ID < protocol.ReservedIDs {
			ids, vs = append(ids, rec.ID), append(vs, rec.Vector)
		}
	}
	return ids, vs, nil
}

// Outcome is how the node's replica of a collection's shard applied the
// write message at seq, while it keeps it (for tests).
func (n *Node) Outcome(collection string, shard int, seq uint64) (protocol.Outcome, bool) {
	n.mu.Lock()
	reps := n.replicas[collection]
	n.mu.Unlock()
	if shard >= len(reps) || reps[shard] == nil {
		return protocol.Outcome{}, false
	}
	r := reps[shard]
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.outs[seq]
	return o, ok
}

// Dir is the directory the node keeps its replicas in.
func (n *Node) Dir() string { return n.cfg.Dir }
