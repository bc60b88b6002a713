package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/meta"
)

// What a client may not do itself, a node does for it: a client's
// credentials may neither create streams (it could then make or change
// any stream) nor write the collection records (it could change a
// collection's shards or dimension under its nodes). So Create and a
// write's new metadata fields go as requests to umbra.admin.create and
// umbra.admin.schema, which every node answers (one of them, a queue
// group), checking them as a client would. Where no node answers (none
// runs yet) the client does it itself, which only a connection with the
// rights can (node credentials, or a server without authorization).

// DefaultMaxStreamBytes is the largest byte limit a node gives a shard's
// stream when a client asks it to create a collection (NodeConfig.
// MaxStreamBytes): 64 GiB.
const DefaultMaxStreamBytes = 64 << 30

// adminReply is a node's answer to an admin request.
type adminReply struct {
	Status string          `json:"status"` // ok, exists, invalid, moved, error
	Error  string          `json:"error,omitempty"`
	Record json.RawMessage `json:"record,omitempty"` // the collection's record (create)
}

const (
	adminOK      = "ok"
	adminExists  = "exists"  // ErrCollectionExists
	adminInvalid = "invalid" // a request the node refuses
	adminMoved   = "moved"   // the record's revision moved: read it again
	adminError   = "error"
)

// schemaRequest asks a node to add fields to a collection's record at
// revision Rev.
type schemaRequest struct {
	Name   string            `json:"name"`
	Rev    uint64            `json:"rev"`
	Fields map[string]string `json:"fields"` // field → meta.Kind's name
}

// adminWait is how long a client waits for a node to create a collection
// when its ctx gives no deadline (many shards, R3: each stream an
// election).
const adminWait = 2 * time.Minute

// createThroughNode has a node create the collection meta describes, or,
// where no node answers, creates it itself. It returns the collection's
// record (another's, when the name was taken with the same configuration
// meanwhile).
func (c *Client) createThroughNode(ctx context.Context, meta *collectionMeta) (*collectionMeta, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, max(c.timeout, adminWait))
		defer cancel()
	}
	m := c.mark()
	rctx, rcancel := c.denied.failFast(ctx)
	msg, err := c.nc.RequestWithContext(rctx, adminCreateSubject, frameJSON(meta))
	rcancel()
	if errors.Is(err, nats.ErrNoResponders) {
		fctx, cancel := c.denied.failFast(ctx)
		defer cancel()
		rec, err := c.createCollection(fctx, meta)
		if err != nil {
			err = c.explain(err, m)
			if c.mark() != m {
				return nil, fmt.Errorf("creating collection %q: no umbra node answered (start one: umbra serve), and these credentials may not create it themselves: %w", meta.Name, err)
			}
			return nil, fmt.Errorf("creating collection %q: %w", meta.Name, err)
		}
		return rec, nil
	}
	if err != nil {
		return nil, fmt.Errorf("creating collection %q: asking a node: %w", meta.Name, c.explain(err, m))
	}
	var rep adminReply
	if err := openJSON(msg.Data, &rep); err != nil {
		return nil, fmt.Errorf("creating collection %q: a node's answer: %w", meta.Name, err)
	}
	switch rep.Status {
	case adminOK:
		return unmarshalMeta(rep.Record)
	case adminExists:
		return nil, fmt.Errorf("%w: %s", ErrCollectionExists, rep.Error)
	case adminInvalid:
		return nil, fmt.Errorf("%w: %s", umbra.ErrInvalidConfig, rep.Error)
	}
	return nil, fmt.Errorf("creating collection %q: the node said: %s", meta.Name, rep.Error)
}

