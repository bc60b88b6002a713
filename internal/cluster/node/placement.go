package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// Placement (NodeConfig.Placement): which nodes hold which shards.
//
//   - Every node registers itself in the bucket umbra_nodes (key: its ID)
//     with its memory, whether it is leaving, and the stream sequence each
//     replica it serves has applied; it puts the record again every
//     placementTick, and the bucket's TTL (nodeTTL) drops a node that
//     stopped.
//   - One node is the controller: it holds the key "controller" in
//     umbra_placement, renewing it by compare-and-set every tick. Another
//     node takes it over (compare-and-set on the same revision) once the
//     revision has not moved for leaseTTL by its own clock, so no clocks
//     are compared.
//   - The controller keeps, per collection, the record "assign.NAME": for
//     each shard the nodes that serve it and the nodes being added, with
//     the stream's last sequence when they were chosen (Since). Each shard
//     gets R replicas (CollectionConfig.NodeReplicas, default 3, at most
//     the live nodes), spread in proportion to the nodes' memory, keeping
//     current holders where the balance allows.
//   - Moves are make-before-break: a node being added follows the stream
//     and answers searches only once it has applied through Since; the
//     controller then makes the new set the serving set, and only then do
//     the nodes left out stop serving (their in-flight requests are
//     answered first). A search thus finds at every moment a replica of
//     every shard that has every write acknowledged before the move
//     (replicas still answer by the caller's token).

// Placement timings; tests shorten them.
var (
	placementTick = 500 * time.Millisecond
	leaseTTL      = 3 * time.Second
	nodeTTL       = 5 * time.Second
)

const (
	BucketNodes     = "umbra_nodes"     // node ID → nodeRecord (TTL nodeTTL)
	BucketPlacement = "umbra_placement" // "controller" → node ID; "assign.NAME" → assignment
	keyController   = "controller"
)

func assignKey(coll string) string { return "assign." + coll }

// nodeRecord is what a node says of itself in umbra_nodes.
type nodeRecord struct {
	ID      string            `json:"id"`
	Memory  int64             `json:"memory"`
	Leaving bool              `json:"leaving,omitempty"`
	Applied map[string]uint64 `json:"applied,omitempty"` // "coll/shard" → applied, for replicas answering searches
}

// shardPlacement is one shard's replicas.
type shardPlacement struct {
	Serving []string `json:"serving"`
	Adding  []string `json:"adding,omitempty"`
	Since   uint64   `json:"since,omitempty"` // the stream's last sequence when Adding was chosen
}

// assignment is a collection's placement record.
type assignment struct {
	Version int              `json:"version"`
	Shards  []shardPlacement `json:"shards"`
}

func appliedKey(coll string, shard int) string { return coll + "/" + strconv.Itoa(shard) }

// nodeID reads the node's ID from DIR/node-id, or makes one and keeps it
// there, so a restarted node is the same node to the controller.
func nodeID(dir string) (string, error) {
	path := filepath.Join(dir, "node-id")
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	id := "n" + strings.ToLower(nats.NewInbox()[len(nats.InboxPrefix):])
	return id, os.WriteFile(path, []byte(id+"\n"), 0o644)
}

// systemMemory is the machine's memory (MemTotal on Linux), or 1 GiB
// where it cannot be read.
func systemMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var kb int64
			if _, err := fmt.Sscanf(sc.Text(), "MemTotal: %d kB", &kb); err == nil && kb > 0 {
				return kb << 10
			}
		}
	}
	return 1 << 30
}

// placeShards computes the replicas each shard should have: r of them
// (at most the nodes), spread so that each node's share of the
// shards × r replicas follows its memory, keeping a shard's current
// holders while they are within their share. nodes are the live nodes
// that may hold replicas, mem their memory; cur the current holders per
// shard.
func placeShards(nodes []string, mem map[string]int64, cur [][]string, r int) [][]string {
	nodes = slices.Sorted(slices.Values(nodes))
	r = min(r, len(nodes))
	out := make([][]string, len(cur))
	if r == 0 {
		return out
	}
	var total float64
	for _, id := range nodes {
		total += float64(max(mem[id], 1))
	}
	slots := float64(len(cur) * r)
	share := map[string]float64{}
	for _, id := range nodes {
		share[id] = slots * float64(max(mem[id], 1)) / total
	}
	load := map[string]int{}
	live := map[string]bool{}
	for _, id := range nodes {
		live[id] = true
	}
	// Current holders first, while each stays within its share (rounded
	// down): first one holder a shard (the least loaded), then more; then
	// the emptiest nodes (load against memory) fill what is left.
	capOf := func(id string) int { return int(share[id] + 1e-9) }
	for round := range 2 {
		for s, holders := range cur {
			if round == 0 {
				out[s] = nil
			}
			cands := slices.Clone(holders)
			slices.SortStableFunc(cands, func(x, y string) int { return load[x] - load[y] })
			for _, id := range cands {
				if (round == 0 && len(out[s]) == 1) || len(out[s]) >= r {
					break
				}
				if live[id] && !slices.Contains(out[s], id) && load[id]+1 <= capOf(id) {
					out[s] = append(out[s], id)
					load[id]++
				}
			}
		}
	}
	for s := range out {
		for len(out[s]) < r {
			best := ""
			for _, id := range nodes {
				if slices.Contains(out[s], id) {
					continue
				}
				if best == "" || float64(load[id]+1)/share[id] < float64(load[best]+1)/share[best] {
					best = id
				}
			}
			out[s] = append(out[s], best)
			load[best]++
		}
		slices.Sort(out[s])
	}
	return out
}

