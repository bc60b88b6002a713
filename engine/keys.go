package engine

import (
	"context"
	"fmt"
)

// String keys, for applications whose own IDs are strings (UUIDs, paths):
// each key names one stored vector through the uint64 ID the index
// assigns it, and Save and Open keep the mapping with the vectors.

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

func (ix *Index) keyed(ctx context.Context, keys []string, vectors [][]float32, upsert bool) (ids []uint64, err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	if err := ix.writable(); err != nil {
		return nil, err
	}
	if len(keys) != len(vectors) {
		return nil, fmt.Errorf("%w: %d keys for %d vectors", ErrIDCount, len(keys), len(vectors))
	}
	if err := distinctKeys(keys, "vectors"); err != nil {
		return nil, err
	}
	// IDs are decided under the writers' lock, so no other writer can take
	// one between here and the write itself.
	if err := ix.lockWriter(); err != nil {
		return nil, err
	}
	defer ix.wmu.Unlock()
	ix.mu.RLock()
	ids = make([]uint64, len(keys))
	var fresh []int
	for i, key := range keys {
		if id, ok := ix.keys.id[key]; ok {
			if !upsert {
				ix.mu.RUnlock()
				return nil, fmt.Errorf("%w: key %q (vector %d); use Upsert to replace it", ErrIDExists, key, i)
			}
			ids[i] = id
		} else {
			fresh = append(fresh, i)
		}
	}
	next, err := ix.rid.assign(len(fresh))
	ix.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	for j, i := range fresh {
		ids[i] = next[j]
	}
	if err := ix.upsertLocked(ctx, ids, vectors, keys, false); err != nil {
		return nil, err
	}
	ix.nameIDs(keys, ids)
	return ids, nil
}

// nameIDs records keys[i] as the key of ids[i], for the IDs that are
// stored.
func (ix *Index) nameIDs(keys []string, ids []uint64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for i, id := range ids {
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
			return nil, fmt.Errorf("%w: key %q (argument %d)", ErrNotFound, key, i)
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

// KeyOf returns the key of the vector stored under id, if it has one.
func (ix *Index) KeyOf(id uint64) (string, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	key, ok := ix.keys.key[id]
	return key, ok
}

// distinctKeys refuses a key given twice in one call, naming the two
// places (what: "vectors" or "arguments").
func distinctKeys(keys []string, what string) error {
	seen := make(map[string]int, len(keys))
	for i, key := range keys {
		if j, ok := seen[key]; ok {
			return fmt.Errorf("%w: key %q is given for %s %d and %d", ErrDuplicateID, key, what, j, i)
		}
		seen[key] = i
	}
	return nil
}
