package cluster

import (
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

// connOptions are what Connect passes to nats.Connect beyond its own.
type connOptions struct {
	creds     string // the credentials file given
	nats      []nats.Option
	node      bool
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
	}
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

// AsNode makes the connection a node's or an operator's (with the node
// role's credentials): its replies arrive under "_UMBRA_NODE_INBOX",
// which the client role cannot subscribe to. With NewClient, the
// connection must have been made with
// nats.CustomInboxPrefix("_UMBRA_NODE_INBOX").
func AsNode() ClientOption {
	return func(c *Client) { c.conn.node = true }
}
