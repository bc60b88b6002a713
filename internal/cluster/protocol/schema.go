package protocol

import (
	"github.com/umbravec/umbra/internal/metaindex"
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

// schemaIndex is an empty metadata index that knows fields.
func SchemaIndex(fields map[string]meta.Kind) *metaindex.Index {
	mi := metaindex.NewIndex(meta.Limits{})
	for name, k := range fields {
		_ = mi.Declare(name, k) // a fresh index: only a bad name fails, and the record's were checked
	}
	return mi
}
