package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/keyrule"
	"github.com/umbravec/umbra/internal/metaindex"
	"github.com/umbravec/umbra/internal/resolve"
	"github.com/umbravec/umbra/meta"
)

// Client is a connection to an umbra cluster: the NATS system its nodes
// share.
type Client struct {
	x              *protocol.Conn // the connection, its buckets and the server's refusals
	timeout        time.Duration
	attemptTimeout time.Duration
	idBlock        uint64
	callsState                 // umbra_calls, for writes with an idempotency key (idempotent.go)
	conn           connOptions // Connect's (auth.go)
}

// ClientOption configures Connect.
type ClientOption func(*Client)

// Timeout is how long a call without a ctx deadline may take (default 10 s).
func Timeout(d time.Duration) ClientOption { return func(c *Client) { c.timeout = d } }

// AttemptTimeout is how long a search waits on one replica before asking
// another (default 3 s): a replica killed mid-call costs this much.
func AttemptTimeout(d time.Duration) ClientOption { return func(c *Client) { c.attemptTimeout = d } }

// ErrUnauthorized: the NATS server refused the connection's credentials
// (none given, or not keys it knows). Connect's error wraps it beside
// NATS's own, and names the server and the credentials file given.
var ErrUnauthorized = protocol.ErrUnauthorized

