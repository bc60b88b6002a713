package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/umbravec/umbra/cluster"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// clusterFlags are the store commands' cluster form: --cluster URL
// --collection NAME in place of a store path.
type clusterFlags struct {
	Cluster    string `name:"cluster" placeholder:"URL" help:"the NATS URL of an umbra cluster (see 'umbra serve'), in place of a store; with --collection"`
	Collection string `name:"collection" placeholder:"NAME" help:"with --cluster: the collection"`
	natsFlags  `embed:""`
}

// natsFlags are how a command authenticates to a NATS server.
type natsFlags struct {
	Creds   string `name:"creds" placeholder:"FILE" help:"the credentials to connect with: an nkey seed (umbra serve --dir D writes D/creds/client.nk for applications, D/creds/node.nk for nodes) or a NATS .creds file"`
	TLSCA   string `name:"tls-ca" placeholder:"FILE" help:"the certificate authority (PEM) that signed a tls:// server's certificate (default: the system's)"`
	TLSCert string `name:"tls-cert" placeholder:"FILE" help:"a client certificate (PEM) for a server that verifies its clients; with --tls-key"`
	TLSKey  string `name:"tls-key" placeholder:"FILE" help:"the client certificate's key (PEM); with --tls-cert"`
}

func (f *natsFlags) given() string {
	for _, g := range []struct{ flag, v string }{{"--creds", f.Creds}, {"--tls-ca", f.TLSCA}, {"--tls-cert", f.TLSCert}, {"--tls-key", f.TLSKey}} {
		if g.v != "" {
			return g.flag
		}
	}
	return ""
}

