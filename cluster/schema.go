package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/meta"
)

// The collection's metadata schema lives in its record in the collections
// bucket (collectionMeta.Fields). A write that gives metadata is checked
// against it before it is published: a value of another kind than the
// record's is refused there, and a field the record lacks is added to it
// by a compare-and-set on the record's revision, so two writers giving a
// new field different kinds cannot both succeed — the second re-reads the
// record and is refused. Every published write thus agrees with the
// record, and every shard's store, which fixes a field's kind at its first
// value, agrees with it too. A field is in the record from the first write
// that gives it on, even when a replica then refuses that write for
// another reason (an ID already stored): a filter may name it, and it
// matches as a field no row has.

// cachedFields is the schema as this handle last read it.
func (col *Collection) cachedFields() map[string]meta.Kind {
	col.mu.Lock()
	defer col.mu.Unlock()
	return col.fields
}

// readRecord reads the collection's record and its revision, retrying
// while the bucket has no leader, and refreshes the cached schema.
func (col *Collection) readRecord(ctx context.Context) (*protocol.CollectionRecord, uint64, error) {
	backoff := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		e, err := col.c.x.Colls.Get(actx, col.meta.Name)
		cancel()
		if err == nil {
			rec, err := protocol.UnmarshalRecord(e.Value())
			if err != nil {
				return nil, 0, err
			}
			fields, err := rec.Schema()
			if err != nil {
				return nil, 0, err
			}
			col.mu.Lock()
			col.fields = fields
			col.mu.Unlock()
			return rec, e.Revision(), nil
		}
		if errors.Is(err, jetstream.ErrKeyNotFound) || ctx.Err() != nil {
			return nil, 0, fmt.Errorf("collection record %q: %w", col.meta.Name, err)
		}
		select {
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("collection record %q: %w", col.meta.Name, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// ensureSchema makes sure the collection's schema holds every field rows
// give, with the kinds they give: it refuses rows that disagree with it
// (or among themselves, or over the metadata limits) and records new
// fields before returning.
func (col *Collection) ensureSchema(ctx context.Context, rows []meta.Fields) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, col.c.timeout)
		defer cancel()
	}
	fields := col.cachedFields()
	fresh := false
	for {
		if err := protocol.SchemaIndex(fields).Check(rows, nil); err != nil {
			if !fresh {
				// The record may know more than this handle: read it.
				if _, _, err := col.readRecord(ctx); err != nil {
					return err
				}
				fields, fresh = col.cachedFields(), true
				continue
			}
			return fmt.Errorf("%w: %w", umbra.ErrInvalidMeta, err)
		}
		added := map[string]meta.Kind{}
		for _, f := range rows {
			for name, v := range f {
				if _, ok := fields[name]; !ok {
					added[name] = v.Kind()
				}
			}
		}
		if len(added) == 0 {
			return nil
		}
		rec, rev, err := col.readRecord(ctx)
		if err != nil {
			return err
		}
		if len(rec.Fields) != len(fields) {
			fields, fresh = col.cachedFields(), true // moved since: check again
			continue
		}
		next := *rec
		next.Fields = make(map[string]string, len(rec.Fields)+len(added))
		maps.Copy(next.Fields, rec.Fields)
		for name, k := range added {
			next.Fields[name] = k.String()
		}
		// Through a node (a client may not write the record itself).
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = col.c.recordFields(actx, col.meta.Name, rev, added, &next)
		cancel()
		if errors.Is(err, umbra.ErrInvalidMeta) {
			return err
		}
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("recording the metadata schema: %w", err)
		}
		if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			time.Sleep(100 * time.Millisecond) // no leader, say: not at once
		}
		// Recorded, or another writer moved the record, or no answer (the
		// update may have applied): read it again and check.
		if _, _, err := col.readRecord(ctx); err != nil {
			return err
		}
		fields, fresh = col.cachedFields(), true
	}
}

// checkFilter checks f against the collection's schema as the engine does
// against a store's: a field the collection does not know, or a value of
// another kind, is engine.ErrInvalidFilter.
func (col *Collection) checkFilter(ctx context.Context, f meta.Filter) error {
	if err := protocol.SchemaIndex(col.cachedFields()).Validate(f); err == nil {
		return nil
	}
	if _, _, err := col.readRecord(ctx); err != nil {
		return err
	}
	if err := protocol.SchemaIndex(col.cachedFields()).Validate(f); err != nil {
		return fmt.Errorf("%w: %w", umbra.ErrInvalidFilter, err)
	}
	return nil
}
