package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/cluster/protocol"
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

// adminWait is how long a client waits for a node to create a collection
// when its ctx gives no deadline (many shards, R3: each stream an
// election).
const adminWait = 2 * time.Minute

// createThroughNode has a node create the collection meta describes, or,
// where no node answers, creates it itself. It returns the collection's
// record (another's, when the name was taken with the same configuration
// meanwhile).
func (c *Client) createThroughNode(ctx context.Context, meta *protocol.CollectionRecord) (*protocol.CollectionRecord, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, max(c.timeout, adminWait))
		defer cancel()
	}
	m := c.x.Mark()
	rctx, rcancel := c.x.FailFast(ctx)
	msg, err := c.x.NC.RequestWithContext(rctx, protocol.AdminCreateSubject, protocol.FrameJSON(meta))
	rcancel()
	if errors.Is(err, nats.ErrNoResponders) {
		fctx, cancel := c.x.FailFast(ctx)
		defer cancel()
		rec, err := c.x.CreateCollection(fctx, meta)
		if err != nil {
			err = c.x.Explain(err, m)
			if c.x.Mark() != m {
				return nil, fmt.Errorf("creating collection %q: no umbra node answered (start one: umbra serve), and these credentials may not create it themselves: %w", meta.Name, err)
			}
			return nil, fmt.Errorf("creating collection %q: %w", meta.Name, err)
		}
		return rec, nil
	}
	if err != nil {
		return nil, fmt.Errorf("creating collection %q: asking a node: %w", meta.Name, c.x.Explain(err, m))
	}
	var rep protocol.AdminReply
	if err := protocol.OpenJSON(msg.Data, &rep); err != nil {
		return nil, fmt.Errorf("creating collection %q: a node's answer: %w", meta.Name, err)
	}
	switch rep.Status {
	case protocol.AdminOK:
		return protocol.UnmarshalRecord(rep.Record)
	case protocol.AdminExists:
		return nil, fmt.Errorf("%w: %s", ErrCollectionExists, rep.Error)
	case protocol.AdminInvalid:
		return nil, fmt.Errorf("%w: %s", umbra.ErrInvalidConfig, rep.Error)
	}
	return nil, fmt.Errorf("creating collection %q: the node said: %s", meta.Name, rep.Error)
}

// recordFields adds fields (name → kind) to the collection's record at
// revision rev: through a node, or where none answers, itself (next is
// the record it would write). A record that moved since rev is
// jetstream.ErrKeyExists, as a compare-and-set that lost.
func (c *Client) recordFields(ctx context.Context, name string, rev uint64, fields map[string]meta.Kind, next *protocol.CollectionRecord) error {
	req := protocol.SchemaRequest{Name: name, Rev: rev, Fields: map[string]string{}}
	for f, k := range fields {
		req.Fields[f] = k.String()
	}
	body := protocol.FrameJSON(req)
	m := c.x.Mark()
	rctx, rcancel := c.x.FailFast(ctx)
	msg, err := c.x.NC.RequestWithContext(rctx, protocol.AdminSchemaSubject, body)
	rcancel()
	if errors.Is(err, nats.ErrNoResponders) {
		fctx, cancel := c.x.FailFast(ctx)
		defer cancel()
		_, err := c.x.Colls.Update(fctx, name, next.Marshal(), rev)
		return c.x.Explain(err, m)
	}
	if err != nil {
		return c.x.Explain(err, m)
	}
	var rep protocol.AdminReply
	if err := protocol.OpenJSON(msg.Data, &rep); err != nil {
		return fmt.Errorf("a node's answer: %w", err)
	}
	switch rep.Status {
	case protocol.AdminOK:
		return nil
	case protocol.AdminMoved:
		return jetstream.ErrKeyExists
	case protocol.AdminInvalid:
		return fmt.Errorf("%w: %s", umbra.ErrInvalidMeta, rep.Error)
	}
	return fmt.Errorf("recording the metadata schema: the node said: %s", rep.Error)
}