// sameCollection refuses old, a collection's record, where a Create asked
// for another layout (ErrCollectionExists).
func sameCollection(old, want *collectionMeta) error {
	if old.Dim != want.Dim || old.Metric != want.Metric || old.Shards != want.Shards ||
		(want.NodeReplicas != 0 && old.NodeReplicas != want.NodeReplicas) {
		return fmt.Errorf("%w: %q has dim %d, metric %s, %d shards, node replicas %d", ErrCollectionExists, old.Name,
			old.Dim, old.Metric, old.Shards, old.NodeReplicas)
	}
	return nil
}

// streamConfig is shard s's stream.
func streamConfig(meta *collectionMeta, s int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:       streamName(meta.Name, s),
		Subjects:   []string{writeSubject(meta.Name, s)},
		Storage:    jetstream.FileStorage,
		Replicas:   meta.Replicas,
		Retention:  jetstream.LimitsPolicy,
		Discard:    jetstream.DiscardNew,
		MaxBytes:   meta.MaxBytes,
		Duplicates: meta.dedupWindow(),
	}
}

// createCollection creates the collection's streams, its ID counter and
// its record, the record last: a collection exists once its record does.
// Idempotent: run again (by this client or another, at the same time or
// after a failure half-way), it ends with the same collection, or with
// ErrCollectionExists when the name was taken with another layout.
// Streams are created, never updated: an existing stream of another
// configuration is not changed (its limits could shrink under its data).
func (c *Client) createCollection(ctx context.Context, meta *collectionMeta) (*collectionMeta, error) {
	if e, err := c.colls.Get(ctx, meta.Name); err == nil {
		old, err := unmarshalMeta(e.Value())
		if err != nil {
			return nil, err
		}
		return old, sameCollection(old, meta)
	}
	for s := range meta.Shards {
		if err := c.createStream(ctx, meta, s); err != nil {
			return nil, fmt.Errorf("creating shard %d's stream: %w", s, err)
		}
	}
	if _, err := c.ctrs.Create(ctx, meta.Name, []byte("0")); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("the collection's ID counter: %w", err)
	}
	if _, err := c.colls.Create(ctx, meta.Name, meta.marshal()); err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("the collection's record: %w", err)
		}
		// Created by another meanwhile.
		e, err := c.colls.Get(ctx, meta.Name)
		if err != nil {
			return nil, fmt.Errorf("the collection's record: %w", err)
		}
		old, err := unmarshalMeta(e.Value())
		if err != nil {
			return nil, err
		}
		return old, sameCollection(old, meta)
	}
	return meta, nil
}

// createStream creates shard s's stream, or finds it there: made by
// another create of the collection (now, or one that stopped half-way),
// it is kept as it is, its limits (MaxBytes, Replicas) those of the
// create that made it. A stream of that name that is not one of umbra's
// shards (other subjects or kind) is refused.
func (c *Client) createStream(ctx context.Context, meta *collectionMeta, s int) error {
	want := streamConfig(meta, s)
	_, err := c.js.CreateStream(ctx, want)
	if err == nil || !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return err
	}
	st, err := c.js.Stream(ctx, want.Name)
	if err != nil {
		return err
	}
	got := st.CachedInfo().Config
	if !slices.Equal(got.Subjects, want.Subjects) || got.Storage != want.Storage || got.Retention != want.Retention ||
		got.Discard != want.Discard || got.Duplicates != want.Duplicates {
		return fmt.Errorf("%w: stream %s exists and is not a shard of collection %q as umbra makes them (subjects %v, %v storage, %v retention, discard %v, duplicate window %v)",
			ErrCollectionExists, want.Name, meta.Name, got.Subjects, got.Storage, got.Retention, got.Discard, got.Duplicates)
	}
	return nil
}

