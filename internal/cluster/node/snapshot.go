package node

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// snapshotManifest names a shard's newest snapshot: a store base file
// (umbra's own checksummed format, the applied sequence inside it as its
// sentinel row) in the Object Store.
type snapshotManifest struct {
	Version int    `json:"version"` // 1
	Seq     uint64 `json:"seq"`     // the stream sequence the snapshot has applied
	Object  string `json:"object"`
	Size    int64  `json:"size"`
	// Parts, when above 0, says the file is in that many objects,
	// Object/part-0 …, each snapshotPart bytes but the last.
	Parts int `json:"parts,omitempty"`
	// Prev is the snapshot before this one, kept with its objects: the
	// stream is trimmed below it, not below this one, so that a replica
	// a few messages behind when a snapshot is taken follows the tail
	// rather than downloading the whole shard. (Its own Prev is nil.)
	Prev *snapshotManifest `json:"prev,omitempty"`
}

// snapshotPart bounds one Object Store Put. Put publishes its chunks
// without waiting for them (up to 4000 in flight): under sync always the
// stream stores them slower than they come, and past 128 MiB queued on a
// stream the server refuses publishes ("too many requests"), past 4000
// the client stalls — a 512 MB snapshot failed either way. A Put of 64 MB
// has 512 chunks in flight at most, and returns once all are stored.
var snapshotPart int64 = 64 << 20 // a variable for tests of several parts

// objects are the names of the snapshot's objects, in order.
func (m *snapshotManifest) objects() []string {
	if m.Parts == 0 {
		return []string{m.Object}
	}
	out := make([]string, m.Parts)
	for i := range out {
		out[i] = fmt.Sprintf("%s/part-%d", m.Object, i)
	}
	return out
}

func snapshotKey(coll string, shard int) string { return coll + "." + strconv.Itoa(shard) }

// claimKey names a shard's snapshot claim in umbra_snapshots: the
// sequence of the newest periodic snapshot a node took on (a collection
// name has no '.', so "claim.NAME.S" meets no manifest key "NAME.S").
func claimKey(coll string, shard int) string { return "claim." + snapshotKey(coll, shard) }

// snapshotClaim is what a claim key holds.
type snapshotClaim struct {
	Seq  uint64 `json:"seq"`
	Node string `json:"node,omitempty"` // for a person reading the bucket
}

// periodicSnapshot is SnapshotEvery's snapshot of a replica that has just
// applied seq. Every replica of the shard reaches seq, but one snapshot a
// round is enough: the first node to move the shard's claim up to seq (by
// compare-and-set) takes it, the others leave it. A node that claims and
// dies leaves that round without a snapshot; the next round is claimed
// anew.
func (n *Node) periodicSnapshot(ctx context.Context, r *replica, meta *protocol.CollectionRecord, seq uint64) error {
	kv, _, err := n.snapshotStores(ctx)
	if err != nil {
		return err
	}
	key := claimKey(meta.Name, r.shard)
	b, _ := json.Marshal(snapshotClaim{Seq: seq, Node: n.ID()})
	switch e, err := kv.Get(ctx, key); {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		if _, err := kv.Create(ctx, key, b); err != nil {
			if isWrongRevision(err) {
				return nil // another node claimed first
			}
			return err
		}
	case err != nil:
		return err
	default:
		var c snapshotClaim
		if json.Unmarshal(e.Value(), &c) == nil && c.Seq >= seq {
			return nil // taken by another node, this round or a later one
		}
		if _, err := kv.Update(ctx, key, b, e.Revision()); err != nil {
			if isWrongRevision(err) {
				return nil
			}
			return err
		}
	}
	return n.snapshot(ctx, r, meta)
}

// isWrongRevision says whether a KV Update or Create failed because the
// key moved on (another writer was first): the client reports both as
// ErrKeyExists.
func isWrongRevision(err error) bool { return errors.Is(err, jetstream.ErrKeyExists) }

