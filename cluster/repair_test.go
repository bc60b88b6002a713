package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/collectiontest"
	"github.com/umbravec/umbra/internal/metaindex"
	"github.com/umbravec/umbra/internal/testkit"
)

// nodeLog keeps what a node logs, and passes it on to the test's log.
type nodeLog struct {
	t     *testing.T
	name  string
	mu    sync.Mutex
	lines []string
}

func (l *nodeLog) logf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
	l.t.Logf("%s: %s", l.name, s)
}

// has says whether a line contains every one of parts.
func (l *nodeLog) has(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(s, p)
		}
		if all {
			return true
		}
	}
	return false
}

// startNodeAt starts a node holding every shard, its stores under dir,
// closed when the test ends (Close twice is harmless).
func startNodeAt(t *testing.T, c *Client, dir, name string) (*node.Node, *nodeLog) {
	t.Helper()
	l := &nodeLog{t: t, name: name}
	n, err := node.Start(context.Background(), c.x, node.Config{Dir: dir, Device: engine.CPU, Logf: l.logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, l
}

// waitApplied waits until node n's replica of shard 0 of coll has applied
// through seq.
func waitApplied(t *testing.T, n *node.Node, coll string, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, ok := n.Applied(coll, 0)
		if ok && a >= seq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node applied %s through %d (held: %v), not %d, in 30 s", coll, a, ok, seq)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitOutcomes asks a replica of the shard for the outcomes of seqs.
func awaitOutcomes(t *testing.T, col *Collection, shard int, seqs []uint64) []protocol.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	q := &protocol.Request{Kind: protocol.KindAwait, MinSeq: slices.Max(seqs), WaitMs: 1000, Seqs: seqs}
	replies, err := col.c.fanout(ctx, col.meta.Name, protocol.KindAwait, map[int][]byte{shard: q.Encode()})
	if err != nil {
		t.Fatal(err)
	}
	if got := replies[shard].Outcomes; len(got) != len(seqs) {
		t.Fatalf("%d outcomes for %d messages", len(got), len(seqs))
	}
	return replies[shard].Outcomes
}

// rowsOf returns the replica's rows of shard 0 of coll, sentinels apart:
// IDs and vectors.
func rowsOf(t *testing.T, n *node.Node, coll string) ([]uint64, [][]float32) {
	t.Helper()
	ids, vs, err := n.ShardRows(coll, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ids, vs
}

// sameAsReference checks the collection's answers against ref's, exactly:
// the rows held and the top k (all of them) of a few queries.
func sameAsReference(t *testing.T, col *Collection, ref *mirror, dim int, what string) {
	t.Helper()
	ctx := context.Background()
	rows, err := col.ShardRows(ctx)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	total := 0
	for _, r := range rows {
		total += r
	}
	if total != ref.ix.Len() {
		t.Fatalf("%s: the collection holds %d rows, the reference %d", what, total, ref.ix.Len())
	}
	r := testkit.Rand(t)
	for i := range 4 {
		q := testkit.Grid(r, dim)
		q[0] += 1.0 / 64
		got, err := col.Search(ctx, q, ref.ix.Len()+1)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		want, err := ref.ix.Search(ctx, q, ref.ix.Len()+1)
		if err != nil {
			t.Fatal(err)
		}
		sameHits(t, fmt.Sprintf("%s: query %d", what, i), want, got)
	}
}

// A message no build can read is skipped by every replica: the 4 bytes
// 09 01 02 03 (too short to carry a checksum), a checksummed write whose
// metadata is not a canonical encoding, one of rows of another dimension,
// and one naming an ID of the cluster's own (which, stored, would read as
// the applied sequence after a restart). Each gets the outcome codeUnreadable (a writer awaiting it
// learns protocol.ErrUnreadableMessage, why), every replica's applied sequence
// moves past it with no row changed and the same rows on both, and later
// writes and searches work, also after both nodes restart.
func TestClusterUnreadableMessageSkipped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	b, _ := startNodeAt(t, h.c, t.TempDir(), "b")
	const dim = 2
	col, err := h.c.Create(ctx, "u", CollectionConfig{Dim: dim, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	ref := newMirror(t, dim, umbra.Cosine)
	add := func(id uint64, v []float32) {
		t.Helper()
		if _, err := col.Add(ctx, umbra.Vectors([][]float32{v}), umbra.WithIDs(id)); err != nil {
			t.Fatal(err)
		}
		if _, err := ref.ix.Add(ctx, umbra.Vectors([][]float32{v}), umbra.WithIDs(id)); err != nil {
			t.Fatal(err)
		}
	}
	add(1, []float32{0, 1})
	bad := [][]byte{
		{0x09, 0x01, 0x02, 0x03},
		(&protocol.WriteMsg{Op: protocol.OpAdd, Dim: dim, IDs: []uint64{7}, Rows: []float32{1, 0}, MetaSet: true, Meta: [][]byte{{0x01, 0x01, 'a', 0x09}}}).Encode(),
		(&protocol.WriteMsg{Op: protocol.OpAdd, Dim: dim + 1, IDs: []uint64{8}, Rows: []float32{1, 0, 0}}).Encode(),
		(&protocol.WriteMsg{Op: protocol.OpAdd, Dim: dim, IDs: []uint64{protocol.ReservedIDs + 1000}, Rows: []float32{1, 0}}).Encode(),
	}
	want := []string{"too short to carry a checksum", "metadata of row 0", "rows of dimension 3 for a collection of dimension 2", "one of the cluster's own"}
	var seqs []uint64
	for i, m := range bad {
		seq, err := col.publish(ctx, 0, fmt.Sprintf("bad.0.%d", i), m)
		if err != nil {
			t.Fatal(err)
		}
		col.advance(0, seq)
		seqs = append(seqs, seq)
	}
	add(2, []float32{1, 1})
	for i, o := range awaitOutcomes(t, col, 0, seqs) {
		err := fmt.Errorf("%w: %s", protocol.CodeErr(o.Code), o.Msg)
		if o.Code != protocol.CodeUnreadable || !errors.Is(err, protocol.ErrUnreadableMessage) || !strings.Contains(o.Msg, want[i]) || !strings.Contains(o.Msg, fmt.Sprintf("stream message %d", seqs[i])) {
			t.Fatalf("message %d: outcome %d %q, want codeUnreadable saying %q", seqs[i], o.Code, o.Msg, want[i])
		}
	}
	last := col.Token()[0]
	for _, n := range []*node.Node{h.node, b} {
		waitApplied(t, n, "u", last)
	}
	idsA, vsA := rowsOf(t, h.node, "u")
	idsB, vsB := rowsOf(t, b, "u")
	if !slices.Equal(idsA, []uint64{1, 2}) || !slices.Equal(idsA, idsB) || fmt.Sprint(vsA) != fmt.Sprint(vsB) {
		t.Fatalf("rows: a %v %v, b %v %v; want IDs 1 and 2 on both", idsA, vsA, idsB, vsB)
	}
	sameAsReference(t, col, ref, dim, "after the unreadable messages")

	// Both nodes restart: their stores say they applied through last, and
	// nothing is skipped again or applied.
	h.node.Close()
	b.Close()
	a2, la := startNodeAt(t, h.c, h.dir, "a2")
	b2, lb := startNodeAt(t, h.c, b.Dir(), "b2")
	for _, l := range []*nodeLog{la, lb} {
		if !l.has(fmt.Sprintf("store applied through message %d", last)) || l.has("skipping stream message") {
			t.Fatalf("%s restarted: %q", l.name, l.lines)
		}
	}
	add(3, []float32{1, -1})
	for _, n := range []*node.Node{a2, b2} {
		waitApplied(t, n, "u", col.Token()[0])
	}
	sameAsReference(t, col, ref, dim, "after a restart")
}

// Mutated copies of a real write message — every single-bit flip of its
// header, a sample of flips in its body, truncations and extensions — are
// never applied: each is refused as unreadable, the rows stay equal to a
// reference that never saw them, and the shard keeps answering exactly.
// The message itself, published last, is applied.
func TestClusterMutatedMessagesNeverApplied(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	r := testkit.Rand(t)
	const dim = 8
	col, err := h.c.Create(ctx, "m", CollectionConfig{Dim: dim, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	ref := newMirror(t, dim, umbra.Cosine)
	vecs := func(n int) [][]float32 {
		vs := make([][]float32, n)
		for i := range vs {
			vs[i] = testkit.Grid(r, dim)
			vs[i][0] += 1.0 / 64
		}
		return vs
	}
	base := vecs(30)
	ids := make([]uint64, len(base))
	for i := range ids {
		ids[i] = uint64(100 + i)
	}
	fields := collectiontest.RandomFields(r, len(base))
	if _, err := col.Add(ctx, umbra.Vectors(base), umbra.WithIDs(ids...), umbra.WithMeta(fields...)); err != nil {
		t.Fatal(err)
	}
	if _, err := ref.ix.Add(ctx, umbra.Vectors(base), umbra.WithIDs(ids...), umbra.WithMeta(fields...)); err != nil {
		t.Fatal(err)
	}
	// The real message: four rows by keys, with metadata and payloads.
	rows := vecs(4)
	keys := []string{"k0", "k1", "k2", "k3"}
	newIDs := []uint64{1000, 1001, 1002, 1003}
	mf := collectiontest.RandomFields(r, 4)
	enc := make([][]byte, 4)
	for i, f := range mf {
		enc[i] = metaindex.AppendBinary(nil, f)
	}
	msg := (&protocol.WriteMsg{Op: protocol.OpAdd, Dim: dim, IDs: newIDs, Keys: keys, Rows: slices.Concat(rows...), MetaSet: true, Meta: enc,
		PaySet: true, Payloads: collectiontest.RandomPayloads(r, 4)}).Encode()
	var mutants [][]byte
	flip := func(bit int) {
		b := bytes.Clone(msg)
		b[bit/8] ^= 1 << (bit % 8)
		mutants = append(mutants, b)
	}
	for bit := range 8 * protocol.WriteHeader {
		flip(bit)
	}
	for range 64 {
		flip(8*protocol.WriteHeader + r.IntN(8*(len(msg)-protocol.WriteHeader)))
	}
	for cut := range protocol.FrameHeader + 2 {
		mutants = append(mutants, msg[:cut])
	}
	for range 16 {
		mutants = append(mutants, msg[:protocol.FrameHeader+r.IntN(len(msg)-protocol.FrameHeader)])
	}
	for _, n := range []int{1, 4, 100} {
		extra := make([]byte, n)
		for i := range extra {
			extra[i] = byte(r.IntN(256))
		}
		mutants = append(mutants, append(bytes.Clone(msg), extra...))
	}
	mutants = append(mutants, slices.Concat(msg, msg))
	var seqs []uint64
	for i, m := range mutants {
		seq, err := col.publish(ctx, 0, fmt.Sprintf("mutant.0.%d", i), m)
		if err != nil {
			t.Fatal(err)
		}
		col.advance(0, seq)
		seqs = append(seqs, seq)
	}
	for i, o := range awaitOutcomes(t, col, 0, seqs) {
		if o.Code != protocol.CodeUnreadable {
			t.Fatalf("mutant %d (message %d, %d bytes): outcome %d %q, want codeUnreadable", i, seqs[i], len(mutants[i]), o.Code, o.Msg)
		}
	}
	t.Logf("%d mutants of a %d-byte message refused", len(mutants), len(msg))
	sameAsReference(t, col, ref, dim, "after the mutants")
	if held, err := col.Lookup(ctx, keys...); err != nil || len(held) != 0 {
		t.Fatalf("keys of the mutated message held: %v, %v", held, err)
	}
	// The message itself applies, and a write after it.
	seq, err := col.publish(ctx, 0, "real.0.0", msg)
	if err != nil {
		t.Fatal(err)
	}
	col.advance(0, seq)
	if o := awaitOutcomes(t, col, 0, []uint64{seq})[0]; o.Code != protocol.CodeOK {
		t.Fatalf("the real message: outcome %d %q", o.Code, o.Msg)
	}
	if _, err := ref.ix.Add(ctx, umbra.Vectors(rows), umbra.WithIDs(newIDs...), umbra.WithKeys(keys...), umbra.WithMeta(mf...)); err != nil {
		t.Fatal(err)
	}
	more := vecs(3)
	got, err := col.Add(ctx, umbra.Vectors(more))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ref.ix.Add(ctx, umbra.Vectors(more), umbra.WithIDs(got...)); err != nil {
		t.Fatal(err)
	}
	sameAsReference(t, col, ref, dim, "after the real message")
}

// futureMsg is a well-formed, checksummed message of the next format
// version: no build yet reads it.
func futureMsg() []byte {
	return protocol.Frame(protocol.WireVersion+1, []byte("a write in a format to come"))
}

// A checksummed message of a newer format version stops the shard: every
// search fails with protocol.ErrShardStopped naming the message and the way out;
// FindStop shows it; a forged repair record for another message skips
// nothing; Skip records the skip, and both replicas move on identically —
// the one stopped there, and one that was down and reaches the message
// later, which consults the record and never stops.
func TestClusterNewerVersionStopsUntilSkipped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	// Node a is the harness's; its log is the test's. Node b stops before
	// the message and comes back after the skip.
	la := &nodeLog{t: t, name: "a"}
	h.node.Close()
	a, err := node.Start(ctx, h.c.x, node.Config{Dir: h.dir, Device: engine.CPU, Logf: la.logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	bDir := t.TempDir()
	b, _ := startNodeAt(t, h.c, bDir, "b")
	const dim = 2
	col, err := h.c.Create(ctx, "v", CollectionConfig{Dim: dim, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := col.Add(ctx, umbra.Vectors([][]float32{{0, 1}}), umbra.WithIDs(1)); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, b, "v", col.Token()[0])
	b.Close()
	bad, err := col.publish(ctx, 0, "future.0.0", futureMsg())
	if err != nil {
		t.Fatal(err)
	}
	col.advance(0, bad)
	if _, err := col.Add(ctx, umbra.Vectors([][]float32{{1, 1}}), umbra.WithIDs(2), umbra.NoWait()); err != nil {
		t.Fatal(err)
	}
	last := col.Token()[0]

	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	hits, err := col.Search(tctx, []float32{1, 0}, 5)
	cancel()
	for _, want := range []string{fmt.Sprintf("stream message %d", bad), "format version 4", "upgrade umbra",
		fmt.Sprintf("umbra repair --cluster URL --collection v --shard 0 --skip %d", bad)} {
		if !errors.Is(err, protocol.ErrShardsUnavailable) || !errors.Is(err, protocol.ErrShardStopped) || hits != nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("search at a stopped shard: %v, %v; want protocol.ErrShardStopped saying %q", hits, err, want)
		}
	}
	if got, _ := a.Applied("v", 0); got != bad-1 {
		t.Fatalf("a applied through %d; the message is %d", got, bad)
	}
	if ids, _ := rowsOf(t, a, "v"); !slices.Equal(ids, []uint64{1}) {
		t.Fatalf("a holds %v", ids)
	}

	// FindStop names the message; a readable one and the message before
	// cannot be skipped.
	rep, err := repairer(t, col).FindStop(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Answered || rep.Applied != bad-1 || !strings.Contains(rep.ReplicaSays, "stopped") || rep.Stop == nil ||
		rep.Stop.Seq != bad || rep.Stop.Verdict != protocol.VerdictStops || rep.Stop.Version != protocol.WireVersion+1 ||
		rep.Stop.Size != len(futureMsg()) || rep.Stop.Skip != nil || rep.LastSeq != last {
		t.Fatalf("FindStop: %+v, stop %+v", rep, rep.Stop)
	}
	for _, seq := range []uint64{bad - 1, bad + 1} {
		if _, _, err := repairer(t, col).Skip(ctx, 0, seq); !errors.Is(err, umbra.ErrInvalidOption) || !strings.Contains(err.Error(), "readable write") {
			t.Fatalf("skipping readable message %d: %v", seq, err)
		}
	}

	// A record that names another message (another checksum) skips
	// nothing.
	kv, err := protocol.Bucket(ctx, h.c.x.JS, protocol.BucketRepairs, 1)
	if err != nil {
		t.Fatal(err)
	}
	key := protocol.RepairKey("v", 0, bad)
	if _, err := kv.Create(ctx, key, []byte(fmt.Sprintf(`{"version":1,"action":"skip","collection":"v","shard":0,"seq":%d,"size":%d,"crc32c":1}`, bad, len(futureMsg())))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !la.has("names a message of", "not skipped") {
		if time.Now().After(deadline) {
			t.Fatal("a did not report the mismatched repair record")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, _ := a.Applied("v", 0); got != bad-1 {
		t.Fatalf("a mismatched record moved a to %d", got)
	}
	if err := kv.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}

	m, created, err := repairer(t, col).Skip(ctx, 0, bad)
	if err != nil || !created || m.Skip == nil || m.Skip.Seq != bad || m.Skip.CRC32C != protocol.FrameSum(futureMsg()) {
		t.Fatalf("Skip: %+v, %v, %v", m, created, err)
	}
	if again, created, err := repairer(t, col).Skip(ctx, 0, bad); err != nil || created || again.Skip == nil || !again.Skip.At.Equal(m.Skip.At) {
		t.Fatalf("Skip again: %+v, %v, %v", again, created, err)
	}
	waitApplied(t, a, "v", last)
	b2, lb := startNodeAt(t, h.c, bDir, "b2")
	waitApplied(t, b2, "v", last)
	if lb.has("stopped at") || !lb.has(fmt.Sprintf("skipped stream message %d", bad)) {
		t.Fatalf("b: %q; want the message skipped with no stop", lb.lines)
	}
	if !la.has(fmt.Sprintf("stopped at stream message %d", bad)) || !la.has(fmt.Sprintf("skipped stream message %d", bad)) {
		t.Fatalf("a: %q; want the stop and the skip logged", la.lines)
	}
	idsA, vsA := rowsOf(t, a, "v")
	idsB, vsB := rowsOf(t, b2, "v")
	appA, _ := a.Applied("v", 0)
	appB, _ := b2.Applied("v", 0)
	if !slices.Equal(idsA, []uint64{1, 2}) || !slices.Equal(idsA, idsB) || fmt.Sprint(vsA) != fmt.Sprint(vsB) || appA != last || appB != last {
		t.Fatalf("a: %v %v through %d; b: %v %v through %d; want IDs 1 and 2 through %d on both", idsA, vsA, appA, idsB, vsB, appB, last)
	}
	for _, n := range []*node.Node{a, b2} {
		o, _ := n.Outcome("v", 0, bad)
		if o.Code != protocol.CodeSkipped || !errors.Is(protocol.CodeErr(o.Code), protocol.ErrUnreadableMessage) || !strings.Contains(o.Msg, key) {
			t.Fatalf("the skipped message's outcome: %d %q", o.Code, o.Msg)
		}
	}
	hits, err = col.Search(ctx, []float32{1, 0}, 5)
	if err != nil || len(hits) != 2 || hits[0].ID != 2 || hits[1].ID != 1 {
		t.Fatalf("search after the skip: %v, %v", hits, err)
	}
	if rep, err := repairer(t, col).FindStop(ctx, 0); err != nil || rep.Stop != nil || !rep.Answered || rep.Applied != last {
		t.Fatalf("FindStop after the skip: %+v, %v", rep, err)
	}
	// An unreadable message needs no skip.
	junk, err := col.publish(ctx, 0, "junk.0.0", []byte{9, 1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := repairer(t, col).Skip(ctx, 0, junk); !errors.Is(err, umbra.ErrInvalidOption) || !strings.Contains(err.Error(), "on its own") {
		t.Fatalf("skipping an unreadable message: %v", err)
	}
}

// A node answers a request it cannot verify with an error status that
// says why; a client treats a reply it cannot verify (a bit flipped, in
// one piece or in one of several, or pieces out of place) as a failed
// attempt and asks again, never returning its hits; replies that never
// verify fail the search naming the checksum.
func TestClusterCorruptRequestsAndReplies(t *testing.T) {
	t.Parallel()
	// Shard 0 of "r" has no replica but the test's own responder.
	h := newHarness(t, func(coll string, _ int) bool { return coll != "r" })
	ctx := context.Background()
	col, err := h.c.Create(ctx, "q", CollectionConfig{Dim: 2, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := col.Add(ctx, umbra.Vectors([][]float32{{1, 0}}), umbra.WithIDs(1)); err != nil {
		t.Fatal(err)
	}
	good := (&protocol.Request{Kind: protocol.KindSearch, K: 1, Dim: 2, Queries: []float32{1, 0}}).Encode()
	flipped := bytes.Clone(good)
	flipped[len(flipped)-3] ^= 0x10
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"a bit flipped", flipped, "checksum mismatch"},
		{"four bytes", []byte{9, 1, 2, 3}, "too short to carry a checksum"},
		{"a newer version", protocol.Frame(protocol.WireVersion+1, good[protocol.FrameHeader:]), "newer umbra"},
	} {
		m, err := h.c.x.NC.Request(protocol.QuerySubject("q", 0), c.b, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		p, err := protocol.DecodeReply(m.Data, protocol.KindSearch)
		if err != nil || p.Status != protocol.StatusError || !strings.Contains(p.Msg, "request refused") || !strings.Contains(p.Msg, c.want) {
			t.Fatalf("%s: reply %+v, %v; want an error status saying %q", c.name, p, err, c.want)
		}
	}
	if m, err := h.c.x.NC.Request(protocol.QuerySubject("q", 0), good, 5*time.Second); err != nil {
		t.Fatal(err)
	} else if p, err := protocol.DecodeReply(m.Data, protocol.KindSearch); err != nil || p.Status != protocol.StatusOK || len(p.Hits) != 1 || len(p.Hits[0]) != 1 || p.Hits[0][0].ID != 1 {
		t.Fatalf("the request unflipped: %+v, %v", p, err)
	}

	if _, err := h.c.Create(ctx, "r", CollectionConfig{Dim: 2, Shards: 1}); err != nil {
		t.Fatal(err)
	}
	col, err = h.c.Open(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	right := (&protocol.Reply{Hits: [][]protocol.Hit{{{ID: 1, Score: 0.5}}}}).Encode(protocol.KindSearch)
	// The same reply with one bit of the hit's ID flipped: without the
	// checksum it decodes, as ID 3.
	wrong := bytes.Clone(right)
	wrong[protocol.FrameHeader+1+8+4+1+4+4] ^= 0x02
	pieces := func(b []byte) [][]byte { n := len(b) / 3; return [][]byte{b[:n], b[n : 2*n], b[2*n:]} }
	for _, c := range []struct {
		name   string
		send   func(attempt int) [][]byte // the pieces, in the order sent as 0/n, 1/n, …
		always bool
	}{
		{"one piece", func(int) [][]byte { return [][]byte{wrong} }, false},
		{"one of three pieces", func(int) [][]byte { return pieces(wrong) }, false},
		{"pieces out of place", func(int) [][]byte { p := pieces(right); return [][]byte{p[0], p[2], p[1]} }, false},
		{"every attempt", func(int) [][]byte { return [][]byte{wrong} }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			attempts := 0
			sub, err := h.c.x.NC.QueueSubscribe(protocol.QuerySubject("r", 0), protocol.QueueGroup("r", 0), func(m *nats.Msg) {
				if _, err := protocol.DecodeRequest(m.Data); err != nil {
					t.Errorf("the client's request: %v", err)
					return
				}
				mu.Lock()
				attempts++
				first := attempts == 1
				mu.Unlock()
				ps := [][]byte{right}
				if first || c.always {
					ps = c.send(attempts)
				}
				for i, p := range ps {
					out := nats.NewMsg(m.Reply)
					out.Header.Set(protocol.HdrChunk, fmt.Sprintf("%d/%d", i, len(ps)))
					out.Data = p
					h.c.x.NC.PublishMsg(out)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			hits, err := col.Search(tctx, []float32{1, 0}, 1)
			mu.Lock()
			n := attempts
			mu.Unlock()
			if c.always {
				if !errors.Is(err, protocol.ErrShardsUnavailable) || hits != nil || !strings.Contains(err.Error(), "a reply refused") || !strings.Contains(err.Error(), "checksum mismatch") {
					t.Fatalf("every reply corrupt: %v, %v; want protocol.ErrShardsUnavailable naming the checksum", hits, err)
				}
				return
			}
			if err != nil || len(hits) != 1 || hits[0].ID != 1 || n < 2 {
				t.Fatalf("search: %v, %v after %d attempts; want hit 1 from the second", hits, err, n)
			}
		})
	}
}

// repairer is the operator's handle on col's shards (umbra repair).
func repairer(t *testing.T, col *Collection) *protocol.Repairer {
	t.Helper()
	r, err := protocol.NewRepairer(context.Background(), col.c.x, col.meta.Name, col.c.attemptTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