func newClientValue(opts []ClientOption) *Client {
	c := &Client{timeout: 10 * time.Second, attemptTimeout: 3 * time.Second, idBlock: defaultIDBlock}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// Connect connects to the NATS server at url (several, comma-separated:
// any of them), with the credentials and TLS settings opts give.
func Connect(ctx context.Context, url string, opts ...ClientOption) (*Client, error) {
	c := newClientValue(opts)
	x, err := protocol.Dial(ctx, url, protocol.DialConfig{Creds: c.conn.creds, Options: c.conn.nats, Node: c.conn.node})
	var auth *protocol.AuthError
	if errors.As(err, &auth) {
		return nil, auth
	}
	if err != nil {
		return nil, err
	}
	c.x = x
	return c, nil
}

// NewClient makes a Client on an open connection (Close leaves it open).
// Credentials, TLS and ClientCert are the connection's own then (set on
// it when it was made); AsNode needs a connection made with
// nats.CustomInboxPrefix("_UMBRA_NODE_INBOX"). The server's refusals of
// rights are not seen on such a connection (its error handler is the
// caller's), so errors name them less well.
func NewClient(ctx context.Context, nc *nats.Conn, opts ...ClientOption) (*Client, error) {
	c := newClientValue(opts)
	if c.conn.connLevel {
		return nil, errors.New("cluster.NewClient: Credentials, TLS and ClientCert apply to Connect; give nats.Connect the connection's own (nats.UserCredentials, nats.Nkey, nats.RootCAs)")
	}
	x, err := protocol.Open(ctx, nc, c.conn.node)
	if err != nil {
		return nil, fmt.Errorf("cluster.NewClient: %w", err)
	}
	c.x = x
	return c, nil
}

// Close closes the connection, if Connect opened it.
func (c *Client) Close() { c.x.Close() }

// Conn is the client's NATS connection.
func (c *Client) Conn() *nats.Conn { return c.x.NC }

// CollectionConfig describes a new collection.
type CollectionConfig struct {
	Dim    int
	Metric umbra.Metric // Cosine by default
	// Shards is the number of logical shards, fixed for the collection's
	// life (default 1).
	Shards int
	// Replicas of each shard's stream: 1 on one server, 3 (the default)
	// in a NATS cluster.
	Replicas int
	// NodeReplicas is how many nodes hold each shard when nodes run with
	// placement (NodeConfig.Placement): default 3, at most the live nodes.
	NodeReplicas int
	// MaxBytes bounds each shard's stream (default 1 GiB): past it, writes
	// are refused until snapshots let the stream be trimmed.
	MaxBytes int64
	// DedupWindow is how long JetStream remembers a write message's ID
	// (its streams' duplicate window), and so how long a write with an
	// IdempotencyKey can be retried and stored once: a retry later is a
	// new write. Default 10 minutes (DefaultDedupWindow), at most an hour;
	// the server keeps every message ID of the window in memory.
	DedupWindow time.Duration
}

// Create creates a collection, or opens it when one of that name exists
// with the same configuration (ErrCollectionExists otherwise).
func (c *Client) Create(ctx context.Context, name string, cfg CollectionConfig) (*Collection, error) {
	if err := protocol.CheckName(name); err != nil {
		return nil, err
	}
	if cfg.Dim < 1 || cfg.Dim > umbra.MaxDim {
		return nil, fmt.Errorf("%w: Dim %d", umbra.ErrInvalidConfig, cfg.Dim)
	}
	if cfg.Shards == 0 {
		cfg.Shards = 1
	}
	if cfg.Shards < 1 || cfg.Shards > protocol.MaxShards {
		return nil, fmt.Errorf("%w: Shards %d (1 to %d)", umbra.ErrInvalidConfig, cfg.Shards, protocol.MaxShards)
	}
	if cfg.NodeReplicas < 0 {
		return nil, fmt.Errorf("%w: NodeReplicas %d (0 for the default, 3)", umbra.ErrInvalidConfig, cfg.NodeReplicas)
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = c.x.Replicas
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 1 << 30
	}
	if cfg.DedupWindow == 0 {
		cfg.DedupWindow = protocol.DefaultDedupWindow
	}
	if cfg.DedupWindow < time.Second || cfg.DedupWindow > protocol.MaxDedupWindow {
		return nil, fmt.Errorf("%w: DedupWindow %v (1s to %v, 0 for the default %v)", umbra.ErrInvalidConfig, cfg.DedupWindow, protocol.MaxDedupWindow, protocol.DefaultDedupWindow)
	}
	meta := &protocol.CollectionRecord{Version: 1, Name: name, Dim: cfg.Dim, Metric: cfg.Metric.String(), Shards: cfg.Shards,
		Replicas: cfg.Replicas, NodeReplicas: cfg.NodeReplicas, MaxBytes: cfg.MaxBytes, Created: time.Now().UTC(), DedupWindow: cfg.DedupWindow}
	if e, err := c.x.Colls.Get(ctx, name); err == nil {
		old, err := protocol.UnmarshalRecord(e.Value())
		if err != nil {
			return nil, err
		}
		if err := protocol.SameCollection(old, meta); err != nil {
			return nil, err
		}
		return c.open(old)
	}
	// A node creates it (a client's credentials may not create streams);
	// where none answers, the client itself.
	created, err := c.createThroughNode(ctx, meta)
	if err != nil {
		return nil, err
	}
	return c.open(created)
}

// Open opens an existing collection.
func (c *Client) Open(ctx context.Context, name string) (*Collection, error) {
	if err := protocol.CheckName(name); err != nil {
		return nil, err
	}
	e, err := c.x.Colls.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrNoCollection, name)
	}
	if err != nil {
		return nil, err
	}
	meta, err := protocol.UnmarshalRecord(e.Value())
	if err != nil {
		return nil, err
	}
	return c.open(meta)
}

func (c *Client) open(meta *protocol.CollectionRecord) (*Collection, error) {
	metric, err := meta.ParseMetric()
	if err != nil {
		return nil, err
	}
	fields, err := meta.Schema()
	if err != nil {
		return nil, err
	}
	return &Collection{c: c, meta: meta, metric: metric, token: make(token, meta.Shards), fields: fields}, nil
}

// token is how far a client's writes reached: the stream sequence of its
// last write to each shard (Collection.Token).
type token = []uint64