func (f *natsFlags) validate() error {
	if (f.TLSCert == "") != (f.TLSKey == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	return nil
}

// options are the cluster.Connect options the flags give.
func (f *natsFlags) options() []cluster.ClientOption {
	var opts []cluster.ClientOption
	if f.Creds != "" {
		opts = append(opts, cluster.Credentials(f.Creds))
	}
	if f.TLSCA != "" {
		opts = append(opts, cluster.TLS(f.TLSCA))
	}
	if f.TLSCert != "" {
		opts = append(opts, cluster.ClientCert(f.TLSCert, f.TLSKey))
	}
	return opts
}

// connect connects to url with the flags' credentials, as a node or an
// application; a refusal of them names the flag.
func (f *natsFlags) connect(ctx context.Context, url string, node bool) (*cluster.Client, error) {
	opts := f.options()
	if node {
		opts = append(opts, cluster.AsNode())
	}
	c, err := cluster.Connect(ctx, url, opts...)
	if err != nil {
		return nil, f.connError(url, node, err)
	}
	return c, nil
}

// dial makes the connection a node, or an operator's command, works on:
// connect's, without the client.
func (f *natsFlags) dial(ctx context.Context, url string, node bool) (*protocol.Conn, error) {
	var opts []nats.Option
	if f.TLSCA != "" {
		opts = append(opts, nats.RootCAs(f.TLSCA))
	}
	if f.TLSCert != "" {
		opts = append(opts, nats.ClientCert(f.TLSCert, f.TLSKey))
	}
	x, err := protocol.Dial(ctx, url, protocol.DialConfig{Creds: f.Creds, Options: opts, Node: node})
	if err != nil {
		return nil, f.connError(url, node, err)
	}
	return x, nil
}

// connError words a failure to connect to url: a refusal of the
// credentials names the flag.
func (f *natsFlags) connError(url string, node bool, err error) error {
	which := "D/creds/client.nk for applications"
	if node {
		which = "D/creds/node.nk for nodes"
	}
	var auth *protocol.AuthError
	var refused error
	if errors.As(err, &auth) {
		refused = auth.Err
	}
	switch {
	case refused != nil && f.Creds == "":
		return fmt.Errorf("connecting to %s: the server refused the connection without credentials (%v): give --creds FILE (umbra serve --dir D writes %s, and prints where at start)", url, refused, which)
	case refused != nil:
		return fmt.Errorf("--creds %s: the server at %s refused these credentials (%v): not keys it knows (another server's, or replaced since: umbra serve prints where it keeps the current ones)", f.Creds, url, refused)
	}
	for _, g := range []struct{ flag, file string }{{"--creds", f.Creds}, {"--tls-ca", f.TLSCA}, {"--tls-cert", f.TLSCert}, {"--tls-key", f.TLSKey}} {
		if g.file != "" && strings.Contains(err.Error(), g.file) {
			return fmt.Errorf("%s: %w", g.flag, err)
		}
	}
	return err
}

// clusterOnly refuses the connection flags without --cluster.
func (f *clusterFlags) clusterOnly() error {
	if g := f.given(); g != "" && f.Cluster == "" {
		return usagef("%s needs --cluster", g)
	}
	return nil
}

// checkTarget is every command's check of what it talks to: the
// connection flags only with --cluster; with it --collection and no STORE;
// without it a STORE (usage says how to give one); no other argument.
func (f *clusterFlags) checkTarget(store, usage string, extra []string) error {
	if err := f.clusterOnly(); err != nil {
		return err
	}
	switch {
	case f.Cluster != "":
		if err := f.validateCluster(store); err != nil {
			return err
		}
	case store == "":
		return usagef("missing STORE: %s", usage)
	}
	if len(extra) > 0 {
		return usagef("unexpected argument %q", extra[0])
	}
	return nil
}

func (f *clusterFlags) validateCluster(store string) error {
	switch {
	case f.Collection == "":
		return usagef("--cluster needs --collection NAME")
	case store != "":
		return usagef("--cluster and a store exclude each other")
	}
	return f.natsFlags.validate()
}

func (f *clusterFlags) open(ctx context.Context) (*cluster.Client, *cluster.Collection, error) {
	c, err := f.connect(ctx, f.Cluster, false)
	if err != nil {
		return nil, nil, err
	}
	col, err := c.Open(ctx, f.Collection)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, col, nil
}

type serveCmd struct {
	NATS      string `name:"nats" placeholder:"URL" help:"an existing NATS system with JetStream (run with sync_interval: always); without it an embedded server is started"`
	Listen    string `name:"listen" default:"127.0.0.1:4222" placeholder:"HOST:PORT" help:"where the embedded NATS server listens (loopback only)"`
	Dir       string `name:"dir" default:"umbra-data" placeholder:"DIR" help:"where the node keeps its shard replicas (and the embedded server its streams)"`
	Device    choice `name:"device" choices:"auto,gpu,cpu" default:"auto" placeholder:"D" help:"what the replicas search on"`
	Snap      int    `name:"snapshot-every" default:"0" placeholder:"N" help:"snapshot each shard to the Object Store every N applied messages (one node a round takes it) and trim its stream below the snapshot before (0: never)"`
	Place     bool   `name:"placement" help:"hold only the shards a controller (one of the nodes) assigns this node, in proportion to its memory, rather than every shard; on Ctrl-C the node hands its shards over before it stops"`
	NodeID    string `name:"node-id" placeholder:"ID" help:"with --placement: the node's name (default: made once and kept in DIR/node-id)"`
	MemMiB    int64  `name:"memory-mib" default:"0" placeholder:"MIB" help:"with --placement: the memory this node offers, in MiB (0: the machine's)"`
	Rotate    bool   `name:"rotate-creds" help:"without --nats: replace the embedded server's credentials (DIR/creds) by new ones before starting; the old ones are refused from then on"`
	natsFlags `embed:""`

	serveLimitFlags `embed:""` // serve_wait.go
	httpFlags       `embed:""` // serve_http.go
}

func (*serveCmd) Help() string {
	return `Run an umbra cluster node: it holds a replica of every shard of every
collection (with --placement: of the shards assigned to it), applies each shard's stream (NATS JetStream) into a store under
--dir, and answers searches. Without --nats it starts an in-process NATS
server with JetStream on --listen (loopback only), its streams fsynced on
every write, that admits only the credentials it makes in DIR/creds on its
first start (mode 0600): node.nk for nodes and operator commands,
client.nk for applications (--creds FILE). With --nats, --creds gives the
node's own credentials. A node killed at any point and started again on
the same --dir resumes from the last message its stores applied. Started
while its NATS cluster is still forming, it waits for it (up to --wait),
saying so. The --max-… flags bound what requests can make it hold: a
request over them is refused at once, naming the limit ('umbra info
--cluster URL' counts the refusals). Stop it with Ctrl-C.

With --http ADDR it serves Chroma's v2 HTTP API instead (what the chromadb
clients speak; docs/chroma.md): one umbra store per collection under
--dir, or with --cluster URL the collections of that cluster. Without
--token-file it listens on loopback only.`
}

func (*serveCmd) Examples() []string {
	return []string{
		"umbra serve --dir node1",
		"umbra build --cluster nats://127.0.0.1:4222 --creds node1/creds/client.nk --collection docs --data docs.npy --shards 4",
		"umbra search --cluster nats://127.0.0.1:4222 --creds node1/creds/client.nk --collection docs --queries q.npy --k 10 --json",
		"umbra serve --nats tls://nats1:4222 --creds /etc/umbra/node.nk --tls-ca /etc/umbra/ca.pem --dir node2",
		"umbra serve --http 127.0.0.1:8000 --dir chroma-data",
		"umbra serve --http 0.0.0.0:8000 --token-file token.txt --dir chroma-data",
	}
}

func (s *serveCmd) Run(ctx context.Context, e *env) error {
	device, err := engine.ParseDevice(string(s.Device))
	if err != nil {
		return usagef("%s", err)
	}
	if s.HTTP != "" {
		return s.runHTTP(ctx, e, device)
	}
	if g := s.httpFlags.httpOnly(); g != "" {
		return usagef("%s needs --http", g)
	}
	if err := s.validateAuth(); err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	if !s.Place && (s.NodeID != "" || s.MemMiB != 0) {
		return usagef("--node-id and --memory-mib need --placement")
	}
	if s.MemMiB < 0 {
		return usagef("--memory-mib %d: a size in MiB, 0 for the machine's", s.MemMiB)
	}
	limits, err := s.limits()
	if err != nil {
		return err
	}
	url := s.NATS
	if url == "" {
		if s.Rotate {
			creds, err := node.RotateCreds(filepath.Join(s.Dir, "creds"))
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "umbra serve: new credentials in %s; the old ones are refused from now on\n", creds.Dir())
		}
		srv, err := node.StartEmbedded(node.EmbeddedConfig{Listen: s.Listen, Dir: s.Dir})
		if err != nil {
			return err
		}
		defer srv.Close()
		url = srv.URL()
		s.Creds = srv.NodeCreds()
		fmt.Fprintf(e.stdout, "umbra serve: clients connect with --cluster %s --creds %s (nodes and operators: %s)\n", url, srv.ClientCreds(), srv.NodeCreds())
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(e.stderr, "umbra serve: "+format+"\n", args...)
	}
	// A NATS cluster may still be forming: wait for it (--wait).
	connect := func(ctx context.Context) (*protocol.Conn, error) { return s.dial(ctx, url, true) }
	c, n, err := startServing(ctx, connect, url, node.Config{Dir: filepath.Clean(s.Dir), Device: device, SnapshotEvery: s.Snap, Logf: logf,
		Placement: s.Place, ID: s.NodeID, Memory: s.MemMiB << 20, Limits: limits}, s.Wait, logf)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(e.stdout, "umbra serve: NATS %s, replicas under %s\n", url, s.Dir)
	<-ctx.Done()
	if s.Place {
		// Hand the shards over (make-before-break) before stopping; a
		// second Ctrl-C is not waited for, so this is bounded.
		lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := n.Leave(lctx); err != nil {
			logf("%v; stopping anyway", err)
		}
		cancel()
	}
	return n.Close()
}

