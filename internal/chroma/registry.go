package chroma

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// The registry is what Chroma calls its system catalog: the tenants, the
// databases and the collections (their ids, names, metadata and
// configuration). The rows live in the collections' stores; the registry
// is one JSON file under the server's directory, replaced whole on every
// change (written beside it, fsynced, renamed over it, the directory
// fsynced), so a change acknowledged over HTTP survives a crash and a
// crash leaves the old file or the new one, never half of one.

const (
	defaultTenant   = "default_tenant"
	defaultDatabase = "default_database"
	registryFile    = "chroma.json"
)

// collRecord is one collection as the registry keeps it.
type collRecord struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Tenant   string          `json:"tenant"`
	Database string          `json:"database"`
	Metadata json.RawMessage `json:"metadata,omitempty"` // a JSON object, absent when none
	Space    string          `json:"space"`              // l2, cosine or ip
	HNSW     hnswConfig      `json:"hnsw"`
	// EmbeddingFunction is the configuration's embedding_function as the
	// client sent it (null when none), echoed back.
	EmbeddingFunction json.RawMessage `json:"embedding_function,omitempty"`
	Created           int64           `json:"created"` // creation order
}

// hnswConfig is the hnsw part of a collection's configuration: umbra's
// search is exact and uses none of it but the space; the rest is kept and
// echoed, as Chroma echoes it.
type hnswConfig struct {
	EfConstruction int     `json:"ef_construction"`
	EfSearch       int     `json:"ef_search"`
	MaxNeighbors   int     `json:"max_neighbors"`
	ResizeFactor   float64 `json:"resize_factor"`
	SyncThreshold  int     `json:"sync_threshold"`
	NumThreads     int     `json:"num_threads"`
	BatchSize      int     `json:"batch_size"`
}

func defaultHNSW() hnswConfig {
	return hnswConfig{EfConstruction: 100, EfSearch: 100, MaxNeighbors: 16, ResizeFactor: 1.2, SyncThreshold: 1000, NumThreads: 2, BatchSize: 100}
}

type dbRecord struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Tenant string `json:"tenant"`
}

// registryState is the file's content.
type registryState struct {
	Tenants     []string      `json:"tenants"`
	Databases   []dbRecord    `json:"databases"`
	Collections []*collRecord `json:"collections"`
	Next        int64         `json:"next"` // the next Created
}

// registry holds the state and writes it; its caller (Server) serialises
// every access under its own lock.
type registry struct {
	path  string // "" for a registry that is not persisted
	state registryState
}

// loadRegistry reads dir's registry, or starts one with the default tenant
// and database when there is none.
func loadRegistry(dir string) (*registry, error) {
	r := &registry{}
	if dir != "" {
		r.path = filepath.Join(dir, registryFile)
		b, err := os.ReadFile(r.path)
		switch {
		case err == nil:
			if err := json.Unmarshal(b, &r.state); err != nil {
				return nil, fmt.Errorf("%s: not a readable collection registry: %v", r.path, err)
			}
			return r, nil
		case !os.IsNotExist(err):
			return nil, err
		}
	}
	r.state.Tenants = []string{defaultTenant}
	r.state.Databases = []dbRecord{{ID: newUUID(), Name: defaultDatabase, Tenant: defaultTenant}}
	return r, r.save()
}

// save writes the state crash-safely: a temporary file beside the real
// one, fsynced, renamed over it, and the directory fsynced.
func (r *registry) save() error {
	if r.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(&r.state, "", " ")
	if err != nil {
		return err
	}
	tmp := r.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("writing the collection registry: %w", err)
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, r.path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(r.path))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the collection registry: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// change applies f to a copy of the state and saves it; on a failure the
// state is left as it was.
func (r *registry) change(f func(s *registryState)) error {
	old := r.state
	old.Tenants = slices.Clone(old.Tenants)
	old.Databases = slices.Clone(old.Databases)
	old.Collections = slices.Clone(old.Collections)
	next := old
	next.Tenants = slices.Clone(old.Tenants)
	next.Databases = slices.Clone(old.Databases)
	next.Collections = make([]*collRecord, len(old.Collections))
	for i, c := range old.Collections {
		cc := *c
		next.Collections[i] = &cc
	}
	f(&next)
	r.state = next
	if err := r.save(); err != nil {
		r.state = old
		return err
	}
	return nil
}

func (r *registry) hasTenant(name string) bool { return slices.Contains(r.state.Tenants, name) }

func (r *registry) database(tenant, name string) *dbRecord {
	for i := range r.state.Databases {
		if d := &r.state.Databases[i]; d.Tenant == tenant && d.Name == name {
			return d
		}
	}
	return nil
}

func (r *registry) databases(tenant string) []dbRecord {
	var out []dbRecord
	for _, d := range r.state.Databases {
		if d.Tenant == tenant {
			out = append(out, d)
		}
	}
	return out
}

// collections lists a database's collections in creation order.
func (r *registry) collections(tenant, db string) []*collRecord {
	var out []*collRecord
	for _, c := range r.state.Collections {
		if c.Tenant == tenant && c.Database == db {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created < out[j].Created })
	return out
}

func (r *registry) byName(tenant, db, name string) *collRecord {
	for _, c := range r.state.Collections {
		if c.Tenant == tenant && c.Database == db && c.Name == name {
			return c
		}
	}
	return nil
}

func (r *registry) byID(id string) *collRecord {
	for _, c := range r.state.Collections {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// newUUID is a random (version 4) UUID, as Chroma names collections.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
