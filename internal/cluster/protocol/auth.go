package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// Who may do what on an umbra cluster's NATS system. Two roles:
//
//   - node: umbra's nodes (umbra serve) and operator commands: umbra's
//     subjects, the JetStream API, umbra's buckets and its snapshot store.
//   - client: applications. They write through the shards' write subjects
//     (JetStream stores what they publish there), search and look up
//     through the query subjects, create collections and record new
//     metadata fields by asking a node (umbra.admin.*), read the
//     collection records and move the ID counters. They cannot subscribe
//     to umbra's subjects (to read others' requests or answer them),
//     read a shard's stream or the snapshots, purge, delete or change any
//     stream, list the streams, or write any bucket but umbra_counters.
//
// The embedded server gives these permissions to its two nkey users; an
// external one is configured from docs/nats/auth.conf, which a test
// checks against these lists.

// NodeInboxPrefix is where a node's connection receives its replies
// (JetStream deliveries of the shards' streams and snapshots among them):
// not under _INBOX, which the client role may subscribe to for its own
// replies. Connect(AsNode()) sets it; StartNode requires it.
const NodeInboxPrefix = "_UMBRA_NODE_INBOX"

// The subjects of requests a node answers for clients that may not do the
// work themselves (admin.go).
const (
	AdminCreateSubject = "umbra.admin.create"
	AdminSchemaSubject = "umbra.admin.schema"
	AdminQueue         = "umbra_admin"
)

func CredentialsOption(file string) (nats.Option, error) {
	body, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	defer Wipe(body)
	switch {
	case bytes.Contains(body, []byte("BEGIN NATS USER JWT")):
		return nats.UserCredentials(file), nil
	case bytes.Contains(body, []byte("-----BEGIN")) || bytes.Contains(body, []byte("\nSU")) || bytes.HasPrefix(bytes.TrimSpace(body), []byte("SU")):
		opt, err := nats.NkeyOptionFromSeed(file)
		if err != nil {
			return nil, fmt.Errorf("credentials file %s: %w", file, err)
		}
		return opt, nil
	}
	return nil, fmt.Errorf("credentials file %s: neither an NATS user nkey seed (a line starting SU) nor a .creds file (a user JWT and its seed)", file)
}

// denials records the permission violations the server reported on a
// connection Connect made, so that an operation that failed for lack of
// a right says so (NATS reports them apart from the operation).
type denials struct {
	n       atomic.Uint64
	last    atomic.Pointer[string]
	mu      sync.Mutex
	waiters map[*int]context.CancelFunc
}

func (d *denials) Handle(_ *nats.Conn, _ *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrPermissionViolation) {
		s := err.Error()
		d.last.Store(&s)
		d.n.Add(1)
		d.mu.Lock()
		for _, cancel := range d.waiters {
			cancel()
		}
		d.mu.Unlock()
	}
}

// failFast returns a ctx that also ends when the server refuses the
// connection something: a refused request is never answered, and waiting
// for it to the deadline only delays the error.
func (d *denials) FailFast(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	key := new(int)
	d.mu.Lock()
	if d.waiters == nil {
		d.waiters = map[*int]context.CancelFunc{}
	}
	d.waiters[key] = cancel
	d.mu.Unlock()
	return ctx, func() {
		d.mu.Lock()
		delete(d.waiters, key)
		d.mu.Unlock()
		cancel()
	}
}

// mark is the count of denials so far: explain attaches a denial that
// came after it.
func (c *Conn) Mark() uint64 { return c.denied.n.Load() }

// explain adds to err the last permission violation the server reported
// since mark, if any: the operation most likely failed for it.
func (c *Conn) Explain(err error, mark uint64) error {
	if err == nil {
		return nil
	}
	if c.denied.n.Load() == mark {
		return err
	}
	return fmt.Errorf("%w (the server refused a request: %s; these credentials lack the right%s)", err, *c.denied.last.Load(), c.CredsNote())
}

func (c *Conn) CredsNote() string {
	if c.Creds != "" {
		return ", credentials " + c.Creds
	}
	return ""
}

// bucketError says why a bucket could not be opened: most often, with a
// client's credentials, that no node has made it yet.
func (c *Conn) BucketError(err error, mark uint64) error {
	switch {
	case c.Mark() == mark:
		return err
	case c.Node:
		return fmt.Errorf("%w: a node needs the node role's credentials (umbra serve --dir D writes D/creds/node.nk; on an external server, the user with the node's permissions)", c.Explain(err, mark))
	}
	return fmt.Errorf("%w: umbra's buckets are made by its nodes, and these credentials may not make them: start an umbra node (umbra serve) on this NATS system first", c.Explain(err, mark))
}
