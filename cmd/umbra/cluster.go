package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/umbravec/umbra"
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
	var cauth *cluster.AuthError
	var refused error
	switch {
	case errors.As(err, &auth):
		refused = auth.Err
	case errors.As(err, &cauth):
		refused = cauth.Err
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
--cluster URL' counts the refusals). Stop it with Ctrl-C.`
}

func (*serveCmd) Examples() []string {
	return []string{
		"umbra serve --dir node1",
		"umbra build --cluster nats://127.0.0.1:4222 --creds node1/creds/client.nk --collection docs --data docs.npy --shards 4",
		"umbra search --cluster nats://127.0.0.1:4222 --creds node1/creds/client.nk --collection docs --queries q.npy --k 10 --json",
		"umbra serve --nats tls://nats1:4222 --creds /etc/umbra/node.nk --tls-ca /etc/umbra/ca.pem --dir node2",
	}
}

func (s *serveCmd) Run(ctx context.Context, e *env) error {
	device, err := engine.ParseDevice(string(s.Device))
	if err != nil {
		return usagef("%s", err)
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

func (b *buildCmd) runCluster(ctx context.Context, e *env) error {
	metric, err := umbra.ParseMetric(string(b.Metric))
	if err != nil {
		return usagef("%s", err)
	}
	src, err := openRows(ctx, "--data", b.Data)
	if err != nil {
		return err
	}
	defer src.Close()
	c, err := b.connect(ctx, b.Cluster, false)
	if err != nil {
		return err
	}
	defer c.Close()
	col, err := c.Create(ctx, b.Collection, cluster.CollectionConfig{Dim: src.Dim(), Metric: metric, Shards: b.Shards,
		NodeReplicas: b.NodeReplicas})
	if err != nil {
		return err
	}
	return clusterWrite(ctx, e, col, src, b.IDs, b.Keys, b.Attr, false, b.key(e))
}

func (c *addCmd) runCluster(ctx context.Context, e *env) error {
	src, err := openRows(ctx, "--data", c.Data)
	if err != nil {
		return err
	}
	defer src.Close()
	cl, col, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	return clusterWrite(ctx, e, col, src, c.IDs, c.Keys, c.Attr, c.Upsert, c.key(e))
}

// clusterAttrs reads --meta and --payload into a cluster write's options
// (the collection checks their counts against the rows it reads).
func clusterAttrs(ctx context.Context, a attrFlags, rows int, what string) ([]umbra.WriteOption, error) {
	fields, payloads, err := a.read(ctx, rows, what)
	if err != nil {
		return nil, err
	}
	var opts []umbra.WriteOption
	if a.Meta != "" {
		opts = append(opts, umbra.WithMeta(fields...))
	}
	if a.Payload != "" {
		opts = append(opts, umbra.WithPayloads(payloads...))
	}
	return opts, nil
}

func clusterWrite(ctx context.Context, e *env, col *cluster.Collection, src *fileRows, idsPath, keysPath string, attr attrFlags, upsert bool, key string) error {
	opts, err := clusterAttrs(ctx, attr, src.Rows(), "--data")
	if err != nil {
		return err
	}
	opts = append(opts, umbra.IdempotencyKey(key))
	if idsPath != "" {
		ids, err := readIDs(ctx, e, "--ids", idsPath)
		if err != nil {
			return err
		}
		opts = append(opts, umbra.WithIDs(ids...))
	}
	if keysPath != "" {
		keys, _, err := readKeys(ctx, "--keys", keysPath, everyRowKeyed)
		if err != nil {
			return err
		}
		opts = append(opts, umbra.WithKeys(keys...))
	}
	var ids []uint64
	if upsert {
		ids, err = col.Upsert(ctx, src, opts...)
	} else {
		ids, err = col.Add(ctx, src, opts...)
	}
	if err != nil {
		if serr := src.sourceError(err); serr != nil {
			return serr
		}
		if aerr := attr.attrError(err); aerr != nil {
			return aerr
		}
		return retryWith(err, key)
	}
	fmt.Fprintf(e.stdout, "wrote %d vectors to collection %s (token %v, idempotency key %s)\n", len(ids), col.Name(), col.Token(), key)
	return nil
}

func (c *deleteCmd) runCluster(ctx context.Context, e *env) error {
	var opt umbra.WriteOption
	switch {
	case c.IDs != "":
		ids, err := parseIDList(c.IDs)
		if err != nil {
			return usagef("%s", err)
		}
		opt = umbra.WithIDs(ids...)
	case c.IDsFile != "":
		ids, err := readIDs(ctx, e, "--ids-file", c.IDsFile)
		if err != nil {
			return err
		}
		opt = umbra.WithIDs(ids...)
	case c.Keys != "":
		keys, err := parseKeyList("--keys", c.Keys)
		if err != nil {
			return usagef("%s", err)
		}
		opt = umbra.WithKeys(keys...)
	default:
		keys, _, err := readKeys(ctx, "--keys-file", c.KeysFile, keySet)
		if err != nil {
			return err
		}
		opt = umbra.WithKeys(keys...)
	}
	cl, col, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	key := c.key(e)
	if err := col.Delete(ctx, opt, umbra.IdempotencyKey(key)); err != nil {
		return retryWith(err, key)
	}
	fmt.Fprintf(e.stdout, "deleted from collection %s (token %v, idempotency key %s)\n", col.Name(), col.Token(), key)
	return nil
}

type clusterInfoJSON struct {
	Collection string `json:"collection"`
	Dim        int    `json:"dim"`
	Metric     string `json:"metric"`
	Shards     int    `json:"shards"`
	// NodeReplicas: nodes holding each shard under placement (0: the
	// default, 3).
	NodeReplicas int               `json:"node_replicas"`
	Rows         int               `json:"rows"` // the shards' rows, summed
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

func (c *infoCmd) runCluster(ctx context.Context, e *env) error {
	if c.Collection == "" {
		return c.runNodes(ctx, e)
	}
	cl, col, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	js, err := jetstream.New(cl.Conn())
	if err != nil {
		return err
	}
	out := clusterInfoJSON{Collection: col.Name(), Dim: col.Dim(), Metric: col.Metric().String(), Shards: col.Shards(),
		NodeReplicas: col.NodeReplicas()}
	rows, err := col.ShardRows(ctx)
	if err != nil {
		return err
	}
	for s := range col.Shards() {
		out.Rows += rows[s]
		st, err := js.Stream(ctx, fmt.Sprintf("UMBRA_%s_%d", col.Name(), s))
		if err != nil {
			return fmt.Errorf("shard %d: %w", s, err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			return fmt.Errorf("shard %d: %w", s, err)
		}
		out.Streams = append(out.Streams, clusterShardLog{Shard: s, Rows: rows[s], Messages: info.State.Msgs, Bytes: info.State.Bytes,
			FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq, Replicas: info.Config.Replicas})
	}
	if out.Nodes, err = clusterNodes(ctx, cl); err != nil {
		return err
	}
	if c.JSON {
		return json.NewEncoder(e.stdout).Encode(out)
	}
	fmt.Fprintf(e.stdout, "collection %s: %d rows, dimension %d, %s, %d shards", out.Collection, out.Rows, out.Dim, out.Metric, out.Shards)
	if out.NodeReplicas > 0 {
		fmt.Fprintf(e.stdout, ", %d nodes each under placement", out.NodeReplicas)
	}
	fmt.Fprintln(e.stdout)
	for _, s := range out.Streams {
		fmt.Fprintf(e.stdout, "  shard %d: %d rows; stream: %d messages, %d bytes, sequences %d–%d, R%d\n", s.Shard, s.Rows, s.Messages, s.Bytes, s.FirstSeq, s.LastSeq, s.Replicas)
	}
	writeNodes(e.stdout, out.Nodes)
	return nil
}

func (o *searchCmd) runCluster(ctx context.Context, e *env) error {
	var allow []uint64
	var err error
	if o.Allow != "" {
		if allow, err = readIDs(ctx, e, "--allow", o.Allow); err != nil {
			return err
		}
	}
	queries, err := loadMatrix(ctx, e, "--queries", o.Queries)
	if err != nil {
		return err
	}
	cl, col, err := o.open(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	qs := make([][]float32, queries.Rows)
	for i := range qs {
		qs[i] = queries.Row(i)
	}
	var opts []umbra.SearchOption
	if o.AllowKeys != "" {
		if allow, err = o.allowedClusterKeys(ctx, e, col); err != nil {
			return err
		}
	}
	if o.Allow != "" || o.AllowKeys != "" {
		opts = append(opts, umbra.Allow(allow...))
	}
	if o.filter != nil {
		opts = append(opts, umbra.Where(*o.filter))
	}
	if o.WithPayload {
		opts = append(opts, umbra.WithPayload())
	}
	start := time.Now()
	threshold, ranged := o.threshold()
	var all [][]umbra.Hit
	if ranged {
		if o.K > 0 {
			opts = append(opts, umbra.MaxHits(int(o.K)))
		}
		for i, q := range qs {
			hits, err := col.SearchRange(ctx, q, float32(threshold), opts...)
			if err != nil {
				return fmt.Errorf("query %d: %w", i, err)
			}
			all = append(all, hits)
		}
	} else if all, err = col.SearchBatch(ctx, qs, int(o.K), opts...); err != nil {
		return fmt.Errorf("search: %w", err)
	}
	_ = start
	out := searchJSON{Backend: "cluster", Metric: col.Metric().String(), K: int(o.K), Dim: col.Dim(), Store: o.Cluster + "#" + o.Collection,
		Queries: o.Queries, Allow: o.Allow, Where: o.Where, Results: make([]resultJSON, len(all))}
	if given := float64(threshold); ranged && col.Metric().HigherIsBetter() {
		out.MinScore = &given
	} else if ranged {
		out.MaxDistance = &given
	}
	for i, hits := range all {
		r := resultJSON{Hits: make([]hitJSON, len(hits))}
		for j, h := range hits {
			r.Hits[j] = hitJSON{ID: h.ID, Key: h.Key, Score: score(h.Score)}
			if o.WithPayload {
				r.Hits[j].Payload = payloadJSON([]byte(h.Payload))
			}
		}
		out.Results[i] = r
	}
	if o.JSON {
		return json.NewEncoder(e.stdout).Encode(out)
	}
	return writeSearchText(e.stdout, out)
}

// allowedClusterKeys reads --allow-keys and maps the keys to IDs through
// the collection: a key it does not hold is an error naming it, as with
// --store.
func (o *searchCmd) allowedClusterKeys(ctx context.Context, e *env, col *cluster.Collection) ([]uint64, error) {
	return o.allowKeyIDs(ctx, e, "collection "+col.Name(), func(keys []string) (func(string) (uint64, bool), error) {
		held, err := col.Lookup(ctx, keys...)
		return func(k string) (uint64, bool) { id, ok := held[k]; return id, ok }, err
	})
}
