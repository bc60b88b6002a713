package protocol

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/umbravec/umbra"
)

// What a replica does with a stream message it cannot apply.
//
// A message no build can read — too short to carry a checksum, a checksum
// that fails, or one that verifies but whose body does not decode under
// its version (a bad op, a truncation, metadata that is not a canonical
// encoding, rows of another dimension than the collection's) — is skipped
// by every replica alike: the replica records codeUnreadable as that
// sequence's outcome (a writer awaiting it gets ErrUnreadableMessage),
// stores the sequence's sentinel row with nothing else changed (so its
// applied sequence moves past it, also across restarts), and logs the
// stream, sequence, size, reason and first bytes (replica.apply).
//
// A message whose checksum holds but whose format version is newer than
// the build's may be readable by a newer umbra, and skipping it would let
// the replicas of a shard diverge during a rolling upgrade (the upgraded
// ones applying it, the others not). So a replica stops there: it applies
// nothing further, and answers every request with statusStopped and a
// stopError naming the message and the way out — upgrade the node, or
// skip the message with 'umbra repair --skip SEQ'. That command records
// the operator's decision in the KV bucket umbra_repairs under
// COLLECTION.SHARD.SEQ, bound to the message's length and checksum; a
// stopped replica polls for it (repairPoll) and skips exactly that message,
// and a replica that reaches the sequence later consults the same record
// before it stops, so every replica skips it, recording codeSkipped as its
// outcome.

// headBytes is how much of a message a report shows, in hex.
const headBytes = 32

func HeadHex(b []byte) string { return hex.EncodeToString(b[:min(len(b), headBytes)]) }

func RepairKey(coll string, shard int, seq uint64) string {
	return coll + "." + strconv.Itoa(shard) + "." + strconv.FormatUint(seq, 10)
}

// RepairRecord is an operator's decision on one stream message, kept in
// the KV bucket umbra_repairs under COLLECTION.SHARD.SEQ. It names the
// message by its length and checksum too: a replica skips the message at
// that sequence only when both agree.
type RepairRecord struct {
	Version       int       `json:"version"` // 1
	Action        string    `json:"action"`  // "skip"
	Collection    string    `json:"collection"`
	Shard         int       `json:"shard"`
	Seq           uint64    `json:"seq"`
	Size          int       `json:"size"`
	CRC32C        uint32    `json:"crc32c"`
	FormatVersion int       `json:"format_version"`
	At            time.Time `json:"at"`
}

// repairRecord reads the record for se's message, or nil when there is
// none (nor the bucket).
func ReadRepairRecord(ctx context.Context, js jetstream.JetStream, coll string, shard int, seq uint64) (*RepairRecord, error) {
	kv, err := js.KeyValue(ctx, BucketRepairs)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, RepairKey(coll, shard, seq))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec RepairRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, fmt.Errorf("repair record %s: %w", e.Key(), err)
	}
	return &rec, nil
}

// Verdicts on a stream message, as this build's replicas see it.
const (
	VerdictApplies    = "applies"    // readable: applied (or refused) as a write
	VerdictUnreadable = "unreadable" // no build can read it: every replica skips it on its own
	VerdictStops      = "stops"      // verified, of a newer format: a replica stops there until upgraded or told to skip it
)

// MessageReport describes one message of a shard's stream.
type MessageReport struct {
	Seq  uint64 `json:"seq"`
	Size int    `json:"size"`
	// Version is the message's first byte, its format version if it
	// verifies (-1: an empty message).
	Version int    `json:"version"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"` // why it does not apply
	Head    string `json:"head"`             // the first 32 bytes, in hex
	// Skip is the operator's skip recorded for this message, if any.
	Skip *RepairRecord `json:"skip,omitempty"`
}

// inspect judges message data at seq of a collection of dimension dim.
func InspectMessage(seq uint64, data []byte, dim int) *MessageReport {
	m := &MessageReport{Seq: seq, Size: len(data), Version: -1, Verdict: VerdictApplies, Head: HeadHex(data)}
	if len(data) > 0 {
		m.Version = int(data[0])
	}
	_, _, err := ReadWrite(data, dim)
	var ve *VersionError
	switch {
	case errors.As(err, &ve):
		m.Verdict, m.Reason = VerdictStops, err.Error()
	case err != nil:
		m.Verdict, m.Reason = VerdictUnreadable, err.Error()
	}
	return m
}

