package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// What a client may not do itself, a node does for it: a client's
// credentials may neither create streams (it could then make or change
// any stream) nor write the collection records (it could change a
// collection's shards or dimension under its nodes). So Create and a
// write's new metadata fields go as requests to umbra.admin.create and
// umbra.admin.schema, which every node answers (one of them, a queue
// group), checking them as a client would. Where no node answers (none
// runs yet) the client does it itself, which only a connection with the
// rights can (node credentials, or a server without authorization).

// adminReply is a node's answer to an admin request.
type AdminReply struct {
	Status string          `json:"status"` // ok, exists, invalid, moved, error
	Error  string          `json:"error,omitempty"`
	Record json.RawMessage `json:"record,omitempty"` // the collection's record (create)
}

const (
	AdminOK      = "ok"
	AdminExists  = "exists"  // ErrCollectionExists
	AdminInvalid = "invalid" // a request the node refuses
	AdminMoved   = "moved"   // the record's revision moved: read it again
	AdminError   = "error"
)

// schemaRequest asks a node to add fields to a collection's record at
// revision Rev.
type SchemaRequest struct {
	Name   string            `json:"name"`
	Rev    uint64            `json:"rev"`
	Fields map[string]string `json:"fields"` // field → meta.Kind's name
}

// sameCollection refuses old, a collection's record, where a Create asked
// for another layout (ErrCollectionExists).
func SameCollection(old, want *CollectionRecord) error {
	if old.Dim != want.Dim || old.Metric != want.Metric || old.Shards != want.Shards ||
		(want.NodeReplicas != 0 && old.NodeReplicas != want.NodeReplicas) {
		return fmt.Errorf("%w: %q has dim %d, metric %s, %d shards, node replicas %d", ErrCollectionExists, old.Name,
			old.Dim, old.Metric, old.Shards, old.NodeReplicas)
	}
	return nil
}

// streamConfig is shard s's stream.
func StreamConfig(meta *CollectionRecord, s int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:       StreamName(meta.Name, s),
		Subjects:   []string{WriteSubject(meta.Name, s)},
		Storage:    jetstream.FileStorage,
		Replicas:   meta.Replicas,
		Retention:  jetstream.LimitsPolicy,
		Discard:    jetstream.DiscardNew,
		MaxBytes:   meta.MaxBytes,
		Duplicates: meta.Window(),
	}
}

// createCollection creates the collection's streams, its ID counter and
// its record, the record last: a collection exists once its record does.
// Idempotent: run again (by this client or another, at the same time or
// after a failure half-way), it ends with the same collection, or with
// ErrCollectionExists when the name was taken with another layout.
// Streams are created, never updated: an existing stream of another
// configuration is not changed (its limits could shrink under its data).
func (c *Conn) CreateCollection(ctx context.Context, meta *CollectionRecord) (*CollectionRecord, error) {
	if e, err := c.Colls.Get(ctx, meta.Name); err == nil {
		old, err := UnmarshalRecord(e.Value())
		if err != nil {
			return nil, err
		}
		return old, SameCollection(old, meta)
	}
	for s := range meta.Shards {
		if err := c.CreateStream(ctx, meta, s); err != nil {
			return nil, fmt.Errorf("creating shard %d's stream: %w", s, err)
		}
	}
	if _, err := c.Ctrs.Create(ctx, meta.Name, []byte("0")); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("the collection's ID counter: %w", err)
	}
	if _, err := c.Colls.Create(ctx, meta.Name, meta.Marshal()); err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("the collection's record: %w", err)
		}
		// Created by another meanwhile.
		e, err := c.Colls.Get(ctx, meta.Name)
		if err != nil {
			return nil, fmt.Errorf("the collection's record: %w", err)
		}
		old, err := UnmarshalRecord(e.Value())
		if err != nil {
			return nil, err
		}
		return old, SameCollection(old, meta)
	}
	return meta, nil
}

// createStream creates shard s's stream, or finds it there: made by
// another create of the collection (now, or one that stopped half-way),
// it is kept as it is, its limits (MaxBytes, Replicas) those of the
// create that made it. A stream of that name that is not one of umbra's
// shards (other subjects or kind) is refused.
func (c *Conn) CreateStream(ctx context.Context, meta *CollectionRecord, s int) error {
	want := StreamConfig(meta, s)
	_, err := c.JS.CreateStream(ctx, want)
	if err == nil || !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return err
	}
	st, err := c.JS.Stream(ctx, want.Name)
	if err != nil {
		return err
	}
	got := st.CachedInfo().Config
	if !slices.Equal(got.Subjects, want.Subjects) || got.Storage != want.Storage || got.Retention != want.Retention ||
		got.Discard != want.Discard || got.Duplicates != want.Duplicates {
		return fmt.Errorf("%w: stream %s exists and is not a shard of collection %q as umbra makes them (subjects %v, %v storage, %v retention, discard %v, duplicate window %v)",
			ErrCollectionExists, want.Name, meta.Name, got.Subjects, got.Storage, got.Retention, got.Discard, got.Duplicates)
	}
	return nil
}