func (n *Node) snapshotStores(ctx context.Context) (jetstream.KeyValue, jetstream.ObjectStore, error) {
	kv, err := protocol.Bucket(ctx, n.c.JS, protocol.BucketSnapshots, n.c.Replicas)
	if err != nil {
		return nil, nil, err
	}
	obs, err := n.c.JS.ObjectStore(ctx, protocol.ObjectSnapshots)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = n.c.JS.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: protocol.ObjectSnapshots, Replicas: n.c.Replicas, Storage: jetstream.FileStorage})
		if errors.Is(err, jetstream.ErrBucketExists) {
			obs, err = n.c.JS.ObjectStore(ctx, protocol.ObjectSnapshots)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("object store %s: %w", protocol.ObjectSnapshots, err)
	}
	return kv, obs, nil
}

// Snapshot saves the replica of shard to the Object Store and records it
// as the shard's newest snapshot. Two are kept per shard, this one and
// the one before it, and the shard's stream is trimmed below the older:
// the first snapshot trims nothing, the second trims below the first.
func (n *Node) Snapshot(ctx context.Context, collection string, shard int) (uint64, error) {
	n.mu.Lock()
	reps := n.replicas[collection]
	n.mu.Unlock()
	if shard < 0 || shard >= len(reps) || reps[shard] == nil {
		return 0, fmt.Errorf("this node holds no replica of %s/%d", collection, shard)
	}
	e, err := n.c.Colls.Get(ctx, collection)
	if err != nil {
		return 0, err
	}
	meta, err := protocol.UnmarshalRecord(e.Value())
	if err != nil {
		return 0, err
	}
	if err := n.snapshot(ctx, reps[shard], meta); err != nil {
		return 0, err
	}
	return reps[shard].applied.Load(), nil
}

func (n *Node) snapshot(ctx context.Context, r *replica, meta *protocol.CollectionRecord) error {
	kv, obs, err := n.snapshotStores(ctx)
	if err != nil {
		return err
	}
	dir := filepath.Join(n.cfg.Dir, "replicas", meta.Name)
	tmp := filepath.Join(dir, fmt.Sprintf("shard-%d.snapshot", r.shard))
	// The save holds applies off (mu), so the file is one applied state;
	// searches go on.
	r.mu.Lock()
	seq := r.applied.Load()
	err = r.store().Save(ctx, tmp)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	// The objects are this snapshot's alone (a random part in the name):
	// two nodes snapshotting one shard at one sequence (Node.Snapshot
	// called on both) must not write parts of one object name, since
	// their files differ (each base has its own generation).
	var tag [6]byte
	rand.Read(tag[:])
	name := fmt.Sprintf("%s/%d/%d-%x", meta.Name, r.shard, seq, tag)
	man := snapshotManifest{Version: 1, Seq: seq, Object: name, Size: fi.Size(), Parts: int(max(1, (fi.Size()+snapshotPart-1)/snapshotPart))}
	deleteAll := func(m *snapshotManifest) {
		for _, o := range m.objects() {
			_ = obs.Delete(ctx, o)
		}
	}
	for i, o := range man.objects() {
		part := io.NewSectionReader(f, int64(i)*snapshotPart, snapshotPart)
		if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: o}, part); err != nil {
			deleteAll(&man)
			return fmt.Errorf("uploading %s: %w", o, err)
		}
	}
	if h := TestHooks.Snapshot.Load(); h != nil {
		(*h)(r.shard, seq)
	}
	// The manifest moves forward only, by compare-and-set: of two
	// snapshots racing, the newer is kept and the other's objects go.
	// The one it replaces becomes its Prev; the Prev before that goes.
	key := snapshotKey(meta.Name, r.shard)
	var old snapshotManifest
	for {
		old = snapshotManifest{}
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			man.Prev = nil
			b, _ := json.Marshal(man)
			_, err = kv.Create(ctx, key, b)
		case err != nil:
		default:
			if json.Unmarshal(e.Value(), &old) == nil && old.Seq >= seq {
				deleteAll(&man) // one as new or newer is kept already
				return nil
			}
			man.Prev = nil
			if old.Object != "" {
				prev := old
				prev.Prev = nil
				man.Prev = &prev
			}
			b, _ := json.Marshal(man)
			_, err = kv.Update(ctx, key, b, e.Revision())
		}
		if err == nil {
			break
		}
		if !isWrongRevision(err) {
			deleteAll(&man)
			return err
		}
	}
	if old.Prev != nil {
		deleteAll(old.Prev)
	}
	if man.Prev == nil {
		n.cfg.Logf("shard %s/%d: snapshot at %d (%d bytes in %d objects), the first: the stream is trimmed at the next", meta.Name, r.shard, seq, man.Size, man.Parts)
		return nil
	}
	// Trim the stream below the older snapshot kept: a replica further
	// behind recovers from the newest snapshot, then the tail.
	st, err := n.c.JS.Stream(ctx, protocol.StreamName(meta.Name, r.shard))
	if err != nil {
		return err
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(man.Prev.Seq+1)); err != nil {
		return fmt.Errorf("trimming the stream below %d: %w", man.Prev.Seq+1, err)
	}
	n.cfg.Logf("shard %s/%d: snapshot at %d (%d bytes in %d objects), stream trimmed below the one before, at %d", meta.Name, r.shard, seq, man.Size, man.Parts, man.Prev.Seq)
	return nil
}

