package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// boundedNode is an embedded server, a client, a collection of rows and a
// node with limits, in the test process.
func boundedNode(t *testing.T, lim protocol.Limits, rows int) (*Client, *Collection, *node.Node) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a NATS server (skipped under -short)")
	}
	dir, _, c := serverAndClient(t, Timeout(30*time.Second))
	ctx := context.Background()
	const dim = 4
	col, err := c.Create(ctx, "lim", CollectionConfig{Dim: dim, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := testkit.Rand(t)
	vs := make([][]float32, rows)
	pays := make([][]byte, rows)
	fields := make([]meta.Fields, rows)
	for i := range vs {
		vs[i] = testkit.Grid(r, dim)
		vs[i][0] = 1 // every row within a cosine of 0 of the queries below
		pays[i] = []byte(fmt.Sprintf("payload %d", i))
		fields[i] = meta.Fields{"user": meta.KeywordOf(fmt.Sprintf("u%d", i))}
	}
	if _, err := col.Add(ctx, umbra.Vectors(vs), umbra.WithPayloads(pays...), umbra.WithMeta(fields...), umbra.NoWait()); err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(ctx, c.x, node.Config{Dir: dir + "/node", Device: engine.CPU, Logf: t.Logf, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return c, col, n
}

// rawRequest sends body to shard 0 of collection lim and returns the
// reply, or fails the test when none comes within a minute.
func rawRequest(t *testing.T, c *Client, coll string, body []byte) *protocol.Reply {
	t.Helper()
	m, err := c.x.NC.Request(protocol.QuerySubject(coll, 0), body, time.Minute)
	if err != nil {
		t.Fatalf("no answer to the request: %v", err)
	}
	p, err := protocol.DecodeReply(m.Data, protocol.KindSearch)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A request that asks to wait 49 days for a write that never comes is
// answered "behind" after the node's MaxWait: it is answered at all
// before the test's deadline, and counted as a clamped wait.
func TestNodeClampsWait(t *testing.T) {
	t.Parallel()
	c, col, n := boundedNode(t, protocol.Limits{MaxWait: 300 * time.Millisecond}, 10)
	body := (&protocol.Request{Kind: protocol.KindSearch, MinSeq: 1 << 62, WaitMs: math.MaxUint32, K: 3, Dim: 4, Queries: []float32{1, 0, 0, 0}}).Encode()
	p := rawRequest(t, c, col.meta.Name, body)
	if p.Status != protocol.StatusBehind {
		t.Fatalf("status %d (%s), want behind", p.Status, p.Msg)
	}
	// A request's charge is given back just after its reply is sent.
	waitFor(t, "every charge given back", func() bool { s := n.Stats(); return s.InFlight == 0 && s.InFlightBytes == 0 })
	s := n.Stats()
	if s.ClampedWaits != 1 || s.Behind != 1 || s.InFlight != 0 || s.InFlightBytes != 0 {
		t.Fatalf("stats %+v: want one clamped wait answered behind, nothing in flight", s)
	}
}

// Requests over a limit are refused at once with an error naming it, and
// counted; the client's calls meeting them fail with
// ErrShardsUnavailable naming the limit; requests within them are
// answered exactly as before.
func TestNodeRefusesOverLimits(t *testing.T) {
	const rows = 200
	c, col, n := boundedNode(t, protocol.Limits{MaxHits: 100, MaxInFlight: 1, MaxRequestBytes: 1 << 16, MaxInFlightBytes: 1 << 20}, rows)
	ctx := context.Background()
	q := []float32{1, 0, 0, 0}
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	refused := func(what string, err error, limit string) {
		t.Helper()
		if !errors.Is(err, ErrShardsUnavailable) || !strings.Contains(err.Error(), limit) {
			t.Fatalf("%s: %v; want ErrShardsUnavailable naming %s", what, err, limit)
		}
	}
	// k over MaxHits.
	_, err := col.Search(short(), q, 101)
	refused("k 101", err, "1 queries × k 101 asks 101 hits, over the node's limit of 100 (Limits.MaxHits)")
	// A range search without MaxHits whose answer is over MaxHits; with
	// MaxHits it is answered.
	_, err = col.SearchRange(short(), q, -1)
	refused("range without MaxHits", err, "holds over 100 hits")
	hits, err := col.SearchRange(ctx, q, -1, umbra.MaxHits(50), umbra.WithPayload())
	if err != nil || len(hits) != 50 {
		t.Fatalf("range with MaxHits 50: %d hits, %v", len(hits), err)
	}
	for _, h := range hits {
		if !strings.HasPrefix(h.Payload, "payload ") {
			t.Fatalf("hit %+v without its payload", h)
		}
	}
	// A where filter is charged 128 bytes a byte (what reading it may
	// take): one of ~16 KB is over the 1 MiB in flight; a small one is
	// answered.
	var conds []meta.Filter
	for i := range 700 {
		conds = append(conds, meta.Eq("user", meta.KeywordOf(fmt.Sprintf("u%d", i))))
	}
	_, err = col.Search(short(), q, 5, umbra.Where(meta.Or(conds...)))
	refused("a filter of 700 conditions", err, "over the node's limit of 1048576 bytes in flight (Limits.MaxInFlightBytes)")
	if hits, err := col.Search(ctx, q, 5, umbra.Where(meta.Or(conds[:3]...))); err != nil || len(hits) != 3 {
		t.Fatalf("a filter of 3 conditions: %v, %v", hits, err)
	}
	// A get of more rows than MaxHits is answered in pieces of at most
	// MaxHits rows, each cut short by the replica.
	recs, err := col.Get(ctx, umbra.Selection{Payloads: true})
	if err != nil || len(recs) != rows {
		t.Fatalf("get of every row: %d rows, %v", len(recs), err)
	}
	for i, rec := range recs {
		if rec.ID != uint64(i) || !strings.HasPrefix(string(rec.Payload), "payload ") {
			t.Fatalf("row %d: %+v", i, rec)
		}
	}
	// A request over MaxRequestBytes.
	allow := make([]uint64, 1<<14)
	_, err = col.Search(short(), q, 5, umbra.Allow(allow...))
	refused("allow list of 16384 IDs", err, "over the node's limit of 65536 (Limits.MaxRequestBytes)")
	// A request while another is in flight (MaxInFlight 1): the first
	// is held at the start of its goroutine until the second is refused.
	release := make(chan struct{})
	hold := func(*node.Node) { <-release }
	node.TestHooks.Serve.Store(&hold)
	first := make(chan error, 1)
	go func() {
		_, err := col.Search(ctx, q, 5)
		first <- err
	}()
	for n.Stats().InFlight == 0 {
		time.Sleep(time.Millisecond)
	}
	p := rawRequest(t, c, col.meta.Name, (&protocol.Request{Kind: protocol.KindSearch, K: 5, Dim: 4, Queries: q, WaitMs: 500}).Encode())
	node.TestHooks.Serve.Store(nil)
	close(release)
	if p.Status != protocol.StatusError || p.Msg != "node busy: 1 requests in flight (limit 1, Limits.MaxInFlight)" {
		t.Fatalf("a second request in flight: status %d %q, want refused as busy", p.Status, p.Msg)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// Within the limits, the answer is the reference's.
	got, err := col.Search(ctx, q, 100, umbra.WithPayload())
	if err != nil || len(got) != 100 {
		t.Fatalf("k 100: %d hits, %v", len(got), err)
	}
	// A request's charge is given back just after its reply is sent.
	waitFor(t, "every charge given back", func() bool { s := n.Stats(); return s.InFlight == 0 && s.InFlightBytes == 0 })
	// Refused.InFlight counts the busy refusal above, and may count more:
	// a request's charge is given back just after its reply is sent, so
	// on a loaded machine the client's next request can arrive first, be
	// refused as busy and be asked again (fanout's retry), answered all
	// the same. (It was 3 once in CI's race run, beside the engine.)
	s := n.Stats()
	if s.Refused.Hits < 2 || s.Refused.RequestBytes < 1 || s.Refused.InFlight < 1 || s.InFlight != 0 || s.InFlightBytes != 0 {
		t.Fatalf("stats %+v", s)
	}
	t.Logf("stats: %+v", s)
}

// The client cuts a batch so that k × queries of each request fits the
// default MaxHits: a batch of 40 queries with k 10,000 (400,000 hits) is
// answered, not refused.
func TestClusterSplitsBatchesUnderMaxHits(t *testing.T) {
	t.Parallel()
	_, col, n := boundedNode(t, protocol.Limits{}, 50)
	qs := make([][]float32, 40)
	for i := range qs {
		qs[i] = []float32{1, float32(i), 0, 0}
	}
	all, err := col.SearchBatch(context.Background(), qs, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for i, hs := range all {
		if len(hs) != 50 {
			t.Fatalf("query %d: %d hits, want 50", i, len(hs))
		}
	}
	if s := n.Stats(); s.Refused.Total() != 0 || s.Answered != 2 {
		t.Fatalf("stats %+v: want 2 requests answered, none refused", s)
	}
}

// peekRequest reads what decodeRequest reads of the fixed fields.
func TestPeekRequest(t *testing.T) {
	t.Parallel()
	for _, q := range []*protocol.Request{
		{Kind: protocol.KindSearch, MinSeq: 5, WaitMs: 7, K: 9, Dim: 2, Queries: []float32{1, 2, 3, 4}, Allow: []uint64{1, 2, 3}},
		{Kind: protocol.KindRange, WaitMs: 1, MaxHits: 4, Dim: 1, Queries: []float32{1}, Where: []byte(`{"a":1}`)},
		{Kind: protocol.KindRange, Dim: 1, Queries: []float32{1, 2}},
		{Kind: protocol.KindLookup, Keys: []string{"a", "b"}},
		{Kind: protocol.KindAwait, Seqs: []uint64{3}},
		{Kind: protocol.KindRows},
		{Kind: protocol.KindGet, From: 3, Limit: 10, IDs: []uint64{1, 2}, Where: []byte(`{"a":1}`)},
		{Kind: protocol.KindGet, Keys: []string{"a", "bc", ""}},
		{Kind: protocol.KindCount, Where: []byte(`{"a":1}`)},
	} {
		b := q.Encode()
		s, err := protocol.Peek(b)
		if err != nil {
			t.Fatal(err)
		}
		nq := 0
		if q.Dim > 0 {
			nq = len(q.Queries) / q.Dim
		}
		k, named := q.K, len(q.Keys)
		if q.Kind == protocol.KindGet {
			k, named = q.Limit, len(q.Keys)+len(q.IDs)
		}
		if s.Kind != q.Kind || s.WaitMs != q.WaitMs || s.K != k || s.MaxHits != q.MaxHits || s.NQ != nq || s.Keys != named || s.Where != len(q.Where) {
			t.Fatalf("%+v peeked as %+v", q, s)
		}
		// Truncated: refused, or (past the fixed fields) left to the decoder.
		for cut := range len(b) {
			if _, err := protocol.Peek(b[:cut]); err == nil {
				if _, err := protocol.DecodeRequest(b[:cut]); err == nil {
					t.Fatalf("%+v cut at %d: read by both", q, cut)
				}
			}
		}
	}
	if err := (protocol.Limits{MaxInFlightBytes: 1 << 20, MaxRequestBytes: 1 << 20}).Check(); err == nil {
		t.Fatal("a request limit no request under it could be admitted with: accepted")
	}
	if err := (protocol.Limits{MaxWait: -1}).Check(); err == nil || !strings.Contains(err.Error(), "MaxWait") {
		t.Fatalf("a negative MaxWait: %v", err)
	}
}

// A search's payloads are copied after its hits are charged, under the
// replica's lock and only when no write was applied since the search:
// while one row is upserted again and again with a new vector and
// payload, every hit's payload is the one stored with the vector that
// scored it.
func TestClusterPayloadsMatchTheirRows(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	col, err := h.c.Create(ctx, "pay", CollectionConfig{Dim: 2, Metric: umbra.L2})
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 300
	done := make(chan error, 1)
	go func() {
		for i := 1; i <= rounds; i++ {
			_, err := col.Upsert(ctx, umbra.Vectors([][]float32{{float32(i), 0}}), umbra.WithIDs(1), umbra.WithPayloads([]byte(fmt.Sprint(i))), umbra.NoWait())
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	checked := 0
	for writing := true; writing || checked == 0; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			writing = false
		default:
		}
		hits, err := col.Search(ctx, []float32{0, 0}, 1, umbra.WithPayload(), umbra.Eventual())
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 {
			continue
		}
		// L2 scores are squared distances: row (i, 0) scores i².
		if want := fmt.Sprint(int(math.Round(math.Sqrt(float64(hits[0].Score))))); hits[0].Payload != want {
			t.Fatalf("hit %+v: the payload of another version of the row (want %q)", hits[0], want)
		}
		checked++
	}
	t.Logf("%d searches checked while the row was rewritten %d times", checked, rounds)
}