// recordFields adds fields (name → kind) to the collection's record at
// revision rev: through a node, or where none answers, itself (next is
// the record it would write). A record that moved since rev is
// jetstream.ErrKeyExists, as a compare-and-set that lost.
func (c *Client) recordFields(ctx context.Context, name string, rev uint64, fields map[string]meta.Kind, next *collectionMeta) error {
	req := schemaRequest{Name: name, Rev: rev, Fields: map[string]string{}}
	for f, k := range fields {
		req.Fields[f] = k.String()
	}
	body := frameJSON(req)
	m := c.mark()
	rctx, rcancel := c.denied.failFast(ctx)
	msg, err := c.nc.RequestWithContext(rctx, adminSchemaSubject, body)
	rcancel()
	if errors.Is(err, nats.ErrNoResponders) {
		fctx, cancel := c.denied.failFast(ctx)
		defer cancel()
		_, err := c.colls.Update(fctx, name, next.marshal(), rev)
		return c.explain(err, m)
	}
	if err != nil {
		return c.explain(err, m)
	}
	var rep adminReply
	if err := openJSON(msg.Data, &rep); err != nil {
		return fmt.Errorf("a node's answer: %w", err)
	}
	switch rep.Status {
	case adminOK:
		return nil
	case adminMoved:
		return jetstream.ErrKeyExists
	case adminInvalid:
		return fmt.Errorf("%w: %s", umbra.ErrInvalidMeta, rep.Error)
	}
	return fmt.Errorf("recording the metadata schema: the node said: %s", rep.Error)
}

// nodeAdmin is a node's side of the admin requests.
type nodeAdmin struct {
	mu      sync.RWMutex // held to read by a request being answered; to write by stop
	stopped bool
	subs    []*nats.Subscription
}

// startAdmin subscribes the node to the admin requests.
func (n *Node) startAdmin() error {
	for _, h := range []struct {
		subject string
		answer  func(context.Context, []byte) adminReply
	}{{adminCreateSubject, n.answerCreate}, {adminSchemaSubject, n.answerSchema}} {
		sub, err := n.c.nc.QueueSubscribe(h.subject, adminQueue, func(m *nats.Msg) {
			n.admin.mu.RLock()
			defer n.admin.mu.RUnlock()
			if n.admin.stopped || m.Reply == "" {
				return
			}
			ctx, cancel := context.WithTimeout(n.ctx, adminWait)
			rep := h.answer(ctx, m.Data)
			cancel()
			_ = m.Respond(frameJSON(rep))
		})
		if err != nil {
			n.stopAdmin()
			return err
		}
		n.admin.subs = append(n.admin.subs, sub)
	}
	return nil
}

// stopAdmin ends the admin subscriptions, once a request being answered
// is (its context ends with the node's).
func (n *Node) stopAdmin() {
	n.admin.mu.Lock()
	defer n.admin.mu.Unlock()
	n.admin.stopped = true
	for _, s := range n.admin.subs {
		_ = s.Unsubscribe()
	}
	n.admin.subs = nil
}

func adminFail(status string, format string, args ...any) adminReply {
	return adminReply{Status: status, Error: fmt.Sprintf(format, args...)}
}

// answerCreate creates a collection a client asked for, after checking
// the request as Create does and against the node's limits.
func (n *Node) answerCreate(ctx context.Context, body []byte) adminReply {
	var req collectionMeta
	if err := openJSON(body, &req); err != nil {
		return adminFail(adminInvalid, "a create request: %v", err)
	}
	if err := checkNewCollection(&req, n.cfg.MaxStreamBytes); err != nil {
		return adminFail(adminInvalid, "%v", err)
	}
	req.Created = time.Now().UTC()
	rec, err := n.c.createCollection(ctx, &req)
	switch {
	case errors.Is(err, ErrCollectionExists):
		return adminFail(adminExists, "%v", err)
	case err != nil:
		return adminFail(adminError, "%v", err)
	}
	if rec == &req {
		n.cfg.Logf("collection %s: created (%d shards, dim %d, %s), as a client asked", rec.Name, rec.Shards, rec.Dim, rec.Metric)
	}
	return adminReply{Status: adminOK, Record: rec.marshal()}
}