// sameSet says whether a and b hold the same IDs.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// placement is a node's part in placement: registration, the controller
// when it holds the lease, and following its assignments.
type placement struct {
	n       *Node
	id      string
	memory  int64
	nodes   jetstream.KeyValue
	kv      jetstream.KeyValue
	leader  bool
	seenRev uint64          // the controller key's revision last seen held by another node
	seenAt  time.Time       // when it was first seen
	known   map[string]bool // the live nodes the controller saw last round
}

func (n *Node) startPlacement(ctx context.Context) error {
	id := n.cfg.ID
	if id == "" {
		var err error
		if id, err = nodeID(n.cfg.Dir); err != nil {
			return fmt.Errorf("node ID: %w", err)
		}
	}
	mem := n.cfg.Memory
	if mem <= 0 {
		mem = systemMemory()
	}
	p := &placement{n: n, id: id, memory: mem}
	var err error
	if p.nodes, err = n.c.JS.KeyValue(ctx, BucketNodes); errors.Is(err, jetstream.ErrBucketNotFound) {
		p.nodes, err = n.c.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: BucketNodes, Replicas: n.c.Replicas,
			Storage: jetstream.MemoryStorage, History: 1, TTL: nodeTTL})
		if errors.Is(err, jetstream.ErrBucketExists) {
			p.nodes, err = n.c.JS.KeyValue(ctx, BucketNodes)
		}
	}
	if err != nil {
		return fmt.Errorf("bucket %s: %w", BucketNodes, err)
	}
	if p.kv, err = protocol.Bucket(ctx, n.c.JS, BucketPlacement, n.c.Replicas); err != nil {
		return err
	}
	n.place = p
	if err := p.register(ctx); err != nil {
		return err
	}
	n.cfg.Logf("placement: node %s, memory %d bytes", id, mem)
	n.wg.Go(p.heartbeat)
	n.wg.Go(p.loop)
	return nil
}

// ID is the node's ID under placement ("" without it).
func (n *Node) ID() string {
	if n.place == nil {
		return ""
	}
	return n.place.id
}

func (p *placement) register(ctx context.Context) error {
	rec := nodeRecord{ID: p.id, Memory: p.memory, Leaving: p.n.leaving.Load(), Applied: map[string]uint64{}}
	p.n.mu.Lock()
	for coll, reps := range p.n.replicas {
		for s, r := range reps {
			if r != nil && r.answering() {
				rec.Applied[appliedKey(coll, s)] = r.applied.Load()
			}
		}
	}
	p.n.mu.Unlock()
	b, _ := json.Marshal(rec)
	_, err := p.nodes.Put(ctx, p.id, b)
	return err
}

