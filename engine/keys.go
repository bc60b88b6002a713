package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/keyrule"
)

// String keys, for applications whose own IDs are strings (UUIDs, paths):
// each key names one stored vector through the uint64 ID the index
// assigns it, and Save and Open keep the mapping with the vectors.
//
// Every write that stores keys (Add, Upsert) holds them to one rule,
// internal/keyrule's, which the umbra command checks its key files
// against too: non-empty, valid UTF-8, no line break, at most 4096 bytes.
// A store written before the rule may hold keys that break it; they are
// read, looked up and deleted as ever, only not written again.

// keyMap maps keys to IDs and back. The caller holds the index's locks.
type keyMap struct {
	id  map[string]uint64
	key map[uint64]string
}

func (k *keyMap) init() {
	if k.id == nil {
		k.id, k.key = map[string]uint64{}, map[uint64]string{}
	}
}

func (k *keyMap) set(key string, id uint64) {
	k.init()
	k.id[key], k.key[id] = id, key
}

func (k *keyMap) dropID(id uint64) {
	if key, ok := k.key[id]; ok {
		delete(k.key, id)
		delete(k.id, key)
	}
}

func (ix *Index) keyed(ctx context.Context, keys []string, vectors [][]float32, upsert bool, a *callAttrs) (ids []uint64, err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	if err := ix.writable(); err != nil {
		return nil, err
	}
	if len(keys) != len(vectors) {
		return nil, fmt.Errorf("%w: %d keys for %d vectors", umbra.ErrIDCount, len(keys), len(vectors))
	}
	// IDs are decided under the writers' lock, so no other writer can take
	// one between here and the write itself.
	if err := ix.lockWriter(); err != nil {
		return nil, err
	}
	defer ix.wmu.Unlock()
	// Bad metadata or a bad row is the error whatever is wrong with the
	// keys (refusal): they are checked again only when a key is refused.
	if err := checkKeys(keys, false); err != nil {
		return nil, ix.refusal(vectors, a, err)
	}
	ix.mu.RLock()
	ids = make([]uint64, len(keys))
	var fresh []int
	for i, key := range keys {
		if id, ok := ix.keys.id[key]; ok {
			if !upsert {
				ix.mu.RUnlock()
				return nil, ix.refusal(vectors, a, keyStored(key, i))
			}
			ids[i] = id
		} else {
			fresh = append(fresh, i)
		}
	}
	next, err := ix.rid.assign(len(fresh))
	ix.mu.RUnlock()
	if err != nil {
		return nil, ix.refusal(vectors, a, err)
	}
	for j, i := range fresh {
		ids[i] = next[j]
	}
	if !upsert {
		// Every key is new (a stored one was refused above): an append,
		// as an Add under IDs is, which logs its rows before it publishes
		// them, so that searches never wait for its log write.
		return ix.addLocked(ctx, time.Now(), ids, true, keys, a, len(vectors), ix.packer(ctx, len(vectors), false, func(i int) []float32 { return vectors[i] }))
	}
	if err := ix.upsertLocked(ctx, ids, vectors, keys, a, false); err != nil {
		return nil, err
	}
	ix.nameIDs(keys, ids)
	return ids, nil
}

// nameIDs records keys[i] as the key of ids[i], for the IDs that are
// stored; an empty key leaves its ID without one (an Add under IDs and
// keys together, and its logged record).
func (ix *Index) nameIDs(keys []string, ids []uint64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for i, id := range ids {
		if keys[i] == "" {
			continue
		}
		if _, ok := ix.rid.rowOf[id]; ok {
			ix.keys.set(keys[i], id)
		}
	}
}

// idsOfKeys returns the IDs stored under keys, refusing a key given twice
// (ErrDuplicateID) or not stored (ErrNotFound). The caller holds wmu, so
// the answer holds until it lets go.
func (ix *Index) idsOfKeys(keys []string) ([]uint64, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if err := distinctKeys(keys, "arguments"); err != nil {
		return nil, err
	}
	ids := make([]uint64, len(keys))
	for i, key := range keys {
		id, ok := ix.keys.id[key]
		if !ok {
			return nil, &keyError{fmt.Sprintf("key not found: %s (argument %d)", keyrule.Quote(key), i), umbra.ErrNotFound}
		}
		ids[i] = id
	}
	return ids, nil
}

// Lookup returns the ID stored under key.
func (ix *Index) Lookup(key string) (uint64, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	id, ok := ix.keys.id[key]
	return id, ok
}

// checkKeys refuses keys that a write cannot store: one that breaks the
// key rule (ErrInvalidKey) or one given twice (ErrDuplicateID), naming the
// vectors they belong to. With unnamed, an empty key is a row without one
// (an Add under IDs and keys together), neither refused nor compared.
func checkKeys(keys []string, unnamed bool) error {
	for i, key := range keys {
		if key == "" && unnamed {
			continue
		}
		if err := keyrule.Check(key); err != nil {
			return fmt.Errorf("%w: vector %d: %v", umbra.ErrInvalidKey, i, err)
		}
	}
	return distinctKeys(keys, "vectors")
}

// distinctKeys refuses a key given twice in one call, naming the two
// places (what: "vectors" or "arguments"). Empty keys (rows without one)
// are not compared.
func distinctKeys(keys []string, what string) error {
	seen := make(map[string]int, len(keys))
	for i, key := range keys {
		if key == "" {
			continue
		}
		if j, ok := seen[key]; ok {
			return &keyError{fmt.Sprintf("duplicate key: %s is given for %s %d and %d", keyrule.Quote(key), what, j, i), umbra.ErrDuplicateID}
		}
		seen[key] = i
	}
	return nil
}

// keysNew refuses an Add of keys the index already stores (ErrKeyExists),
// naming the first; empty keys (rows without one) are skipped. The caller
// holds wmu, so the key map holds still.
func (ix *Index) keysNew(keys []string) error {
	for i, key := range keys {
		if key == "" {
			continue
		}
		if _, ok := ix.keys.id[key]; ok {
			return keyStored(key, i)
		}
	}
	return nil
}

// keyStored is the error of an Add of a stored key, given for vector i.
func keyStored(key string, i int) error {
	return fmt.Errorf("%w: %s (vector %d); use Upsert to replace its vector", umbra.ErrKeyExists, keyrule.Quote(key), i)
}
