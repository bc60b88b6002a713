package protocol

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// DefaultDedupWindow is a collection's duplicate window unless
// CollectionConfig.DedupWindow says otherwise; MaxDedupWindow the longest.
const (
	DefaultDedupWindow = 10 * time.Minute
	MaxDedupWindow     = time.Hour
	// legacyDedupWindow is the window of collections created before it
	// was recorded.
	LegacyDedupWindow = 2 * time.Minute
)

// bucketCalls keeps the record of every write with an idempotency key, for
// MaxDedupWindow.
const BucketCalls = "umbra_calls"

// dedupWindow is the collection's duplicate window.
func (m *CollectionRecord) Window() time.Duration {
	if m.DedupWindow > 0 {
		return m.DedupWindow
	}
	return LegacyDedupWindow
}

// openCalls opens umbra_calls, creating it when absent.
func (c *Conn) OpenCalls(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := c.JS.KeyValue(ctx, BucketCalls)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = c.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: BucketCalls, Replicas: c.Replicas,
			Storage: jetstream.FileStorage, History: 1, TTL: MaxDedupWindow})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = c.JS.KeyValue(ctx, BucketCalls)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", BucketCalls, err)
	}
	return kv, nil
}