// ShardRepair is what Collection.FindStop found in a shard.
type ShardRepair struct {
	Collection string `json:"collection"`
	Shard      int    `json:"shard"`
	Stream     string `json:"stream"`
	FirstSeq   uint64 `json:"first_seq"` // the stream's messages now
	LastSeq    uint64 `json:"last_seq"`
	// Answered: a replica answered, saying it had applied through Applied
	// (and, when stopped, why: ReplicaSays).
	Answered    bool   `json:"replica_answered"`
	Applied     uint64 `json:"applied"`
	ReplicaSays string `json:"replica_says,omitempty"`
	// ScannedFrom: the messages read, from ScannedFrom up to the first
	// that stops a replica or LastSeq.
	ScannedFrom uint64 `json:"scanned_from"`
	// Stop is the first message read at which a replica of this build
	// stops; nil: none.
	Stop *MessageReport `json:"stop"`
	// Unreadable are the sequences of unreadable messages read before it
	// (every replica skips those on its own), the first 100.
	Unreadable []uint64 `json:"unreadable"`
}

// Repairer is an operator's handle on the streams of one collection's
// shards: it finds the message a shard's replicas stop at, reads any
// message of them, and records the skip of a message (umbra repair).
type Repairer struct {
	c       *Conn
	meta    *CollectionRecord
	attempt time.Duration // how long a replica is given to answer
}

// NewRepairer opens collection name's record on c; attempt is how long a
// replica is given to answer.
func NewRepairer(ctx context.Context, c *Conn, name string, attempt time.Duration) (*Repairer, error) {
	e, err := c.Colls.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrNoCollection, name)
	}
	if err != nil {
		return nil, err
	}
	rec, err := UnmarshalRecord(e.Value())
	if err != nil {
		return nil, err
	}
	return &Repairer{c: c, meta: rec, attempt: attempt}, nil
}

// Shards is the collection's number of shards.
func (col *Repairer) Shards() int { return col.meta.Shards }

// FindStop finds the message at which the shard's replicas stop, if any:
// it asks a replica of the shard how far it applied (a stopped one says
// so), then reads the shard's stream from the message after it (from the
// stream's first when no replica answers) to the first message a replica
// of this build stops at, or the stream's end. The report of that message
// says whether a skip is recorded for it.
func (col *Repairer) FindStop(ctx context.Context, shard int) (*ShardRepair, error) {
	m := col.c.Mark()
	ctx, cancel := col.c.FailFast(ctx)
	defer cancel()
	out, err := col.findStop(ctx, shard)
	return out, col.c.Explain(err, m)
}

func (col *Repairer) findStop(ctx context.Context, shard int) (*ShardRepair, error) {
	if shard < 0 || shard >= col.meta.Shards {
		return nil, fmt.Errorf("shard %d: collection %q has shards 0 to %d", shard, col.meta.Name, col.meta.Shards-1)
	}
	c := col.c
	out := &ShardRepair{Collection: col.meta.Name, Shard: shard, Stream: StreamName(col.meta.Name, shard), Unreadable: []uint64{}}
	st, err := c.JS.Stream(ctx, out.Stream)
	if err != nil {
		return nil, fmt.Errorf("shard %d's stream %s: %w", shard, out.Stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("shard %d's stream %s: %w", shard, out.Stream, err)
	}
	out.FirstSeq, out.LastSeq = info.State.FirstSeq, info.State.LastSeq
	out.ScannedFrom = out.FirstSeq
	if p, err := col.askOnce(ctx, col.meta.Name, shard, &Request{Kind: KindRows}); err == nil {
		out.Answered, out.Applied = true, p.Applied
		out.ScannedFrom = max(out.FirstSeq, p.Applied+1)
		if p.Status != StatusOK {
			out.ReplicaSays = p.Msg
		}
	}
	if info.State.Msgs == 0 || out.ScannedFrom > out.LastSeq {
		return out, nil
	}
	cons, err := c.JS.OrderedConsumer(ctx, out.Stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: out.ScannedFrom})
	if err != nil {
		return nil, fmt.Errorf("reading stream %s: %w", out.Stream, err)
	}
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return nil, fmt.Errorf("reading stream %s from %d: %w", out.Stream, out.ScannedFrom, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return nil, err
		}
		seq := md.Sequence.Stream
		m := InspectMessage(seq, msg.Data(), col.meta.Dim)
		switch m.Verdict {
		case VerdictStops:
			if m.Skip, err = ReadRepairRecord(ctx, c.JS, col.meta.Name, shard, seq); err != nil {
				return nil, err
			}
			out.Stop = m
			return out, nil
		case VerdictUnreadable:
			if len(out.Unreadable) < 100 {
				out.Unreadable = append(out.Unreadable, seq)
			}
		}
		if seq >= out.LastSeq {
			return out, nil
		}
	}
}