// Collection is a handle on one collection: the same calls as an
// engine.Index, answered by the cluster. A handle remembers the token of
// its own writes, and its searches read them.
type Collection struct {
	c      *Client
	meta   *protocol.CollectionRecord
	metric umbra.Metric
	mu     sync.Mutex
	token  token
	fields map[string]meta.Kind // the schema as last read; a field's kind never changes
	ids    idAlloc              // the handle's block of IDs (ids.go)
	closed atomic.Bool          // Close was called (get.go)
}

// NodeReplicas is how many nodes hold each shard under placement, as the
// collection was created with (0: the default, 3).
func (col *Collection) NodeReplicas() int { return col.meta.NodeReplicas }

// Token returns how far the handle's writes reached: the stream sequence
// of its last write to each shard, a copy. A search given it (AfterToken)
// is answered only by replicas that have applied that far: another
// handle, or another process, reads this one's writes (read-your-writes).
func (col *Collection) Token() []uint64 {
	col.mu.Lock()
	defer col.mu.Unlock()
	return slices.Clone(col.token)
}

func (col *Collection) advance(shard int, seq uint64) {
	col.mu.Lock()
	col.token[shard] = max(col.token[shard], seq)
	col.mu.Unlock()
}

// readAll reads a RowSource whole.
func readAll(rows umbra.RowSource, dim int) ([]float32, error) {
	if rows == nil {
		return nil, fmt.Errorf("%w: no rows", umbra.ErrInvalidOption)
	}
	if rows.Dim() != dim {
		return nil, fmt.Errorf("%w: rows of dimension %d for a collection of dimension %d", umbra.ErrDimMismatch, rows.Dim(), dim)
	}
	n := rows.Rows()
	out := make([]float32, 0, max(n, 0)*dim)
	buf := make([]float32, 1024*dim)
	for {
		got, err := rows.ReadRows(buf)
		out = append(out, buf[:got*dim]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", umbra.ErrSource, err)
		}
	}
	if n >= 0 && len(out)/dim != n {
		return nil, fmt.Errorf("%w: the source announced %d rows and gave %d", umbra.ErrSource, n, len(out)/dim)
	}
	return out, nil
}

// checkRows refuses what every replica would refuse, before anything is
// written.
func (col *Collection) checkRows(data []float32) error {
	dim := col.meta.Dim
	for i := 0; i < len(data)/dim; i++ {
		zero := true
		for j, v := range data[i*dim : (i+1)*dim] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%w: vector %d, component %d", umbra.ErrNonFinite, i, j)
			}
			zero = zero && v == 0
		}
		if zero && col.metric == umbra.Cosine {
			return fmt.Errorf("%w: vector %d", umbra.ErrZeroVector, i)
		}
	}
	return nil
}

func checkIDs(ids []uint64) error {
	seen := make(map[uint64]int, len(ids))
	for i, id := range ids {
		if id >= protocol.ReservedIDs {
			return fmt.Errorf("%w: ID %d (argument %d): IDs from %d up are the cluster's", ErrReservedID, id, i, protocol.ReservedIDs)
		}
		if j, ok := seen[id]; ok {
			return fmt.Errorf("%w: ID %d (arguments %d and %d)", umbra.ErrDuplicateID, id, j, i)
		}
		seen[id] = i
	}
	return nil
}

func checkKeys(keys []string) error {
	seen := make(map[string]int, len(keys))
	for i, k := range keys {
		if err := keyrule.Check(k); err != nil {
			return fmt.Errorf("%w: argument %d: %v", umbra.ErrInvalidKey, i, err)
		}
		if j, ok := seen[k]; ok {
			return fmt.Errorf("%w: key %s (arguments %d and %d)", umbra.ErrDuplicateID, keyrule.Quote(k), j, i)
		}
		seen[k] = i
	}
	return nil
}

