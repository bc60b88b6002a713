package chroma

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/umbravec/umbra"
)

// collState is a collection being served: its umbra collection (nil until
// the first record fixes its dimension) and its documents' index. Reads
// hold mu shared, writes exclusive, so a write's read-modify-write (an
// add skipping stored ids, an update merging metadata) is atomic.
type collState struct {
	mu      sync.RWMutex
	id      string
	metric  umbra.Metric
	c       umbra.Collection
	dim     int          // under mu
	dimSeen atomic.Int64 // dim, for describing the collection without its lock
	docs    *docIndex
	dropped bool // deleted (or the server closed): answer 404
}

// nameRule is Chroma's rule for tenant, database and collection names.
var nameRule = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$`)

func checkName(name string) error {
	if !nameRule.MatchString(name) {
		return invalid("Validation error: name: Expected a name containing 3-512 characters from [a-zA-Z0-9._-], starting and ending with a character in [a-zA-Z0-9]. Got: %s", name)
	}
	return nil
}

var uuidRule = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func metricOf(space string) umbra.Metric {
	switch space {
	case "cosine":
		return umbra.Cosine
	case "ip":
		return umbra.Dot
	}
	return umbra.L2
}

// openState opens rec's collection and indexes its documents.
func (s *Server) openState(ctx context.Context, rec *collRecord) (*collState, error) {
	st := &collState{id: rec.ID, metric: metricOf(rec.Space), docs: newDocIndex()}
	c, err := s.cfg.Backend.Open(ctx, rec.ID)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return st, nil
	}
	sum, err := c.Summary(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	st.c = c
	st.setDim(sum.Dim)
	if err := st.reindex(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return st, nil
}

// reindex rebuilds the document index from the stored payloads, a page
// at a time.
func (st *collState) reindex(ctx context.Context) error {
	st.docs = newDocIndex()
	const page = 4096
	var from uint64
	for {
		recs, err := st.c.Get(ctx, umbra.Selection{From: from, Limit: page, Payloads: true})
		if err != nil {
			return err
		}
		for _, r := range recs {
			p, err := decodePayload(r.Payload)
			if err != nil {
				return err
			}
			st.docs.set(r.ID, p.Doc)
		}
		if len(recs) < page {
			return nil
		}
		from = recs[len(recs)-1].ID + 1
	}
}

// ---- tenants and databases

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req struct {
		Name string `json:"name"`
	}
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if err := checkName(req.Name); err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reg.hasTenant(req.Name) {
		return 0, nil, errf(http.StatusConflict, "ChromaError", "Tenant [%s] already exists", req.Name)
	}
	if err := s.reg.change(func(st *registryState) { st.Tenants = append(st.Tenants, req.Name) }); err != nil {
		return 0, nil, err
	}
	return 200, struct{}{}, nil
}

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) (int, any, error) {
	name := r.PathValue("tenant")
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.reg.hasTenant(name) {
		return 0, nil, notFound("Tenant [%s] not found", name)
	}
	return 200, map[string]any{"name": name, "resource_name": nil}, nil
}

func (s *Server) updateTenant(w http.ResponseWriter, r *http.Request) (int, any, error) {
	name := r.PathValue("tenant")
	var req map[string]json.RawMessage
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.reg.hasTenant(name) {
		return 0, nil, notFound("Tenant [%s] not found", name)
	}
	return 0, nil, errf(http.StatusNotImplemented, "NotImplementedError", "updating a tenant (its resource_name) is not supported by this server")
}

func (s *Server) listDatabases(w http.ResponseWriter, r *http.Request) (int, any, error) {
	limit, offset, err := pageParams(r)
	if err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	dbs := s.reg.databases(r.PathValue("tenant"))
	s.mu.Unlock()
	dbs = page(dbs, limit, offset)
	if dbs == nil {
		dbs = []dbRecord{}
	}
	return 200, dbs, nil
}

func (s *Server) createDatabase(w http.ResponseWriter, r *http.Request) (int, any, error) {
	tenant := r.PathValue("tenant")
	var req struct {
		Name string `json:"name"`
	}
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if !nameRule.MatchString(req.Name) {
		return 0, nil, invalid("Expected a name containing 3-512 characters from [a-zA-Z0-9._-], starting and ending with a character in [a-zA-Z0-9]. Got: %s", req.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reg.database(tenant, req.Name) != nil {
		return 0, nil, errf(http.StatusConflict, "ChromaError", "Database [%s] already exists", req.Name)
	}
	// As in Chroma, a database may be made under a tenant never created.
	if err := s.reg.change(func(st *registryState) {
		st.Databases = append(st.Databases, dbRecord{ID: newUUID(), Name: req.Name, Tenant: tenant})
	}); err != nil {
		return 0, nil, err
	}
	return 200, struct{}{}, nil
}

func checkDBName(name string) error {
	if len(name) < 3 {
		return invalid("database name must be at least 3 characters")
	}
	return nil
}

func (s *Server) getDatabase(w http.ResponseWriter, r *http.Request) (int, any, error) {
	tenant, name := r.PathValue("tenant"), r.PathValue("db")
	if err := checkDBName(name); err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.reg.database(tenant, name)
	if d == nil {
		return 0, nil, notFound("Database [%s] not found. Are you sure it exists?", name)
	}
	return 200, d, nil
}

func (s *Server) deleteDatabase(w http.ResponseWriter, r *http.Request) (int, any, error) {
	tenant, name := r.PathValue("tenant"), r.PathValue("db")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reg.database(tenant, name) == nil {
		return 0, nil, notFound("Database [%s] not found", name)
	}
	gone := s.reg.collections(tenant, name)
	if err := s.reg.change(func(st *registryState) {
		dbs := st.Databases[:0]
		for _, d := range st.Databases {
			if d.Tenant != tenant || d.Name != name {
				dbs = append(dbs, d)
			}
		}
		st.Databases = dbs
		st.Collections = dropColls(st.Collections, func(c *collRecord) bool { return c.Tenant == tenant && c.Database == name })
	}); err != nil {
		return 0, nil, err
	}
	for _, c := range gone {
		s.dropState(r.Context(), c.ID)
	}
	return 200, struct{}{}, nil
}

func dropColls(cs []*collRecord, gone func(*collRecord) bool) []*collRecord {
	out := make([]*collRecord, 0, len(cs))
	for _, c := range cs {
		if !gone(c) {
			out = append(out, c)
		}
	}
	return out
}

// dropState closes and removes a collection the registry no longer has;
// called under s.mu. A failure to remove its files is logged: what is
// left is removed at the next start (Backend.Keep).
func (s *Server) dropState(ctx context.Context, id string) {
	st := s.colls[id]
	delete(s.colls, id)
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.dropped = true
	if err := s.cfg.Backend.Drop(ctx, id, st.c); err != nil {
		s.cfg.Logf("removing collection %s: %v (removed at the next start)", id, err)
	}
	st.c = nil
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if !s.cfg.AllowReset {
		return 0, nil, errf(http.StatusForbidden, "AuthError", "Resetting is not allowed by this server (start it with --allow-reset)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, c := range s.reg.state.Collections {
		ids = append(ids, c.ID)
	}
	if err := s.reg.change(func(st *registryState) {
		st.Tenants = []string{defaultTenant}
		var keep []dbRecord
		for _, d := range st.Databases {
			if d.Tenant == defaultTenant && d.Name == defaultDatabase {
				keep = append(keep, d)
			}
		}
		st.Databases = keep
		st.Collections = nil
	}); err != nil {
		return 0, nil, err
	}
	for _, id := range ids {
		s.dropState(r.Context(), id)
	}
	return 200, true, nil
}

// ---- collections

// collectionJSON is a collection as Chroma answers it.
type collectionJSON struct {
	ID                string          `json:"id"`
	Name              string          `json:"name"`
	ConfigurationJSON json.RawMessage `json:"configuration_json"`
	Schema            json.RawMessage `json:"schema"`
	Metadata          json.RawMessage `json:"metadata"`
	Dimension         *int            `json:"dimension"`
	Tenant            string          `json:"tenant"`
	Database          string          `json:"database"`
	LogPosition       int             `json:"log_position"`
	Version           int             `json:"version"`
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// configuration is a collection's configuration_json: its hnsw space and
// parameters (Chroma's defaults where not set), and its embedding
// function as sent.
func (c *collRecord) configuration() json.RawMessage {
	h := c.HNSW
	b, _ := json.Marshal(map[string]any{
		"hnsw": map[string]any{"space": c.Space, "ef_construction": h.EfConstruction, "ef_search": h.EfSearch,
			"max_neighbors": h.MaxNeighbors, "resize_factor": h.ResizeFactor, "sync_threshold": h.SyncThreshold},
		"spann":              nil,
		"embedding_function": orNull(c.EmbeddingFunction),
	})
	return b
}

// schema is the collection's schema as Chroma 3.5 reports it by default:
// what its clients read of it is the vector index's space and embedding
// function.
func (c *collRecord) schema() json.RawMessage {
	h := c.HNSW
	hnsw := map[string]any{"ef_construction": h.EfConstruction, "max_neighbors": h.MaxNeighbors, "ef_search": h.EfSearch,
		"num_threads": h.NumThreads, "batch_size": h.BatchSize, "sync_threshold": h.SyncThreshold, "resize_factor": h.ResizeFactor}
	vcfg := func(src bool) map[string]any {
		m := map[string]any{"space": c.Space, "hnsw": hnsw}
		if len(c.EmbeddingFunction) > 0 && !isNull(c.EmbeddingFunction) {
			m["embedding_function"] = c.EmbeddingFunction
		}
		if src {
			m["source_key"] = "#document"
		}
		return m
	}
	on := func(b bool) map[string]any { return map[string]any{"enabled": b, "config": map[string]any{}} }
	b, _ := json.Marshal(map[string]any{
		"defaults": map[string]any{
			"string":        map[string]any{"fts_index": on(false), "string_inverted_index": on(true)},
			"float_list":    map[string]any{"vector_index": map[string]any{"enabled": false, "config": vcfg(false)}},
			"sparse_vector": map[string]any{"sparse_vector_index": map[string]any{"enabled": false, "config": map[string]any{"embedding_function": map[string]any{"type": "unknown"}, "bm25": false}}},
			"int":           map[string]any{"int_inverted_index": on(true)},
			"float":         map[string]any{"float_inverted_index": on(true)},
			"bool":          map[string]any{"bool_inverted_index": on(true)},
		},
		"keys": map[string]any{
			"#document":  map[string]any{"string": map[string]any{"fts_index": on(true), "string_inverted_index": on(false)}},
			"#embedding": map[string]any{"float_list": map[string]any{"vector_index": map[string]any{"enabled": true, "config": vcfg(true)}}},
		},
	})
	return b
}

// describe is rec as Chroma answers it; called under s.mu.
func (s *Server) describe(rec *collRecord) collectionJSON {
	out := collectionJSON{ID: rec.ID, Name: rec.Name, ConfigurationJSON: rec.configuration(), Schema: rec.schema(),
		Metadata: orNull(rec.Metadata), Tenant: rec.Tenant, Database: rec.Database}
	if st := s.colls[rec.ID]; st != nil {
		if d := int(st.dimSeen.Load()); d > 0 {
			out.Dimension = &d
		}
	}
	return out
}

func pageParams(r *http.Request) (limit, offset int, err error) {
	q := r.URL.Query()
	num := func(name string) (int, error) {
		v := q.Get(name)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, invalid("Query parameter %s=%q: a count of 0 or more", name, v)
		}
		return n, nil
	}
	if limit, err = num("limit"); err != nil {
		return
	}
	if q.Get("limit") == "" {
		limit = -1
	}
	offset, err = num("offset")
	return
}

func page[T any](xs []T, limit, offset int) []T {
	if offset >= len(xs) {
		return nil
	}
	xs = xs[offset:]
	if limit >= 0 && limit < len(xs) {
		xs = xs[:limit]
	}
	return xs
}

func (s *Server) listCollections(w http.ResponseWriter, r *http.Request) (int, any, error) {
	tenant, db := r.PathValue("tenant"), r.PathValue("db")
	if err := checkDBName(db); err != nil {
		return 0, nil, err
	}
	limit, offset, err := pageParams(r)
	if err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []collectionJSON{}
	for _, c := range page(s.reg.collections(tenant, db), limit, offset) {
		out = append(out, s.describe(c))
	}
	return 200, out, nil
}

func (s *Server) countCollections(w http.ResponseWriter, r *http.Request) (int, any, error) {
	tenant, db := r.PathValue("tenant"), r.PathValue("db")
	if err := checkDBName(db); err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return 200, len(s.reg.collections(tenant, db)), nil
}

type createRequest struct {
	Name          string          `json:"name"`
	Metadata      json.RawMessage `json:"metadata"`
	Configuration json.RawMessage `json:"configuration"`
	GetOrCreate   bool            `json:"get_or_create"`
	Schema        json.RawMessage `json:"schema"`
}

// configRequest is a collection's configuration as a client sends it.
type configRequest struct {
	HNSW *struct {
		Space          *string  `json:"space"`
		EfConstruction *int     `json:"ef_construction"`
		EfSearch       *int     `json:"ef_search"`
		MaxNeighbors   *int     `json:"max_neighbors"`
		ResizeFactor   *float64 `json:"resize_factor"`
		SyncThreshold  *int     `json:"sync_threshold"`
		NumThreads     *int     `json:"num_threads"`
		BatchSize      *int     `json:"batch_size"`
	} `json:"hnsw"`
	EmbeddingFunction json.RawMessage `json:"embedding_function"`
}

func checkSpace(where, space string) error {
	switch space {
	case "l2", "cosine", "ip":
		return nil
	}
	return errf(http.StatusUnprocessableEntity, "ChromaError", "Failed to deserialize the JSON body into the target type: %s: unknown variant `%s`, expected one of `l2`, `cosine`, `ip`", where, space)
}

// applyConfig sets rec's space and hnsw parameters from a configuration.
func applyConfig(rec *collRecord, raw json.RawMessage, field string) error {
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	var c configRequest
	if err := json.Unmarshal(raw, &c); err != nil {
		return invalid("%s: %v", field, err)
	}
	if h := c.HNSW; h != nil {
		if h.Space != nil {
			if err := checkSpace(field+".hnsw.space", *h.Space); err != nil {
				return err
			}
			rec.Space = *h.Space
		}
		set := func(dst *int, v *int) {
			if v != nil {
				*dst = *v
			}
		}
		set(&rec.HNSW.EfConstruction, h.EfConstruction)
		set(&rec.HNSW.EfSearch, h.EfSearch)
		set(&rec.HNSW.MaxNeighbors, h.MaxNeighbors)
		set(&rec.HNSW.SyncThreshold, h.SyncThreshold)
		set(&rec.HNSW.NumThreads, h.NumThreads)
		set(&rec.HNSW.BatchSize, h.BatchSize)
		if h.ResizeFactor != nil {
			rec.HNSW.ResizeFactor = *h.ResizeFactor
		}
	}
	if len(c.EmbeddingFunction) > 0 {
		rec.EmbeddingFunction = c.EmbeddingFunction
	}
	return nil
}

// collectionMetadata checks a collection's metadata: an object of scalar
// values (Chroma refuses an empty one), or null.
func collectionMetadata(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, invalid("Validation error: metadata: expected an object: %v", err)
	}
	if len(m) == 0 {
		return nil, invalid("Validation error: metadata: Metadata cannot be empty")
	}
	for k, v := range m {
		if _, err := parseMetaValue(k, v, true); err != nil {
			return nil, invalid("Validation error: metadata: %v", err)
		}
	}
	b, _ := json.Marshal(m)
	return b, nil
}

func (s *Server) createCollection(w http.ResponseWriter, r *http.Request) (int, any, error) {
	tenant, db := r.PathValue("tenant"), r.PathValue("db")
	var req createRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if err := checkName(req.Name); err != nil {
		return 0, nil, err
	}
	md, err := collectionMetadata(req.Metadata)
	if err != nil {
		return 0, nil, err
	}
	rec := &collRecord{ID: newUUID(), Name: req.Name, Tenant: tenant, Database: db, Metadata: md, Space: "l2", HNSW: defaultHNSW()}
	if err := applyConfig(rec, req.Configuration, "configuration"); err != nil {
		return 0, nil, err
	}
	// The legacy metadata key wins over the configuration, as in Chroma.
	if len(md) > 0 {
		var m map[string]json.RawMessage
		json.Unmarshal(md, &m)
		if v, ok := m["hnsw:space"]; ok {
			var sp string
			if json.Unmarshal(v, &sp) != nil || checkSpace("metadata.hnsw:space", sp) != nil {
				return 0, nil, invalid("Failed to parse hnsw parameters from segment metadata")
			}
			rec.Space = sp
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reg.database(tenant, db) == nil {
		return 0, nil, invalid("Database [%s] does not exist", db)
	}
	if old := s.reg.byName(tenant, db, req.Name); old != nil {
		if req.GetOrCreate {
			return 200, s.describe(old), nil
		}
		return 0, nil, errf(http.StatusConflict, "ChromaError", "Collection [%s] already exists", req.Name)
	}
	rec.Created = s.reg.state.Next
	if err := s.reg.change(func(st *registryState) {
		st.Collections = append(st.Collections, rec)
		st.Next++
	}); err != nil {
		return 0, nil, err
	}
	s.colls[rec.ID] = &collState{id: rec.ID, metric: metricOf(rec.Space), docs: newDocIndex()}
	return 200, s.describe(s.reg.byID(rec.ID)), nil
}

// lookup finds a collection of the path's database by name or by id;
// called under s.mu.
func (s *Server) lookup(r *http.Request, byName, byID bool) (*collRecord, error) {
	tenant, db, key := r.PathValue("tenant"), r.PathValue("db"), r.PathValue("coll")
	if byName {
		if c := s.reg.byName(tenant, db, key); c != nil {
			return c, nil
		}
	}
	if byID {
		if !uuidRule.MatchString(key) {
			if !byName {
				return nil, invalid("Collection ID is not a valid UUIDv4")
			}
		} else if c := s.reg.byID(strings.ToLower(key)); c != nil && c.Tenant == tenant && c.Database == db {
			return c, nil
		}
	}
	if byID && !byName {
		return nil, notFound("Collection [%s] does not exist.", key)
	}
	return nil, notFound("Collection [%s] does not exist", key)
}

func (s *Server) getCollection(w http.ResponseWriter, r *http.Request) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.lookup(r, true, true)
	if err != nil {
		return 0, nil, err
	}
	return 200, s.describe(rec), nil
}

func (s *Server) getCollectionByID(w http.ResponseWriter, r *http.Request) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.lookup(r, false, true)
	if err != nil {
		return 0, nil, err
	}
	return 200, s.describe(rec), nil
}

// getCollectionByCRN finds a collection by "tenant:database:name".
func (s *Server) getCollectionByCRN(w http.ResponseWriter, r *http.Request) (int, any, error) {
	crn := r.PathValue("crn")
	parts := strings.Split(crn, ":")
	if len(parts) != 3 {
		return 0, nil, invalid("Invalid CRN %q: expected tenant:database:collection", crn)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.reg.byName(parts[0], parts[1], parts[2])
	if rec == nil {
		return 0, nil, notFound("Collection [%s] does not exist", crn)
	}
	return 200, s.describe(rec), nil
}

func (s *Server) updateCollection(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req struct {
		NewName          *string         `json:"new_name"`
		NewMetadata      json.RawMessage `json:"new_metadata"`
		NewConfiguration json.RawMessage `json:"new_configuration"`
	}
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.lookup(r, false, true)
	if err != nil {
		return 0, nil, err
	}
	next := *rec
	if req.NewName != nil {
		if err := checkName(*req.NewName); err != nil {
			return 0, nil, err
		}
		if o := s.reg.byName(rec.Tenant, rec.Database, *req.NewName); o != nil && o.ID != rec.ID {
			return 0, nil, errf(http.StatusConflict, "ChromaError", "Collection [%s] already exists", *req.NewName)
		}
		next.Name = *req.NewName
	}
	if len(req.NewMetadata) > 0 && !isNull(req.NewMetadata) {
		md, err := collectionMetadata(req.NewMetadata)
		if err != nil {
			return 0, nil, err
		}
		next.Metadata = md
	}
	if len(req.NewConfiguration) > 0 {
		var c configRequest
		if json.Unmarshal(req.NewConfiguration, &c) == nil && c.HNSW != nil && c.HNSW.Space != nil {
			return 0, nil, undecodable("new_configuration.hnsw.space: unknown field `space`, expected one of `ef_search`, `max_neighbors`, `num_threads`, `resize_factor`, `sync_threshold`, `batch_size`")
		}
		old := next.Space
		if err := applyConfig(&next, req.NewConfiguration, "new_configuration"); err != nil {
			return 0, nil, err
		}
		if next.Space != old {
			return 0, nil, invalid("Updating the distance space of a collection is not supported (it is %s)", old)
		}
	}
	if err := s.reg.change(func(st *registryState) {
		for i, c := range st.Collections {
			if c.ID == rec.ID {
				st.Collections[i] = &next
			}
		}
	}); err != nil {
		return 0, nil, err
	}
	return 200, struct{}{}, nil
}

func (s *Server) deleteCollection(w http.ResponseWriter, r *http.Request) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.lookup(r, true, false)
	if err != nil {
		return 0, nil, err
	}
	id := rec.ID
	if err := s.reg.change(func(st *registryState) {
		st.Collections = dropColls(st.Collections, func(c *collRecord) bool { return c.ID == id })
	}); err != nil {
		return 0, nil, err
	}
	s.dropState(r.Context(), id)
	return 200, struct{}{}, nil
}