// validateAuth refuses connection flags that mean nothing without --nats.
func (s *serveCmd) validateAuth() error {
	if s.NATS == "" {
		if g := s.given(); g != "" {
			return usagef("%s is for --nats: the embedded server's credentials are its own (DIR/creds)", g)
		}
		return nil
	}
	if s.Rotate {
		return usagef("--rotate-creds is for the embedded server (without --nats): an external server's keys are in its configuration")
	}
	return s.natsFlags.validate()
}

type clusterInfoJSON struct {
	Collection string `json:"collection"`
	Dim        int    `json:"dim"`
	Metric     string `json:"metric"`
	Shards     int    `json:"shards"`
	// NodeReplicas: nodes holding each shard under placement (0: the
	// default, 3).
	NodeReplicas int               `json:"node_replicas"`
	Rows         int               `json:"rows"`  // the shards' rows, summed
	Count        int               `json:"count"` // the same, as a store's info names it
	Precision    string            `json:"precision"`
	Backend      string            `json:"backend"` // in words: the cluster and its shards
	Streams      []clusterShardLog `json:"streams"`
	Nodes        []nodeJSON        `json:"nodes"` // every node's request counts and limits (info_nodes.go)
}

type clusterShardLog struct {
	Shard    int    `json:"shard"`
	Rows     int    `json:"rows"` // as one replica of the shard answers
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	Replicas int    `json:"replicas"`
}
