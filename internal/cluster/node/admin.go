package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/cluster/protocol"
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

// adminWait bounds a node's answer to an admin request (many shards, R3:
// each stream an election).
const adminWait = 2 * time.Minute

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
		answer  func(context.Context, []byte) protocol.AdminReply
	}{{protocol.AdminCreateSubject, n.answerCreate}, {protocol.AdminSchemaSubject, n.answerSchema}} {
		sub, err := n.c.NC.QueueSubscribe(h.subject, protocol.AdminQueue, func(m *nats.Msg) {
			n.admin.mu.RLock()
			defer n.admin.mu.RUnlock()
			if n.admin.stopped || m.Reply == "" {
				return
			}
			ctx, cancel := context.WithTimeout(n.ctx, adminWait)
			rep := h.answer(ctx, m.Data)
			cancel()
			_ = m.Respond(protocol.FrameJSON(rep))
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

func adminFail(status string, format string, args ...any) protocol.AdminReply {
	return protocol.AdminReply{Status: status, Error: fmt.Sprintf(format, args...)}
}

// answerCreate creates a collection a client asked for, after checking
// the request as Create does and against the node's limits.
func (n *Node) answerCreate(ctx context.Context, body []byte) protocol.AdminReply {
	var req protocol.CollectionRecord
	if err := protocol.OpenJSON(body, &req); err != nil {
		return adminFail(protocol.AdminInvalid, "a create request: %v", err)
	}
	if err := checkNewCollection(&req, n.cfg.MaxStreamBytes); err != nil {
		return adminFail(protocol.AdminInvalid, "%v", err)
	}
	req.Created = time.Now().UTC()
	rec, err := n.c.CreateCollection(ctx, &req)
	switch {
	case errors.Is(err, protocol.ErrCollectionExists):
		return adminFail(protocol.AdminExists, "%v", err)
	case err != nil:
		return adminFail(protocol.AdminError, "%v", err)
	}
	if rec == &req {
		n.cfg.Logf("collection %s: created (%d shards, dim %d, %s), as a client asked", rec.Name, rec.Shards, rec.Dim, rec.Metric)
	}
	return protocol.AdminReply{Status: protocol.AdminOK, Record: rec.Marshal()}
}

// checkNewCollection refuses a create request a node will not carry out.
func checkNewCollection(m *protocol.CollectionRecord, maxStreamBytes int64) error {
	if maxStreamBytes <= 0 {
		maxStreamBytes = DefaultMaxStreamBytes
	}
	if err := protocol.CheckName(m.Name); err != nil {
		return err
	}
	if _, err := m.ParseMetric(); err != nil {
		return fmt.Errorf("collection %q: %v", m.Name, err)
	}
	switch {
	case m.Version != 1:
		return fmt.Errorf("collection %q: record layout version %d; this node writes 1", m.Name, m.Version)
	case m.Dim < 1 || m.Dim > umbra.MaxDim:
		return fmt.Errorf("collection %q: Dim %d (1 to %d)", m.Name, m.Dim, umbra.MaxDim)
	case m.Shards < 1 || m.Shards > protocol.MaxShards:
		return fmt.Errorf("collection %q: Shards %d (1 to %d)", m.Name, m.Shards, protocol.MaxShards)
	case m.Replicas < 1 || m.Replicas > 5:
		return fmt.Errorf("collection %q: Replicas %d (1 to 5)", m.Name, m.Replicas)
	case m.NodeReplicas < 0 || m.NodeReplicas > protocol.MaxShards:
		return fmt.Errorf("collection %q: NodeReplicas %d (0 to %d)", m.Name, m.NodeReplicas, protocol.MaxShards)
	case m.MaxBytes < 1 || m.MaxBytes > maxStreamBytes:
		return fmt.Errorf("collection %q: MaxBytes %d (1 to %d, this node's limit)", m.Name, m.MaxBytes, maxStreamBytes)
	case m.DedupWindow < 0 || m.DedupWindow > protocol.MaxDedupWindow:
		return fmt.Errorf("collection %q: DedupWindow %v (up to %v)", m.Name, m.DedupWindow, protocol.MaxDedupWindow)
	case len(m.Fields) > 0:
		return fmt.Errorf("collection %q: a new collection has no metadata fields (writes add them)", m.Name)
	}
	return nil
}

// answerSchema adds fields to a collection's record, refusing a field
// the record has with another kind, a bad name, or more fields than a
// schema holds.
func (n *Node) answerSchema(ctx context.Context, body []byte) protocol.AdminReply {
	var req protocol.SchemaRequest
	if err := protocol.OpenJSON(body, &req); err != nil {
		return adminFail(protocol.AdminInvalid, "a schema request: %v", err)
	}
	if err := protocol.CheckName(req.Name); err != nil {
		return adminFail(protocol.AdminInvalid, "%v", err)
	}
	val, rev, err := n.c.LeaderGet(ctx, protocol.BucketCollections, req.Name)
	switch {
	case err != nil:
		return adminFail(protocol.AdminError, "reading the record of %q: %v", req.Name, err)
	case rev == 0 || len(val) == 0:
		return adminFail(protocol.AdminInvalid, "%v: %q", protocol.ErrNoCollection, req.Name)
	case rev != req.Rev:
		return protocol.AdminReply{Status: protocol.AdminMoved}
	}
	rec, err := protocol.UnmarshalRecord(val)
	if err != nil {
		return adminFail(protocol.AdminError, "%v", err)
	}
	fields, err := rec.Schema()
	if err != nil {
		return adminFail(protocol.AdminError, "%v", err)
	}
	mi := protocol.SchemaIndex(fields)
	next := *rec
	next.Fields = maps.Clone(rec.Fields)
	if next.Fields == nil {
		next.Fields = map[string]string{}
	}
	for _, f := range slices.Sorted(maps.Keys(req.Fields)) {
		k, ok := protocol.Kinds[req.Fields[f]]
		if !ok {
			return adminFail(protocol.AdminInvalid, "field %q: kind %q", f, req.Fields[f])
		}
		if err := mi.Declare(f, k); err != nil {
			return adminFail(protocol.AdminInvalid, "%v", err)
		}
		next.Fields[f] = k.String()
	}
	if len(next.Fields) == len(rec.Fields) {
		return protocol.AdminReply{Status: protocol.AdminOK}
	}
	if _, err := n.c.Colls.Update(ctx, req.Name, next.Marshal(), rev); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return protocol.AdminReply{Status: protocol.AdminMoved}
		}
		return adminFail(protocol.AdminError, "%v", err)
	}
	return protocol.AdminReply{Status: protocol.AdminOK}
}
