package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Idempotent writes across calls.
//
// Every message of a write is published under a message ID, and JetStream
// stores a message whose ID it saw within the stream's duplicate window
// (CollectionConfig.DedupWindow) once, answering a second publish with
// the first one's sequence. Without a key, a call's IDs are its own
// (random): its own retries are stored once, but a caller that calls
// again after a timeout writes again, and with assigned IDs its rows are
// stored twice (under new IDs).
//
// With IdempotencyKey(K), the message IDs are K, a hash of the call and
// the message's place in it, and the call is recorded in the KV bucket
// umbra_calls (key COLLECTION.K: the hash, the first assigned ID, the
// message size the rows were cut at) before anything is published. A call
// again with the same key within the window finds the record, makes the
// same messages (the same assigned IDs, cut the same way), and JetStream
// answers those already stored with their first sequences; the call then
// reports the first call's outcome, with the IDs the stored messages
// gave (each replica records every message's outcome and IDs). A key
// reused with other rows, names or another operation is refused
// (ErrIdempotencyConflict) before anything is published. Past the window
// the record is out of date and the key is new again.

// ErrIdempotencyConflict: an idempotency key was used, within the
// collection's duplicate window, by a call with other rows, names or
// operation.
var ErrIdempotencyConflict = errors.New("idempotency key used by another call")

// NewIdempotencyKey returns a fresh random key (22 letters and digits).
func NewIdempotencyKey() string { return nats.NewInbox()[len(nats.InboxPrefix):] }

// callRecord is what umbra_calls keeps of a write with a key.
type callRecord struct {
	Hash  string `json:"hash"`            // callHash of the call
	First uint64 `json:"first,omitempty"` // the first ID the call assigned (assigned IDs only)
	Limit int    `json:"limit"`           // the bytes its messages were cut under
}

// callHash is a hash of what a call asks, without what it chooses (the
// IDs it assigns, or chooses for new keys): the operation, the IDs or
// keys it names, the rows, metadata and payloads.
func callHash(op byte, o *writeOptions, data []float32, encMeta [][]byte) string {
	h := sha256.New()
	var b []byte
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b[:0], v); h.Write(b) }
	bytes := func(x []byte) { u64(uint64(len(x))); h.Write(x) }
	naming := uint64(0)
	switch {
	case o.idsSet:
		naming = 1
	case o.keysSet:
		naming = 2
	}
	u64(uint64(op))
	u64(naming)
	u64(uint64(len(o.ids)))
	for _, id := range o.ids {
		u64(id)
	}
	u64(uint64(len(o.keys)))
	for _, k := range o.keys {
		bytes([]byte(k))
	}
	u64(uint64(len(data)))
	for _, v := range data {
		u64(uint64(math.Float32bits(v)))
	}
	u64(uint64(btoi(o.metaSet)))
	for _, m := range encMeta {
		bytes(m)
	}
	u64(uint64(btoi(o.paySet)))
	for _, p := range o.payloads {
		bytes(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// callsBucket opens umbra_calls, once a client. Nodes make it when they
// start (a client's credentials may not create buckets); a client with the
// rights (node credentials, a server without authentication) makes it
// itself where no node has.
func (c *Client) callsBucket(ctx context.Context) (jetstream.KeyValue, error) {
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	if c.calls != nil {
		return c.calls, nil
	}
	m := c.x.Mark()
	fctx, cancel := c.x.FailFast(ctx)
	defer cancel()
	kv, err := c.x.OpenCalls(fctx)
	if err != nil {
		return nil, c.x.BucketError(err, m)
	}
	c.calls = kv
	return kv, nil
}

// claimCall records a write with key, or finds the record of the call
// that used the key before within the window: want is this call's record
// (its First from a fresh assignment, made only if needed), and the
// record returned is the one to follow.
func (col *Collection) claimCall(ctx context.Context, key string, want callRecord, assign func() (uint64, error)) (callRecord, error) {
	kv, err := col.c.callsBucket(ctx)
	if err != nil {
		return callRecord{}, err
	}
	name := col.meta.Name + "." + key
	window := col.meta.Window()
	for {
		e, err := kv.Get(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			e = nil
		case err != nil:
			return callRecord{}, fmt.Errorf("idempotency key %s: %w", key, err)
		}
		if e != nil && time.Since(e.Created()) < window {
			var rec callRecord
			if err := json.Unmarshal(e.Value(), &rec); err != nil {
				return callRecord{}, fmt.Errorf("idempotency key %s: its record: %w", key, err)
			}
			if rec.Hash != want.Hash {
				return callRecord{}, fmt.Errorf("%w: key %s was used for another write to collection %s %v ago (other rows, names or operation); a key names one write, and is free again %v after its first use",
					ErrIdempotencyConflict, key, col.meta.Name, time.Since(e.Created()).Round(time.Second), window)
			}
			return rec, nil
		}
		// No record, or one past the window: this call is the key's.
		if assign != nil && want.First == 0 {
			if want.First, err = assign(); err != nil {
				return callRecord{}, err
			}
		}
		b, _ := json.Marshal(want)
		if e == nil {
			_, err = kv.Create(ctx, name, b)
		} else {
			_, err = kv.Update(ctx, name, b, e.Revision())
		}
		if err == nil {
			return want, nil
		}
		var apiErr *jetstream.APIError
		if !errors.Is(err, jetstream.ErrKeyExists) && !(errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)) {
			return callRecord{}, fmt.Errorf("idempotency key %s: recording the call: %w", key, err)
		}
		// Another call with the key recorded it meanwhile: follow it.
	}
}

// writeHooks let tests fail a write after a message was acknowledged, as
// a lost acknowledgement or an expired deadline would.
var writeHooks struct {
	published atomic.Pointer[func(shard, piece int) error]
}

func publishedHook(shard, piece int) error {
	if h := writeHooks.published.Load(); h != nil {
		return (*h)(shard, piece)
	}
	return nil
}

// callsState is a client's handle on umbra_calls, made on first use.
type callsState struct {
	callsMu sync.Mutex
	calls   jetstream.KeyValue
}