// checkNewCollection refuses a create request a node will not carry out.
func checkNewCollection(m *collectionMeta, maxStreamBytes int64) error {
	if maxStreamBytes <= 0 {
		maxStreamBytes = DefaultMaxStreamBytes
	}
	if err := checkName(m.Name); err != nil {
		return err
	}
	if _, err := m.metric(); err != nil {
		return fmt.Errorf("collection %q: %v", m.Name, err)
	}
	switch {
	case m.Version != 1:
		return fmt.Errorf("collection %q: record layout version %d; this node writes 1", m.Name, m.Version)
	case m.Dim < 1 || m.Dim > umbra.MaxDim:
		return fmt.Errorf("collection %q: Dim %d (1 to %d)", m.Name, m.Dim, umbra.MaxDim)
	case m.Shards < 1 || m.Shards > maxShards:
		return fmt.Errorf("collection %q: Shards %d (1 to %d)", m.Name, m.Shards, maxShards)
	case m.Replicas < 1 || m.Replicas > 5:
		return fmt.Errorf("collection %q: Replicas %d (1 to 5)", m.Name, m.Replicas)
	case m.NodeReplicas < 0 || m.NodeReplicas > maxShards:
		return fmt.Errorf("collection %q: NodeReplicas %d (0 to %d)", m.Name, m.NodeReplicas, maxShards)
	case m.MaxBytes < 1 || m.MaxBytes > maxStreamBytes:
		return fmt.Errorf("collection %q: MaxBytes %d (1 to %d, this node's limit)", m.Name, m.MaxBytes, maxStreamBytes)
	case m.DedupWindow < 0 || m.DedupWindow > MaxDedupWindow:
		return fmt.Errorf("collection %q: DedupWindow %v (up to %v)", m.Name, m.DedupWindow, MaxDedupWindow)
	case len(m.Fields) > 0:
		return fmt.Errorf("collection %q: a new collection has no metadata fields (writes add them)", m.Name)
	}
	return nil
}

// answerSchema adds fields to a collection's record, refusing a field
// the record has with another kind, a bad name, or more fields than a
// schema holds.
func (n *Node) answerSchema(ctx context.Context, body []byte) adminReply {
	var req schemaRequest
	if err := openJSON(body, &req); err != nil {
		return adminFail(adminInvalid, "a schema request: %v", err)
	}
	if err := checkName(req.Name); err != nil {
		return adminFail(adminInvalid, "%v", err)
	}
	val, rev, err := n.c.leaderGet(ctx, bucketCollections, req.Name)
	switch {
	case err != nil:
		return adminFail(adminError, "reading the record of %q: %v", req.Name, err)
	case rev == 0 || len(val) == 0:
		return adminFail(adminInvalid, "%v: %q", ErrNoCollection, req.Name)
	case rev != req.Rev:
		return adminReply{Status: adminMoved}
	}
	rec, err := unmarshalMeta(val)
	if err != nil {
		return adminFail(adminError, "%v", err)
	}
	fields, err := rec.schema()
	if err != nil {
		return adminFail(adminError, "%v", err)
	}
	mi := schemaIndex(fields)
	next := *rec
	next.Fields = maps.Clone(rec.Fields)
	if next.Fields == nil {
		next.Fields = map[string]string{}
	}
	for _, f := range slices.Sorted(maps.Keys(req.Fields)) {
		k, ok := kinds[req.Fields[f]]
		if !ok {
			return adminFail(adminInvalid, "field %q: kind %q", f, req.Fields[f])
		}
		if err := mi.Declare(f, k); err != nil {
			return adminFail(adminInvalid, "%v", err)
		}
		next.Fields[f] = k.String()
	}
	if len(next.Fields) == len(rec.Fields) {
		return adminReply{Status: adminOK}
	}
	if _, err := n.c.colls.Update(ctx, req.Name, next.marshal(), rev); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return adminReply{Status: adminMoved}
		}
		return adminFail(adminError, "%v", err)
	}
	return adminReply{Status: adminOK}
}
