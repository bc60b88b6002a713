package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats-server/v2/server"
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
	adminCreateSubject = "umbra.admin.create"
	adminSchemaSubject = "umbra.admin.schema"
	adminQueue         = "umbra_admin"
)

// The node role's subjects.
var (
	nodePublish = []string{
		"umbra.>",
		"_INBOX.>",             // replies to clients
		NodeInboxPrefix + ".>", // replies to nodes (and operators on a node's connection)
		"$JS.API.>",
		"$JS.ACK.>",
		"$JS.FC.>", // flow control of ordered consumers (bucket watches, object reads)
		"$KV." + bucketCollections + ".>",
		"$KV." + bucketCounters + ".>",
		"$KV." + bucketSnapshots + ".>",
		"$KV." + bucketNodes + ".>",
		"$KV." + bucketPlacement + ".>",
		"$KV." + bucketRepairs + ".>", // an operator's skip of a message (umbra repair)
		"$KV." + bucketCalls + ".>",
		"$O." + objectSnapshots + ".>",
	}
	nodeSubscribe = []string{
		"umbra.>",
		"_INBOX.>", // operator commands on node credentials
		NodeInboxPrefix + ".>",
	}
)

// The client role's subjects.
var (
	clientPublish = []string{
		"umbra.w.>", // writes: each shard's stream stores its subject's messages
		"umbra.q.>", // searches, lookups, outcomes, row counts
		adminCreateSubject,
		adminSchemaSubject,
		"$JS.API.STREAM.INFO.*", // stream state (umbra info), and opening the buckets
		"$JS.API.DIRECT.GET.KV_" + bucketCollections + ".>",
		"$JS.API.DIRECT.GET.KV_" + bucketCounters + ".>",
		"$JS.API.STREAM.MSG.GET.KV_" + bucketCounters, // the ID floor, read from the leader
		"$KV." + bucketCounters + ".>",                // ID blocks and the floor (compare-and-set)
		"$JS.API.DIRECT.GET.KV_" + bucketCalls + ".>", // writes with an idempotency key
		"$KV." + bucketCalls + ".>",
		statsSubject, // every node's request counts and limits (umbra info)
	}
	clientSubscribe = []string{"_INBOX.>"}
)

func permissions(pub, sub []string) *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: slices.Clone(pub)},
		Subscribe: &server.SubjectPermission{Allow: slices.Clone(sub)},
	}
}

// NodePermissions and ClientPermissions are the roles' NATS permissions,
// as the embedded server gives them (and docs/nats/auth.conf writes
// them).
func NodePermissions() *server.Permissions   { return permissions(nodePublish, nodeSubscribe) }
func ClientPermissions() *server.Permissions { return permissions(clientPublish, clientSubscribe) }

// connOptions are what Connect passes to nats.Connect beyond its own.
type connOptions struct {
	creds     string // the credentials file given
	nats      []nats.Option
	node      bool
	err       error
	connLevel bool // an option that only Connect can apply
}

// Credentials makes Connect authenticate with the credentials in file:
// an NATS user nkey seed (what umbra serve writes, DIR/creds/node.nk or
// client.nk; the server checks a signature of its nonce, the seed never
// crosses the network) or a standard NATS .creds file (a user JWT and its
// seed, for a server run in operator mode). Which it is, is read from the
// file.
func Credentials(file string) ClientOption {
	return func(c *Client) {
		c.conn.connLevel = true
		c.conn.creds = file
		opt, err := credentialsOption(file)
		if err != nil {
			c.conn.err = errors.Join(c.conn.err, err)
			return
		}
		c.conn.nats = append(c.conn.nats, opt)
	}
}

func credentialsOption(file string) (nats.Option, error) {
	body, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	defer wipe(body)
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

// TLS makes Connect trust the certificate authority in caFile (PEM) for a
// tls:// server (without it, the system's roots).
func TLS(caFile string) ClientOption {
	return func(c *Client) {
		c.conn.connLevel = true
		c.conn.nats = append(c.conn.nats, nats.RootCAs(caFile))
	}
}

// ClientCert makes Connect present the certificate in certFile with the
// key in keyFile (PEM), for a server that verifies its clients'
// certificates (tls { verify: true }).
func ClientCert(certFile, keyFile string) ClientOption {
	return func(c *Client) {
		c.conn.connLevel = true
		c.conn.nats = append(c.conn.nats, nats.ClientCert(certFile, keyFile))
	}
}

// AsNode makes the connection a node's: its replies arrive under
// NodeInboxPrefix, which the client role cannot subscribe to. StartNode
// requires it. With NewClient, the connection must have been made with
// nats.CustomInboxPrefix(NodeInboxPrefix).
func AsNode() ClientOption {
	return func(c *Client) { c.conn.node = true }
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

func (d *denials) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
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
func (d *denials) failFast(ctx context.Context) (context.Context, context.CancelFunc) {
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
func (c *Client) mark() uint64 { return c.denied.n.Load() }

// explain adds to err the last permission violation the server reported
// since mark, if any: the operation most likely failed for it.
func (c *Client) explain(err error, mark uint64) error {
	if err == nil {
		return nil
	}
	if c.denied.n.Load() == mark {
		return err
	}
	return fmt.Errorf("%w (the server refused a request: %s; these credentials lack the right%s)", err, *c.denied.last.Load(), c.credsNote())
}

func (c *Client) credsNote() string {
	if c.conn.creds != "" {
		return ", credentials " + c.conn.creds
	}
	return ""
}

// bucketError says why a bucket could not be opened: most often, with a
// client's credentials, that no node has made it yet.
func (c *Client) bucketError(err error, mark uint64) error {
	switch {
	case c.mark() == mark:
		return err
	case c.conn.node:
		return fmt.Errorf("%w: a node needs the node role's credentials (umbra serve --dir D writes D/creds/node.nk; on an external server, the user with the node's permissions)", c.explain(err, mark))
	}
	return fmt.Errorf("%w: umbra's buckets are made by its nodes, and these credentials may not make them: start an umbra node (umbra serve) on this NATS system first", c.explain(err, mark))
}