// Add stores rows under new IDs: the caller's (WithIDs), new ones for new
// keys (WithKeys), or new ones the cluster assigns. It returns the IDs.
//
// Assigned IDs are unique and, within one call, consecutive; along one
// handle's calls they increase; they are past every ID a caller named
// (WithIDs) in a call that ended before this one began. Unlike a local
// store's, they need not be past IDs assigned to other handles: each
// handle takes its IDs from a block it reserved (IDBlock), and IDs a
// block leaves unused are skipped.
//
// Each shard's part of the call is one or more stream messages, each
// applied whole or not at all; a call that spans shards is not atomic as a
// whole: when a replica refuses one part (an ID already stored), the
// others stand, and the error says so.
func (col *Collection) Add(ctx context.Context, rows umbra.RowSource, opts ...umbra.WriteOption) ([]uint64, error) {
	return col.write(ctx, protocol.OpAdd, rows, opts)
}

// Upsert stores rows under the caller's IDs or keys, replacing stored
// ones.
func (col *Collection) Upsert(ctx context.Context, rows umbra.RowSource, opts ...umbra.WriteOption) ([]uint64, error) {
	return col.write(ctx, protocol.OpUpsert, rows, opts)
}

// Delete removes the rows named by WithIDs or WithKeys.
func (col *Collection) Delete(ctx context.Context, opts ...umbra.WriteOption) error {
	_, err := col.write(ctx, protocol.OpDelete, nil, opts)
	return err
}

// writeOptions are a write's options as the collection reads them, from
// the resolved umbra.WriteOptions.
type writeOptions struct {
	ids      []uint64
	keys     []string
	idsSet   bool
	keysSet  bool
	noWait   bool
	meta     []meta.Fields
	metaSet  bool
	payloads [][]byte
	paySet   bool
	key      string // IdempotencyKey (idempotent.go)
	keySet   bool
}

// verbs name the write operations as the API calls them.
var verbs = map[byte]string{protocol.OpAdd: "Add", protocol.OpUpsert: "Upsert", protocol.OpDelete: "Delete"}

// collectWrite resolves opts for the write op (the rules of every
// collection); a cluster names a write's rows by IDs or by keys, not both.
func collectWrite(op byte, opts []umbra.WriteOption) (writeOptions, error) {
	p, err := resolve.Write(verbs[op], opts)
	if err != nil {
		return writeOptions{}, err
	}
	if p.IDs != nil && p.Keys != nil {
		return writeOptions{}, fmt.Errorf("%w: WithIDs and WithKeys together: name rows by IDs or by keys, not both, in a cluster", umbra.ErrInvalidOption)
	}
	return writeOptions{
		ids: p.IDs, keys: p.Keys, idsSet: p.IDs != nil, keysSet: p.Keys != nil, noWait: p.NoWait,
		meta: p.Meta, metaSet: p.Meta != nil, payloads: p.Payloads, paySet: p.Payloads != nil,
		key: p.IdempotencyKey, keySet: p.IdempotencyKey != "",
	}, nil
}

