package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/meta"
)

// Errors of the cluster.
var (
	// ErrShardsUnavailable: some shard gave no answer by the deadline (no
	// replica serves it, every replica was behind, failed, stopped at a
	// message it cannot apply (ErrShardStopped), or gave replies that do
	// not verify). The error names the shards and, for each, the last
	// thing heard; no partial answer is returned.
	ErrShardsUnavailable = errors.New("shards unavailable")
	// ErrNoCollection: no collection of that name.
	ErrNoCollection = errors.New("no such collection")
	// ErrCollectionExists: Create of a name already taken with another
	// configuration.
	ErrCollectionExists = errors.New("collection exists")
	// ErrReservedID: IDs from ReservedIDs up are the cluster's own.
	ErrReservedID = errors.New("reserved ID")
	// ErrOutcomeUnknown: the write is durable in its shard's stream (it
	// will be applied, exactly once, by every replica), but no replica
	// could report how it applied before the deadline.
	ErrOutcomeUnknown = errors.New("write acknowledged, outcome unknown")
	// ErrUnreadableMessage: a write message no replica could read (its
	// checksum failed, it was too short to carry one, or its body did not
	// decode), or one an operator skipped ('umbra repair --skip'): every
	// replica passed it without changing any row. The error says why.
	ErrUnreadableMessage = errors.New("unreadable write message, skipped")
	// ErrShardStopped: a shard's replica stopped at a stream message it
	// cannot apply (its checksum holds, its format version is newer than
	// the build's). The error names the message and the way out: upgrade
	// the node, or skip the message with 'umbra repair'. The cluster client's
	// error of a search whose shards stopped so wraps it besides
	// ErrShardsUnavailable.
	ErrShardStopped = errors.New("shard stopped")
)

// ReservedIDs is the first ID the cluster keeps for itself: each replica
// records the stream sequence it has applied as a row with ID
// ReservedIDs+sequence inside the same atomic store write that applies the
// message (see the package documentation). Writes naming an ID at or above
// it are refused (ErrReservedID); searches never return one.
const ReservedIDs = uint64(0xFFFF) << 48

// collectionMeta is a collection's schema and layout, kept in the
// collections bucket under its name. Shards and the hash functions are
// fixed when a collection is created: a row's shard never changes.
type CollectionRecord struct {
	Version  int    `json:"version"` // of this record's layout; 1
	Name     string `json:"name"`
	Dim      int    `json:"dim"`
	Metric   string `json:"metric"`
	Shards   int    `json:"shards"`
	Replicas int    `json:"replicas"` // of each stream (JetStream R)
	// NodeReplicas is how many nodes hold each shard under placement (0:
	// 3, at most the live nodes).
	NodeReplicas int       `json:"node_replicas,omitempty"`
	MaxBytes     int64     `json:"max_bytes"`
	Created      time.Time `json:"created"`
	// Fields is the metadata schema, field → kind (meta.Kind's name): a
	// field's kind is fixed by the first write anywhere that gives it. A
	// client adds a write's new fields here (compare-and-set on the
	// record's revision) before it publishes the write, and refuses a
	// write whose kind differs from the record's before publishing it,
	// so every published write agrees with this schema and with every
	// shard's store.
	Fields map[string]string `json:"fields,omitempty"`
	// DedupWindow is the streams' duplicate window (0 in records made
	// before it was recorded: 2 minutes, idempotent.go).
	DedupWindow time.Duration `json:"dedup_window,omitempty"`
}

// kinds maps meta.Kind names back to kinds.
var Kinds = func() map[string]meta.Kind {
	m := map[string]meta.Kind{}
	for k := meta.Keyword; k <= meta.Tags; k++ {
		m[k.String()] = k
	}
	return m
}()

// schema is the record's fields as kinds.
func (m *CollectionRecord) Schema() (map[string]meta.Kind, error) {
	out := make(map[string]meta.Kind, len(m.Fields))
	for name, kn := range m.Fields {
		k, ok := Kinds[kn]
		if !ok {
			return nil, fmt.Errorf("collection record %q: field %q has kind %q, which this build does not know (upgrade umbra)", m.Name, name, kn)
		}
		out[name] = k
	}
	return out, nil
}

func (m *CollectionRecord) ParseMetric() (umbra.Metric, error) { return umbra.ParseMetric(m.Metric) }

func (m *CollectionRecord) Marshal() []byte {
	b, _ := json.Marshal(m)
	return b
}

func UnmarshalRecord(b []byte) (*CollectionRecord, error) {
	var m CollectionRecord
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("collection record: %w", err)
	}
	if m.Version != 1 {
		return nil, fmt.Errorf("collection record %q has layout version %d; this build reads 1 (upgrade umbra)", m.Name, m.Version)
	}
	if m.Dim < 1 || m.Shards < 1 || m.Shards > MaxShards {
		return nil, fmt.Errorf("collection record %q: dim %d, shards %d", m.Name, m.Dim, m.Shards)
	}
	return &m, nil
}

const MaxShards = 1024

var nameRule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

func CheckName(name string) error {
	if !nameRule.MatchString(name) {
		return fmt.Errorf("collection name %q: a name is 1 to 64 letters, digits, '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// Buckets and subjects. Everything of umbra's lives under these names, so a
// NATS system shared with other applications keeps them apart.
const (
	BucketCollections = "umbra_collections" // name → collectionMeta
	BucketCounters    = "umbra_counters"    // name → where the next ID block starts; name.floor → past every caller ID (decimal)
	BucketSnapshots   = "umbra_snapshots"   // name.shard → snapshotManifest
	ObjectSnapshots   = "umbra_snapshots"   // snapshot files
	BucketRepairs     = "umbra_repairs"     // name.shard.seq → repairRecord (an operator's skip)
)

func StreamName(coll string, shard int) string { return fmt.Sprintf("UMBRA_%s_%d", coll, shard) }
func WriteSubject(coll string, shard int) string {
	return fmt.Sprintf("umbra.w.%s.%d", coll, shard)
}
func QuerySubject(coll string, shard int) string {
	return fmt.Sprintf("umbra.q.%s.%d", coll, shard)
}
func QueueGroup(coll string, shard int) string { return fmt.Sprintf("umbra_%s_%d", coll, shard) }

// mix is splitmix64's finaliser: a bijection that spreads consecutive or
// strided IDs evenly over the shards.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// shardOfID is the shard a row named by ID lives in.
func ShardOfID(id uint64, shards int) int { return int(mix(id) % uint64(shards)) }

// shardOfKey is the shard a row named by key lives in: its key decides, so
// that every write of one key meets the same shard, which holds the key's
// ID. The ID a new key gets is chosen so that shardOfID agrees.
func ShardOfKey(key string, shards int) int {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int(mix(h.Sum64()) % uint64(shards))
}