// heartbeat puts the node's record every tick, apart from loop, whose
// steps (a store opened, a subscription drained) may take longer than
// the record's TTL.
func (p *placement) heartbeat() {
	ctx := p.n.ctx
	t := time.NewTicker(placementTick)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, nodeTTL)
		if err := p.register(sctx); err != nil && ctx.Err() == nil {
			p.n.cfg.Logf("placement: registering: %v", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *placement) loop() {
	ctx := p.n.ctx
	t := time.NewTicker(placementTick)
	defer t.Stop()
	for {
		step := func() {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := p.lease(sctx); err != nil && ctx.Err() == nil {
				p.n.cfg.Logf("placement: controller lease: %v", err)
			}
			if p.leader {
				if err := p.control(sctx); err != nil && ctx.Err() == nil {
					p.n.cfg.Logf("placement: controller: %v", err)
				}
			}
			if err := p.follow(sctx); err != nil && ctx.Err() == nil {
				p.n.cfg.Logf("placement: following assignments: %v", err)
			}
		}
		step()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// lease takes or renews the controller key.
func (p *placement) lease(ctx context.Context) error {
	e, err := p.kv.Get(ctx, keyController)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		_, err = p.kv.Create(ctx, keyController, []byte(p.id))
		p.leader = err == nil
		if errors.Is(err, jetstream.ErrKeyExists) {
			err = nil
		}
		return err
	}
	if err != nil {
		p.leader = false
		return err
	}
	if string(e.Value()) != p.id {
		p.leader = false
		if e.Revision() != p.seenRev {
			p.seenRev, p.seenAt = e.Revision(), time.Now()
			return nil
		}
		if time.Since(p.seenAt) < leaseTTL {
			return nil
		}
		p.n.cfg.Logf("placement: controller %s silent for %v: taking over", e.Value(), leaseTTL)
	}
	_, err = p.kv.Update(ctx, keyController, []byte(p.id), e.Revision())
	p.leader = err == nil
	if errors.Is(err, jetstream.ErrKeyExists) {
		err = nil // another node took it
	}
	return err
}

// control brings every collection's assignment up to date.
func (p *placement) control(ctx context.Context) error {
	var metas []*protocol.CollectionRecord
	ckeys, err := p.n.c.Colls.ListKeys(ctx)
	if err != nil {
		return err
	}
	for name := range ckeys.Keys() {
		e, err := p.n.c.Colls.Get(ctx, name)
		if err != nil {
			continue
		}
		if meta, err := protocol.UnmarshalRecord(e.Value()); err == nil {
			metas = append(metas, meta)
		}
	}
	// A listing may miss a key put again while it runs (the bucket keeps
	// one revision a key), so the nodes it misses that the last round saw
	// or that an assignment names are read one by one: only a record that
	// is gone counts as a node gone. (A controller that has just taken
	// over saw no last round; without the assignments' names it would
	// take a serving node it missed for dead and move its shards.)
	ids := map[string]bool{}
	keys, err := p.nodes.ListKeys(ctx)
	if err != nil {
		return err
	}
	hide := TestHooks.ListNodes.Load()
	for k := range keys.Keys() {
		if hide == nil || !(*hide)(k) {
			ids[k] = true
		}
	}
	for k := range p.known {
		ids[k] = true
	}
	for _, meta := range metas {
		e, err := p.kv.Get(ctx, assignKey(meta.Name))
		if err != nil {
			continue // none yet, or unreadable: controlOne says which
		}
		var a assignment
		if json.Unmarshal(e.Value(), &a) == nil {
			for _, sp := range a.Shards {
				for _, id := range slices.Concat(sp.Serving, sp.Adding) {
					ids[id] = true
				}
			}
		}
	}
	nodes := map[string]nodeRecord{}
	for k := range ids {
		e, err := p.nodes.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // expired, or deleted by Close
		}
		if err != nil {
			return fmt.Errorf("node %s: %w", k, err)
		}
		var rec nodeRecord
		if json.Unmarshal(e.Value(), &rec) == nil && rec.ID == k {
			nodes[k] = rec
		}
	}
	p.known = map[string]bool{}
	for k := range nodes {
		p.known[k] = true
	}
	var errs []error
	for _, meta := range metas {
		if err := p.controlOne(ctx, meta, nodes); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", meta.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (p *placement) controlOne(ctx context.Context, meta *protocol.CollectionRecord, nodes map[string]nodeRecord) error {
	var cur assignment
	var rev uint64
	e, err := p.kv.Get(ctx, assignKey(meta.Name))
	switch {
	case err == nil:
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			return fmt.Errorf("assignment unreadable: %w", err)
		}
		rev = e.Revision()
	case errors.Is(err, jetstream.ErrKeyNotFound):
	default:
		return err
	}
	if len(cur.Shards) != meta.Shards {
		cur = assignment{Version: 1, Shards: make([]shardPlacement, meta.Shards)}
	}
	var eligible []string
	mem := map[string]int64{}
	for id, rec := range nodes {
		mem[id] = rec.Memory
		if !rec.Leaving {
			eligible = append(eligible, id)
		}
	}
	if len(eligible) == 0 {
		return nil // nowhere to put anything: leave it as it is
	}
	holders := make([][]string, meta.Shards)
	for s, sp := range cur.Shards {
		holders[s] = append(slices.Clone(sp.Serving), sp.Adding...)
	}
	r := meta.NodeReplicas
	if r <= 0 {
		r = 3
	}
	want := placeShards(eligible, mem, holders, r)
	next := assignment{Version: 1, Shards: make([]shardPlacement, meta.Shards)}
	for s, sp := range cur.Shards {
		var serving []string
		for _, id := range sp.Serving {
			if _, ok := nodes[id]; ok {
				serving = append(serving, id) // a live node serves on until replaced
			}
		}
		np := shardPlacement{Serving: serving}
		var adding []string
		for _, id := range want[s] {
			if !slices.Contains(serving, id) {
				adding = append(adding, id)
			}
		}
		switch {
		case len(adding) == 0:
			np.Serving = want[s] // only removals left: the wanted set serves already
		case sameSet(adding, sp.Adding):
			np.Adding, np.Since = sp.Adding, sp.Since
			ready := true
			for _, id := range adding {
				got, ok := nodes[id].Applied[appliedKey(meta.Name, s)]
				ready = ready && ok && got >= sp.Since
			}
			if ready {
				// Made: the new set serves; then (the nodes read this)
				// the ones left out stop.
				np = shardPlacement{Serving: want[s]}
			}
		default:
			st, err := p.n.c.JS.Stream(ctx, protocol.StreamName(meta.Name, s))
			if err != nil {
				return fmt.Errorf("shard %d: %w", s, err)
			}
			np.Adding, np.Since = adding, st.CachedInfo().State.LastSeq
		}
		slices.Sort(np.Serving)
		next.Shards[s] = np
	}
	b, _ := json.Marshal(next)
	if e != nil && string(e.Value()) == string(b) {
		return nil
	}
	if rev == 0 {
		_, err = p.kv.Create(ctx, assignKey(meta.Name), b)
	} else {
		_, err = p.kv.Update(ctx, assignKey(meta.Name), b, rev)
	}
	if err == nil {
		p.n.cfg.Logf("placement: %s: %s", meta.Name, b)
	}
	return err
}

// follow makes the node hold what its collections' assignments give it.
func (p *placement) follow(ctx context.Context) error {
	p.n.mu.Lock()
	var colls []*protocol.CollectionRecord
	for _, m := range p.n.metas {
		colls = append(colls, m)
	}
	p.n.mu.Unlock()
	var errs []error
	for _, meta := range colls {
		e, err := p.kv.Get(ctx, assignKey(meta.Name))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var a assignment
		if err := json.Unmarshal(e.Value(), &a); err != nil || len(a.Shards) != meta.Shards {
			errs = append(errs, fmt.Errorf("%s: assignment unreadable", meta.Name))
			continue
		}
		for s, sp := range a.Shards {
			switch {
			case slices.Contains(sp.Serving, p.id):
				errs = append(errs, p.n.hold(ctx, meta, s, 0))
			case slices.Contains(sp.Adding, p.id):
				errs = append(errs, p.n.hold(ctx, meta, s, sp.Since))
			default:
				p.n.drop(meta.Name, s)
			}
		}
	}
	return errors.Join(errs...)
}

// Leave asks the controller to move this node's replicas to other nodes
// (make-before-break) and waits until it holds none, or ctx ends; then
// Close. Only under placement.
func (n *Node) Leave(ctx context.Context) error {
	if n.place == nil {
		return errors.New("node: Leave needs placement (NodeConfig.Placement)")
	}
	n.leaving.Store(true)
	// A listing of the nodes can miss one that re-registers while it is
	// read (as the controller's can, see its re-read): "no other node" is
	// believed only when three looks in a row, half a tick apart, say so.
	alone := 0
	for {
		if n.held() == 0 {
			return nil
		}
		if others, err := n.place.others(ctx); err == nil && others == 0 {
			if alone++; alone == 3 {
				return fmt.Errorf("leaving: no other node to hand %d replicas to", n.held())
			}
		} else {
			alone = 0
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("leaving: still holding %d replicas: %w", n.held(), ctx.Err())
		case <-time.After(placementTick / 2):
		}
	}
}

// others counts the live nodes other than this one that are not leaving.
func (p *placement) others(ctx context.Context) (int, error) {
	keys, err := p.nodes.ListKeys(ctx)
	if err != nil {
		return 0, err
	}
	c := 0
	for k := range keys.Keys() {
		if k == p.id {
			continue
		}
		e, err := p.nodes.Get(ctx, k)
		if err != nil {
			continue
		}
		var rec nodeRecord
		if json.Unmarshal(e.Value(), &rec) == nil && !rec.Leaving {
			c++
		}
	}
	return c, nil
}

// held counts the replicas the node holds.
func (n *Node) held() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, reps := range n.replicas {
		c += countHeld(reps)
	}
	return c
}

// unregister removes the node's record and, if it holds it, the
// controller key, so that others need not wait for them to expire.
func (p *placement) unregister() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.nodes.Delete(ctx, p.id)
	if e, err := p.kv.Get(ctx, keyController); err == nil && string(e.Value()) == p.id {
		_ = p.kv.Delete(ctx, keyController, jetstream.LastRevision(e.Revision()))
	}
}