func (col *Collection) write(ctx context.Context, op byte, rows umbra.RowSource, opts []umbra.WriteOption) ([]uint64, error) {
	if err := col.live(); err != nil {
		return nil, err
	}
	o, err := collectWrite(op, opts)
	if err != nil {
		return nil, err
	}
	dim := col.meta.Dim
	var data []float32
	n := 0
	if op == protocol.OpDelete {
		if !o.idsSet && !o.keysSet {
			return nil, fmt.Errorf("%w: Delete names no rows (WithIDs or WithKeys)", umbra.ErrInvalidOption)
		}
		n = len(o.ids) + len(o.keys)
	} else {
		var err error
		if data, err = readAll(rows, dim); err != nil {
			return nil, err
		}
		n = len(data) / dim
		if err := col.checkRows(data); err != nil {
			return nil, err
		}
		if op == protocol.OpUpsert && !o.idsSet && !o.keysSet {
			return nil, fmt.Errorf("%w: Upsert names no rows (WithIDs or WithKeys)", umbra.ErrInvalidOption)
		}
		if (o.idsSet && len(o.ids) != n) || (o.keysSet && len(o.keys) != n) {
			return nil, fmt.Errorf("%w: %d vectors, %d IDs or keys", umbra.ErrIDCount, n, len(o.ids)+len(o.keys))
		}
	}
	if op == protocol.OpDelete && (o.metaSet || o.paySet) {
		return nil, fmt.Errorf("%w: Delete takes no metadata or payloads", umbra.ErrInvalidOption)
	}
	switch {
	case o.metaSet && len(o.meta) != n:
		return nil, fmt.Errorf("%w: %d metadata rows for %d vectors", umbra.ErrIDCount, len(o.meta), n)
	case o.paySet && len(o.payloads) != n:
		return nil, fmt.Errorf("%w: %d payloads for %d vectors", umbra.ErrIDCount, len(o.payloads), n)
	}
	if n == 0 {
		return []uint64{}, nil
	}
	if o.keysSet {
		if err := checkKeys(o.keys); err != nil {
			return nil, err
		}
	}
	if o.idsSet {
		if err := checkIDs(o.ids); err != nil {
			return nil, err
		}
	}
	for i, p := range o.payloads {
		if len(p) > umbra.DefaultMaxPayloadBytes {
			return nil, fmt.Errorf("%w: the payload of vector %d is %d bytes, over the limit of %d", umbra.ErrTooLarge, i, len(p), umbra.DefaultMaxPayloadBytes)
		}
	}
	var encMeta [][]byte
	if o.metaSet {
		// The schema first: a new field's kind is recorded before any
		// write that gives it is published, and a value of another kind
		// than the record's is refused here.
		if err := col.ensureSchema(ctx, o.meta); err != nil {
			return nil, err
		}
		encMeta = make([][]byte, n)
		for i, f := range o.meta {
			encMeta[i] = metaindex.AppendBinary(nil, f)
		}
	}
	S := col.meta.Shards
	limit := int(col.c.x.NC.MaxPayload()) - protocol.ChunkRoom
	// With an idempotency key the call is recorded first, or follows the
	// record of the call that used the key before: the same assigned IDs,
	// the same cut into messages (idempotent.go).
	call := nats.NewInbox()[len(nats.InboxPrefix):]
	var rec *callRecord
	if o.keySet {
		want := callRecord{Hash: callHash(op, &o, data, encMeta), Limit: limit}
		var assign func() (uint64, error)
		if op != protocol.OpDelete && !o.idsSet && !o.keysSet {
			assign = func() (uint64, error) { return col.assign(ctx, uint64(n)) }
		}
		r, err := col.claimCall(ctx, o.key, want, assign)
		if err != nil {
			return nil, err
		}
		if r.Limit > limit {
			return nil, fmt.Errorf("idempotency key %s: its first call cut its messages under %d bytes, over this connection's max payload (%d bytes); retry through a server with the same max_payload", o.key, r.Limit, col.c.x.NC.MaxPayload())
		}
		rec, limit, call = &r, r.Limit, o.key+"."+r.Hash[:16]
	}
	shardOf := make([]int, n)
	ids := o.ids
	switch {
	case o.keysSet:
		for i, k := range o.keys {
			shardOf[i] = protocol.ShardOfKey(k, S)
		}
		if op != protocol.OpDelete {
			var err error
			if ids, err = col.idsForKeys(ctx, shardOf); err != nil {
				return nil, err
			}
		} else {
			ids = make([]uint64, n) // unused: the replica looks the keys up
		}
	case o.idsSet:
		if op != protocol.OpDelete {
			if err := col.raiseFloor(ctx, slices.Max(ids)+1); err != nil {
				return nil, err
			}
		}
	default:
		var first uint64
		if rec != nil {
			first = rec.First
		} else {
			var err error
			if first, err = col.assign(ctx, uint64(n)); err != nil {
				return nil, err
			}
		}
		ids = make([]uint64, n)
		for i := range ids {
			ids[i] = first + uint64(i)
		}
	}
	if !o.keysSet {
		for i, id := range ids {
			shardOf[i] = protocol.ShardOfID(id, S)
		}
	}
	// Each shard's rows, in call order, cut into messages under the max
	// payload.
	type part struct {
		msg  *protocol.WriteMsg
		rows []int // the call's row indices
	}
	byShard := make([][]part, S)
	for i := range n {
		s := shardOf[i]
		ps := byShard[s]
		rowBytes := 8 + 4*dim*btoi(op != protocol.OpDelete)
		if o.keysSet {
			rowBytes += 4 + len(o.keys[i])
		}
		if o.metaSet {
			rowBytes += 4 + len(encMeta[i])
		}
		if o.paySet {
			rowBytes += 4 + len(o.payloads[i])
		}
		if rowBytes+protocol.WriteHeader > limit {
			return nil, fmt.Errorf("%w: row %d takes %d bytes, over the NATS max payload of %d (a server's max_payload can be raised to 8 MB; umbra's embedded server runs with 8 MiB)", umbra.ErrTooLarge, i, rowBytes, col.c.x.NC.MaxPayload())
		}
		if len(ps) == 0 || ps[len(ps)-1].msg.Size()+rowBytes > limit {
			m := &protocol.WriteMsg{Op: op, Dim: dim, MetaSet: o.metaSet, PaySet: o.paySet}
			if o.keysSet {
				m.Keys = []string{}
			}
			ps = append(ps, part{msg: m})
		}
		p := &ps[len(ps)-1]
		p.msg.IDs = append(p.msg.IDs, ids[i])
		if o.keysSet {
			p.msg.Keys = append(p.msg.Keys, o.keys[i])
		}
		if o.metaSet {
			p.msg.Meta = append(p.msg.Meta, encMeta[i])
		}
		if o.paySet {
			p.msg.Payloads = append(p.msg.Payloads, o.payloads[i])
		}
		if op != protocol.OpDelete {
			p.msg.Rows = append(p.msg.Rows, data[i*dim:(i+1)*dim]...)
		}
		p.rows = append(p.rows, i)
		byShard[s] = ps
	}
	// Publish every shard's messages, shards in parallel, each message
	// under a stable ID so that a retry (ours, after a timeout or a leader
	// election; or the caller's, with the same idempotency key) is stored
	// once.
	seqs := make([][]uint64, S)
	errs := make([]error, S)
	var dups atomic.Bool
	var wg sync.WaitGroup
	for s, ps := range byShard {
		if len(ps) == 0 {
			continue
		}
		wg.Go(func() {
			for j, p := range ps {
				seq, dup, err := col.publishMsg(ctx, s, fmt.Sprintf("%s.%d.%d", call, s, j), p.msg.Encode())
				if err == nil {
					seqs[s] = append(seqs[s], seq)
					col.advance(s, seq)
					if dup {
						dups.Store(true)
					}
					err = publishedHook(s, j)
				}
				if err != nil {
					errs[s] = fmt.Errorf("shard %d: %w", s, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("write not acknowledged whole (the shards not named here were; a message is applied whole or not at all): %w", err)
	}
	if op == protocol.OpDelete {
		ids = nil
	}
	if o.noWait && !(dups.Load() && o.keysSet && op != protocol.OpDelete) {
		// (A retry with a key whose messages were stored before waits
		// for their outcomes: the IDs its keys got are in them.)
		if op == protocol.OpUpsert && o.keysSet {
			// Unknown until applied: the IDs chosen for new keys stand
			// for the rows; a stored key keeps its own ID.
		}
		return ids, nil
	}
	// Wait for one replica of each shard to apply the messages and report
	// how: every replica reaches the same outcome.
	reqs := map[int][]byte{}
	for s, ss := range seqs {
		if len(ss) > 0 {
			reqs[s] = (&protocol.Request{Kind: protocol.KindAwait, MinSeq: slices.Max(ss), WaitMs: 1000, Seqs: ss}).Encode()
		}
	}
	replies, err := col.c.fanout(ctx, col.meta.Name, protocol.KindAwait, reqs)
	if err != nil {
		return nil, fmt.Errorf("%w (token %v): %w", ErrOutcomeUnknown, col.Token(), err)
	}
	var refusals []error
	for s, ps := range byShard {
		for j, p := range ps {
			if len(replies[s].Outcomes) != len(ps) {
				return nil, fmt.Errorf("%w: shard %d reported %d outcomes for %d messages", ErrOutcomeUnknown, s, len(replies[s].Outcomes), len(ps))
			}
			out := replies[s].Outcomes[j]
			if out.Code != protocol.CodeOK {
				refusals = append(refusals, fmt.Errorf("%w: shard %d: %s", protocol.CodeErr(out.Code), s, out.Msg))
				continue
			}
			// The IDs as the stored message gave them: the upserted keys'
			// own, or a first call's (a retry with its key).
			if (op == protocol.OpUpsert && o.keysSet || rec != nil && op != protocol.OpDelete) && len(out.IDs) == len(p.rows) {
				for k, i := range p.rows {
					ids[i] = out.IDs[k]
				}
			}
		}
	}
	if len(refusals) > 0 {
		total := 0
		for _, ps := range byShard {
			total += len(ps)
		}
		return nil, fmt.Errorf("%d of the call's %d shard messages refused, the others applied: %w", len(refusals), total, errors.Join(refusals...))
	}
	return ids, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// idsForKeys chooses, for each key, the ID it gets if it is new: one the
// handle has not given before (from its block), in the key's shard.
func (col *Collection) idsForKeys(ctx context.Context, shardOf []int) ([]uint64, error) {
	S := col.meta.Shards
	want := make([]int, S)
	for _, s := range shardOf {
		want[s]++
	}
	free := make([][]uint64, S)
	for {
		short := 0
		for s := range S {
			short = max(short, want[s]-len(free[s]))
		}
		if short <= 0 {
			break
		}
		block := uint64(short*S + 16)
		first, err := col.assign(ctx, block)
		if err != nil {
			return nil, err
		}
		for id := first; id < first+block; id++ {
			s := protocol.ShardOfID(id, S)
			free[s] = append(free[s], id)
		}
	}
	ids := make([]uint64, len(shardOf))
	for i, s := range shardOf {
		ids[i], free[s] = free[s][0], free[s][1:]
	}
	return ids, nil
}

// publish stores one message in shard's stream, retrying under the same
// message ID until JetStream acknowledges it (a retry of a stored message
// is answered with its first sequence) or ctx ends.
func (col *Collection) publish(ctx context.Context, shard int, msgID string, data []byte) (uint64, error) {
	seq, _, err := col.publishMsg(ctx, shard, msgID, data)
	return seq, err
}

// publishMsg is publish, saying also whether JetStream had the message
// already (a duplicate: seq is the first one's).
func (col *Collection) publishMsg(ctx context.Context, shard int, msgID string, data []byte) (uint64, bool, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, col.c.timeout)
		defer cancel()
	}
	backoff := 50 * time.Millisecond
	var last error
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ack, err := col.c.x.JS.PublishMsg(actx, &nats.Msg{Subject: protocol.WriteSubject(col.meta.Name, shard), Data: data},
			jetstream.WithMsgID(msgID), jetstream.WithExpectStream(protocol.StreamName(col.meta.Name, shard)))
		cancel()
		if err == nil {
			return ack.Sequence, ack.Duplicate, nil
		}
		last = err
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode != 0 && !retryable(apiErr) {
			return 0, false, err
		}
		select {
		case <-ctx.Done():
			return 0, false, fmt.Errorf("not acknowledged: %w (last: %v)", ctx.Err(), last)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// retryable says whether a JetStream refusal may pass (a leader election,
// a cluster not ready) rather than hold (the stream is full, the message
// too large).
func retryable(e *jetstream.APIError) bool {
	return e.Code == 503 || bytes.Contains([]byte(e.Description), []byte("no leader")) || bytes.Contains([]byte(e.Description), []byte("unavailable"))
}
