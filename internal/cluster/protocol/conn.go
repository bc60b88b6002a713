package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Conn is a NATS connection as an umbra client and an umbra node both use
// it: its JetStream context, the cluster's two shared buckets, and the
// permission violations the server reported on it (so that an operation
// refused for lack of a right says so).
type Conn struct {
	NC       *nats.Conn
	JS       jetstream.JetStream
	Colls    jetstream.KeyValue // umbra_collections: the collections' records
	Ctrs     jetstream.KeyValue // umbra_counters: the ID counters
	Replicas int                // of the cluster's buckets: 1 on one server, 3 in a NATS cluster
	// Creds is the credentials file the connection was made with ("":
	// none, or unknown), Node whether it is a node's (NodeInboxPrefix):
	// both for messages.
	Creds string
	Node  bool

	denied denials
	owns   bool
}

// DialConfig says how Dial connects.
type DialConfig struct {
	// Creds is the credentials file (CredentialsOption), "" for none.
	Creds string
	// Options are more of nats.Connect's options (TLS, client
	// certificates).
	Options []nats.Option
	// Node makes the connection a node's: its replies arrive under
	// NodeInboxPrefix.
	Node bool
}

// AuthError is Dial's error when the server refused the credentials.
type AuthError struct {
	URL   string
	Creds string // the credentials file given ("": none)
	Err   error  // NATS's
}

func (e *AuthError) Error() string { return AuthMessage(e.URL, e.Creds, e.Err) }

func (e *AuthError) Unwrap() []error { return []error{ErrUnauthorized, e.Err} }

// ErrUnauthorized: the NATS server refused the connection's credentials
// (none given, or not keys it knows).
var ErrUnauthorized = errors.New("the server refused the credentials")

// AuthMessage words a refusal of the credentials creds ("": none) by the
// server at url.
func AuthMessage(url, creds string, err error) string {
	if creds == "" {
		return fmt.Sprintf("connecting to %s without credentials: the server refused the connection (%v): give credentials (Credentials: umbra serve --dir D writes D/creds/client.nk for applications, D/creds/node.nk for nodes)", url, err)
	}
	return fmt.Sprintf("connecting to %s: the server refused the credentials in %s (%v): not keys it knows (another server's, or replaced since: umbra serve prints where it keeps the current ones)", url, creds, err)
}

// Dial connects to the NATS server at url (several, comma-separated: any
// of them) as cfg says and opens the cluster's buckets. A refusal of the
// credentials is an *AuthError.
func Dial(ctx context.Context, url string, cfg DialConfig) (*Conn, error) {
	c := &Conn{Creds: cfg.Creds, Node: cfg.Node, owns: true}
	opts := []nats.Option{nats.Name("umbra client"), nats.MaxReconnects(-1), nats.ErrorHandler(c.denied.Handle)}
	if cfg.Node {
		opts = append(opts, nats.Name("umbra node"), nats.CustomInboxPrefix(NodeInboxPrefix))
	}
	if cfg.Creds != "" {
		o, err := CredentialsOption(cfg.Creds)
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
	}
	nc, err := nats.Connect(url, append(opts, cfg.Options...)...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
			return nil, &AuthError{URL: url, Creds: cfg.Creds, Err: err}
		}
		return nil, fmt.Errorf("connecting to %s: %w", url, err)
	}
	c.NC = nc
	if err := c.init(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// Open makes a Conn on a connection the caller made (Close leaves it
// open); node says it is a node's, which needs its replies under
// NodeInboxPrefix.
func Open(ctx context.Context, nc *nats.Conn, node bool) (*Conn, error) {
	if node && nc.Opts.InboxPrefix != NodeInboxPrefix {
		return nil, fmt.Errorf("a node's connection must be made with nats.CustomInboxPrefix(%q), not %q", NodeInboxPrefix, nc.Opts.InboxPrefix)
	}
	c := &Conn{NC: nc, Node: node}
	if err := c.init(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Close closes the connection, if Dial made it.
func (c *Conn) Close() {
	if c.owns {
		c.NC.Close()
	}
}

func (c *Conn) init(ctx context.Context) error {
	js, err := jetstream.New(c.NC)
	if err != nil {
		return err
	}
	c.JS = js
	c.Replicas = 1
	if c.NC.ConnectedClusterName() != "" {
		c.Replicas = 3
	}
	m := c.Mark()
	fctx, cancel := c.FailFast(ctx)
	defer cancel()
	if c.Colls, err = Bucket(fctx, js, BucketCollections, c.Replicas); err != nil {
		return c.BucketError(err, m)
	}
	if c.Ctrs, err = Bucket(fctx, js, BucketCounters, c.Replicas); err != nil {
		return c.BucketError(err, m)
	}
	return nil
}

// FailFast returns a ctx that also ends when the server refuses the
// connection something: a refused request is never answered, and waiting
// for it to the deadline only delays the error.
func (c *Conn) FailFast(ctx context.Context) (context.Context, context.CancelFunc) {
	return c.denied.FailFast(ctx)
}

// Bucket opens the KV bucket, creating it when absent.
func Bucket(ctx context.Context, js jetstream.JetStream, name string, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, Replicas: replicas, Storage: jetstream.FileStorage, History: 1})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", name, err)
	}
	return kv, nil
}

// Denials is how many requests the server refused the connection (its
// permission violations), and the last one's words.
func (c *Conn) Denials() (uint64, string) {
	n := c.denied.n.Load()
	if n == 0 {
		return 0, ""
	}
	return n, *c.denied.last.Load()
}