// Inspect reads message seq of the shard's stream and says what a replica
// of this build does with it.
func (col *Repairer) Inspect(ctx context.Context, shard int, seq uint64) (*MessageReport, error) {
	m := col.c.Mark()
	ctx, cancel := col.c.FailFast(ctx)
	defer cancel()
	out, err := col.inspect(ctx, shard, seq)
	return out, col.c.Explain(err, m)
}

func (col *Repairer) inspect(ctx context.Context, shard int, seq uint64) (*MessageReport, error) {
	if shard < 0 || shard >= col.meta.Shards {
		return nil, fmt.Errorf("shard %d: collection %q has shards 0 to %d", shard, col.meta.Name, col.meta.Shards-1)
	}
	name := StreamName(col.meta.Name, shard)
	st, err := col.c.JS.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("shard %d's stream %s: %w", shard, name, err)
	}
	raw, err := st.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("message %d of stream %s: %w", seq, name, err)
	}
	m := InspectMessage(seq, raw.Data, col.meta.Dim)
	if m.Skip, err = ReadRepairRecord(ctx, col.c.JS, col.meta.Name, shard, seq); err != nil {
		return nil, err
	}
	return m, nil
}

// Skip records, in the KV bucket umbra_repairs, that every replica of the
// shard skips message seq: one whose checksum holds and whose format
// version is newer than this build's (VerdictStops), at which replicas of
// this build stop. A replica stopped there moves on within repairPoll; one
// that has not reached it skips it when it does. Skipping a message this
// build reads, or one every replica skips on its own, is refused. A skip
// already recorded for the message is returned, with created false.
func (col *Repairer) Skip(ctx context.Context, shard int, seq uint64) (*MessageReport, bool, error) {
	mark := col.c.Mark()
	ctx, cancel := col.c.FailFast(ctx)
	defer cancel()
	out, created, err := col.skip(ctx, shard, seq)
	return out, created, col.c.Explain(err, mark)
}

func (col *Repairer) skip(ctx context.Context, shard int, seq uint64) (m *MessageReport, created bool, err error) {
	if m, err = col.inspect(ctx, shard, seq); err != nil {
		return nil, false, err
	}
	if m.Skip != nil {
		return m, false, nil
	}
	switch m.Verdict {
	case VerdictApplies:
		return nil, false, fmt.Errorf("%w: message %d of shard %d is a readable write (format version %d, %d bytes): replicas apply it, and a skip is only for a message they stop at", umbra.ErrInvalidOption, seq, shard, m.Version, m.Size)
	case VerdictUnreadable:
		return nil, false, fmt.Errorf("%w: message %d of shard %d is skipped by every replica on its own (%s): nothing to record", umbra.ErrInvalidOption, seq, shard, m.Reason)
	}
	name := StreamName(col.meta.Name, shard)
	st, err := col.c.JS.Stream(ctx, name)
	if err != nil {
		return nil, false, err
	}
	raw, err := st.GetMsg(ctx, seq)
	if err != nil {
		return nil, false, fmt.Errorf("message %d of stream %s: %w", seq, name, err)
	}
	rec := &RepairRecord{Version: 1, Action: "skip", Collection: col.meta.Name, Shard: shard, Seq: seq, Size: len(raw.Data),
		CRC32C: FrameSum(raw.Data), FormatVersion: m.Version, At: time.Now().UTC().Truncate(time.Second)}
	kv, err := Bucket(ctx, col.c.JS, BucketRepairs, col.c.Replicas)
	if err != nil {
		return nil, false, err
	}
	b, _ := json.Marshal(rec)
	if _, err := kv.Create(ctx, RepairKey(col.meta.Name, shard, seq), b); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return col.Skip(ctx, shard, seq) // recorded meanwhile
		}
		return nil, false, fmt.Errorf("recording the skip in %s: %w", BucketRepairs, err)
	}
	m.Skip = rec
	return m, true, nil
}

// askOnce sends one request to a replica of the shard and returns its
// answer, whatever its status; an error when none answers.
func (col *Repairer) askOnce(ctx context.Context, coll string, shard int, q *Request) (*Reply, error) {
	c := col.c
	ctx, cancel := context.WithTimeout(ctx, col.attempt)
	defer cancel()
	m, err := c.NC.RequestMsgWithContext(ctx, &nats.Msg{Subject: QuerySubject(coll, shard), Data: q.Encode()})
	if err != nil {
		return nil, err
	}
	if h := m.Header.Get(HdrChunk); h != "0/1" {
		return nil, fmt.Errorf("a reply in pieces (%q) to a small request", h)
	}
	return DecodeReply(m.Data, q.Kind)
}