// recover replaces a replica that fell behind its trimmed stream (the next
// message it can read is next) with the shard's newest snapshot, then the
// follower goes on from the snapshot's sequence.
func (n *Node) recover(r *replica, meta *protocol.CollectionRecord, next uint64) error {
	ctx := r.ctx
	_, obs, err := n.snapshotStores(ctx)
	if err != nil {
		return err
	}
	man, err := n.newestSnapshot(ctx, meta.Name, r.shard)
	if err != nil {
		return err
	}
	if man == nil {
		return fmt.Errorf("behind the stream (next message %d, applied %d) and no snapshot", next, r.applied.Load())
	}
	if man.Seq+1 < next {
		return fmt.Errorf("behind the stream (next message %d) and the newest snapshot is at %d", next, man.Seq)
	}
	dir := filepath.Join(n.cfg.Dir, "replicas", meta.Name)
	tmp := filepath.Join(dir, fmt.Sprintf("shard-%d.download", r.shard))
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	for _, o := range man.objects() {
		var res jetstream.ObjectResult
		if res, err = obs.Get(ctx, o); err == nil {
			_, err = io.Copy(f, res) // the object store checks the digest at the end
			res.Close()
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("downloading snapshot %s: %w", man.Object, err)
	}
	// Check the download is a store, and what it applied, before it
	// replaces anything.
	metric, _ := meta.ParseMetric()
	cfg := engine.Config{Dim: meta.Dim, Metric: metric, Device: n.cfg.Device}
	probe, err := openReplica(ctx, meta.Name, r.shard, tmp, engine.Config{Dim: meta.Dim, Metric: metric, Device: engine.CPU})
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", man.Object, err)
	}
	got := probe.applied.Load()
	probe.close()
	os.Remove(tmp + ".log")
	os.Remove(tmp + ".lock")
	if got != man.Seq {
		return fmt.Errorf("snapshot %s holds sequence %d, its manifest says %d", man.Object, got, man.Seq)
	}
	// Swap: the old store's log goes first, so a crash leaves either the
	// old base alone (an older state: it recovers again) or the snapshot.
	path := filepath.Join(dir, fmt.Sprintf("shard-%d.umbra", r.shard))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ixMu.Lock()
	defer r.ixMu.Unlock()
	if err := r.ix.Close(); err != nil {
		return err
	}
	os.Remove(path + ".log")
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	ix, err := engine.Open(ctx, path, cfg)
	if err != nil {
		return err
	}
	sentinels, err := ix.Get(ctx, umbra.Selection{From: protocol.ReservedIDs})
	if err != nil {
		ix.Close()
		return err
	}
	r.ix = ix
	r.live = nil
	for _, rec := range sentinels {
		r.live = append(r.live, rec.ID)
	}
	r.applied.Store(got)
	r.cond.Broadcast()
	n.cfg.Logf("shard %s/%d: recovered from snapshot at %d", meta.Name, r.shard, got)
	return errors.New("recovered from a snapshot; following the stream from there")
}

// newestSnapshot returns the manifest of the shard's newest snapshot, or
// nil when it has none (nor a snapshot bucket).
func (n *Node) newestSnapshot(ctx context.Context, coll string, shard int) (*snapshotManifest, error) {
	kv, err := n.c.JS.KeyValue(ctx, protocol.BucketSnapshots)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, snapshotKey(coll, shard))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var man snapshotManifest
	if err := json.Unmarshal(e.Value(), &man); err != nil || man.Version != 1 {
		return nil, fmt.Errorf("snapshot manifest %q unreadable", e.Value())
	}
	return &man, nil
}
