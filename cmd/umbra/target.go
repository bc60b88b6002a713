package main

import (
	"context"
	"fmt"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/cluster"
	"github.com/umbravec/umbra/engine"
)

// A command runs once, against an umbra.Collection: a store (a path), an
// index of a vector file in memory (search --data), or a cluster
// collection (--cluster URL --collection NAME). The flags only choose
// which; what only one kind has — a store's files, a collection's shards
// and idempotency keys — is asked of target where a command reports it.

// target is what a command talks to.
type target struct {
	umbra.Collection
	// label names it in messages: the store's path, or "collection NAME".
	label string
	// store is the store or index (nil for a collection); col and client
	// the collection and its connection (nil for a store).
	store  *engine.Index
	col    *cluster.Collection
	client *cluster.Client
	// key is the idempotency key of the collection write in progress.
	key string
}

// openTarget opens what a command's flags name: the existing store at path
// (read-only when readOnly: no lock, beside a writer), or, with --cluster,
// the collection --collection.
func openTarget(ctx context.Context, e *env, path string, cf *clusterFlags, readOnly bool, cfg engine.Config) (*target, error) {
	if cf.Cluster != "" {
		c, col, err := cf.open(ctx)
		if err != nil {
			return nil, err
		}
		return &target{Collection: col, label: "collection " + cf.Collection, col: col, client: c}, nil
	}
	var ix *engine.Index
	var err error
	if readOnly {
		ix, err = openStoreReadOnly(ctx, e, path, cfg)
	} else {
		ix, err = openStore(ctx, e, path, cfg)
	}
	if err != nil {
		return nil, err
	}
	return &target{Collection: ix, label: path, store: ix}, nil
}

// indexTarget is a target of an index in memory (search --data, build).
func indexTarget(ix *engine.Index, label string) *target {
	return &target{Collection: ix, label: label, store: ix}
}

// close closes what openTarget opened, reporting a failure to sync a
// store's log as the command's error unless it already has one.
func (t *target) close(err *error) {
	if t.store != nil {
		closeStore(t.label, t.store, err)
		return
	}
	t.col.Close()
	t.client.Close()
}

// what names the target in an error: "store PATH" or "collection NAME".
func (t *target) what() string {
	if t.store != nil {
		return "store " + t.label
	}
	return t.label
}

// writeOptions are the options every write to the target carries: a
// collection's idempotency key (flag's, or a fresh one, printed).
func (t *target) writeOptions(e *env, flag *idempotencyFlag) []umbra.WriteOption {
	if t.col == nil {
		return nil
	}
	t.key = flag.key(e)
	return []umbra.WriteOption{umbra.IdempotencyKey(t.key)}
}

// wrote is what a write's report adds for a collection: the token its
// reads wait for, and the idempotency key it may be retried with.
func (t *target) wrote() string {
	if t.col == nil {
		return ""
	}
	return fmt.Sprintf(" (token %v, idempotency key %s)", t.col.Token(), t.key)
}

// writeFailed words a write's failure: a collection's names the key to
// retry it with.
func (t *target) writeFailed(err error) error {
	if t.col != nil && t.key != "" {
		return retryWith(err, t.key)
	}
	return err
}

// rows is how many rows the target holds.
func (t *target) rows(ctx context.Context) (int, error) {
	s, err := t.Summary(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s: %s", t.what(), cause(err))
	}
	return s.Rows, nil
}

// storedIDs returns which of ids the target holds.
func storedIDs(ctx context.Context, c umbra.Collection, ids []uint64) (map[uint64]bool, error) {
	recs, err := c.Get(ctx, umbra.Selection{IDs: ids})
	if err != nil {
		return nil, err
	}
	held := make(map[uint64]bool, len(recs))
	for _, r := range recs {
		held[r.ID] = true
	}
	return held, nil
}

// storedKeys returns the IDs of the keys the target holds.
func storedKeys(ctx context.Context, c umbra.Collection, keys []string) (map[string]uint64, error) {
	recs, err := c.Get(ctx, umbra.Selection{Keys: keys})
	if err != nil {
		return nil, err
	}
	held := make(map[string]uint64, len(recs))
	for _, r := range recs {
		held[r.Key] = r.ID
	}
	return held, nil
}
