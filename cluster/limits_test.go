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
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// boundedNode is an embedded server, a client, a collection of rows and a
// node with limits, in the test process.
func boundedNode(t *testing.T, lim Limits, rows int) (*Client, *Collection, *Node) {
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
	n, err := StartNode(ctx, c, NodeConfig{Dir: dir + "/node", Device: engine.CPU, Logf: t.Logf, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return c, col, n
}

// rawRequest sends body to shard 0 of collection lim and returns the
// reply, or fails the test when none comes within a minute.
func rawRequest(t *testing.T, c *Client, coll string, body []byte) *reply {
	t.Helper()
	m, err := c.nc.Request(querySubject(coll, 0), body, time.Minute)
	if err != nil {
		t.Fatalf("no answer to the request: %v", err)
	}
	p, err := decodeReply(m.Data, kindSearch)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A request that asks to wait 49 days for a write that never comes is
// answered "behind" after the node's MaxWait: it is answered at all
// before the test's deadline, and counted as a clamped wait.
func TestNodeClampsWait(t *testing.T) {
	c, col, n := boundedNode(t, Limits{MaxWait: 300 * time.Millisecond}, 10)
	body := (&request{kind: kindSearch, minSeq: 1 << 62, waitMs: math.MaxUint32, k: 3, dim: 4, queries: []float32{1, 0, 0, 0}}).encode()
	p := rawRequest(t, c, col.Name(), body)
	if p.status != statusBehind {
		t.Fatalf("status %d (%s), want behind", p.status, p.msg)
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
	c, col, n := boundedNode(t, Limits{MaxHits: 100, MaxInFlight: 1, MaxRequestBytes: 1 << 16, MaxInFlightBytes: 1 << 20}, rows)
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
	hold := func(*Node) { <-release }
	testHooks.serve.Store(&hold)
	first := make(chan error, 1)
	go func() {
		_, err := col.Search(ctx, q, 5)
		first <- err
	}()
	for n.Stats().InFlight == 0 {
		time.Sleep(time.Millisecond)
	}
	p := rawRequest(t, c, col.Name(), (&request{kind: kindSearch, k: 5, dim: 4, queries: q, waitMs: 500}).encode())
	testHooks.serve.Store(nil)
	close(release)
	if p.status != statusError || p.msg != "node busy: 1 requests in flight (limit 1, Limits.MaxInFlight)" {
		t.Fatalf("a second request in flight: status %d %q, want refused as busy", p.status, p.msg)
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
	s := n.Stats()
	if s.Refused.Hits < 2 || s.Refused.RequestBytes < 1 || s.Refused.InFlight != 1 || s.InFlight != 0 || s.InFlightBytes != 0 {
		t.Fatalf("stats %+v", s)
	}
	t.Logf("stats: %+v", s)
}

// The client cuts a batch so that k × queries of each request fits the
// default MaxHits: a batch of 40 queries with k 10,000 (400,000 hits) is
// answered, not refused.
func TestClusterSplitsBatchesUnderMaxHits(t *testing.T) {
	_, col, n := boundedNode(t, Limits{}, 50)
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
	for _, q := range []*request{
		{kind: kindSearch, minSeq: 5, waitMs: 7, k: 9, dim: 2, queries: []float32{1, 2, 3, 4}, allow: []uint64{1, 2, 3}},
		{kind: kindRange, waitMs: 1, maxHits: 4, dim: 1, queries: []float32{1}, where: []byte(`{"a":1}`)},
		{kind: kindRange, dim: 1, queries: []float32{1, 2}},
		{kind: kindLookup, keys: []string{"a", "b"}},
		{kind: kindAwait, seqs: []uint64{3}},
		{kind: kindRows},
		{kind: kindGet, from: 3, limit: 10, ids: []uint64{1, 2}, where: []byte(`{"a":1}`)},
		{kind: kindGet, keys: []string{"a", "bc", ""}},
		{kind: kindCount, where: []byte(`{"a":1}`)},
	} {
		b := q.encode()
		s, err := peekRequest(b)
		if err != nil {
			t.Fatal(err)
		}
		nq := 0
		if q.dim > 0 {
			nq = len(q.queries) / q.dim
		}
		k, named := q.k, len(q.keys)
		if q.kind == kindGet {
			k, named = q.limit, len(q.keys)+len(q.ids)
		}
		if s.kind != q.kind || s.waitMs != q.waitMs || s.k != k || s.maxHits != q.maxHits || s.nq != nq || s.keys != named || s.where != len(q.where) {
			t.Fatalf("%+v peeked as %+v", q, s)
		}
		// Truncated: refused, or (past the fixed fields) left to the decoder.
		for cut := range len(b) {
			if _, err := peekRequest(b[:cut]); err == nil {
				if _, err := decodeRequest(b[:cut]); err == nil {
					t.Fatalf("%+v cut at %d: read by both", q, cut)
				}
			}
		}
	}
	if err := (Limits{MaxInFlightBytes: 1 << 20, MaxRequestBytes: 1 << 20}).check(); err == nil {
		t.Fatal("a request limit no request under it could be admitted with: accepted")
	}
	if err := (Limits{MaxWait: -1}).check(); err == nil || !strings.Contains(err.Error(), "MaxWait") {
		t.Fatalf("a negative MaxWait: %v", err)
	}
}

// A search's payloads are copied after its hits are charged, under the
// replica's lock and only when no write was applied since the search:
// while one row is upserted again and again with a new vector and
// payload, every hit's payload is the one stored with the vector that
// scored it.
func TestClusterPayloadsMatchTheirRows(t *testing.T) {
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
