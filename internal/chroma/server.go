// Package chroma serves Chroma's v2 HTTP API (the one chromadb 3.5's
// clients speak) from umbra collections: one umbra.Collection per Chroma
// collection — a store under a directory, or a cluster's collection — so
// every query is umbra's exact search. The handler is written against
// umbra.Collection only; a Backend says where collections live.
package chroma

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/umbravec/umbra"
)

// Chroma's own defaults, reported the same way.
const (
	// DefaultMaxBatchSize is what pre-flight-checks reports as
	// max_batch_size (Chroma's, for its local server): the most records
	// one add, upsert or update may carry.
	DefaultMaxBatchSize = 5461
	// DefaultMaxBodyBytes bounds a request body: a full batch of 1,536-
	// dimensional embeddings as JSON numbers fits.
	DefaultMaxBodyBytes = 128 << 20
	// DefaultRequestTimeout bounds the work of one request.
	DefaultRequestTimeout = 60 * time.Second
	// DefaultMaxInFlight bounds the requests handled at once.
	DefaultMaxInFlight = 64
	// serverVersion is what /version reports: the API version the clients
	// check.
	serverVersion = "1.0.0"
)

// Backend is where a server's collections live: it opens, creates and
// drops the umbra collection that holds a Chroma collection's records,
// named by the Chroma collection's id.
type Backend interface {
	// Open returns the collection of id, or nil when none was created
	// yet (no record was ever added: its dimension is not known).
	Open(ctx context.Context, id string) (umbra.Collection, error)
	// Create makes the collection of id, of dim dimensions ranked by m.
	Create(ctx context.Context, id string, dim int, m umbra.Metric) (umbra.Collection, error)
	// Drop closes c (nil when never created) and removes what holds the
	// collection's records.
	Drop(ctx context.Context, id string, c umbra.Collection) error
	// Keep removes what holds collections other than those of ids (what
	// a crash between a registry change and its cleanup left).
	Keep(ctx context.Context, ids []string) error
	// Describe says in words where collections live, for the log.
	Describe() string
}

// Config configures a Server.
type Config struct {
	// Dir holds the collection registry (chroma.json); "" keeps it in
	// memory only.
	Dir     string
	Backend Backend
	// Token, when set, must be carried by every request
	// (x-chroma-token: T, or Authorization: Bearer T); else 401.
	Token string
	// AllowReset lets POST /api/v2/reset remove every tenant, database
	// and collection but the defaults.
	AllowReset bool
	// MaxBatchSize, MaxBodyBytes, RequestTimeout and MaxInFlight bound
	// requests (0: the defaults above).
	MaxBatchSize   int
	MaxBodyBytes   int64
	RequestTimeout time.Duration
	MaxInFlight    int
	// ServerTiming makes every answer carry a Server-Timing header: the
	// time each stage of the request took inside the server (timing.go).
	ServerTiming bool
	// ReadHeaderTimeout, ReadTimeout and IdleTimeout bound how long a
	// client may take to send a request's headers, its whole request, and
	// how long an idle connection is kept (HTTPServer's; 0: 10 s, 2 min,
	// 2 min), so a slow client cannot hold the server.
	ReadHeaderTimeout, ReadTimeout, IdleTimeout time.Duration
	// Logf, when set, logs what the server does at start and its
	// internal errors.
	Logf func(format string, args ...any)
}

// Server is the HTTP handler.
type Server struct {
	cfg Config
	mux *http.ServeMux
	sem chan struct{}

	mu    sync.Mutex // guards reg and colls
	reg   *registry
	colls map[string]*collState
}

// New opens the registry under cfg.Dir and every collection's store.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("chroma: a Config without a Backend")
	}
	if cfg.MaxBatchSize <= 0 {
		cfg.MaxBatchSize = DefaultMaxBatchSize
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = 10 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 2 * time.Minute
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	reg, err := loadRegistry(cfg.Dir)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, reg: reg, colls: map[string]*collState{}, sem: make(chan struct{}, cfg.MaxInFlight)}
	var ids []string
	for _, rec := range reg.state.Collections {
		ids = append(ids, rec.ID)
	}
	if err := cfg.Backend.Keep(ctx, ids); err != nil {
		return nil, err
	}
	for _, rec := range reg.state.Collections {
		st, err := s.openState(ctx, rec)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("collection %s (%s): %w", rec.Name, rec.ID, err)
		}
		s.colls[rec.ID] = st
	}
	s.routes()
	return s, nil
}

// HTTPServer is an http.Server for s with its timeouts: a client gets
// ReadHeaderTimeout to send its headers and ReadTimeout its whole request
// (a body of MaxBodyBytes at a slow pace included), an answer may take
// RequestTimeout and two more minutes to be written, and an idle
// connection is closed after IdleTimeout.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.RequestTimeout + 2*time.Minute,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    1 << 20,
	}
}

// Close closes every collection.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	for id, st := range s.colls {
		st.mu.Lock()
		if st.c != nil {
			if err := st.c.Close(); err != nil && first == nil {
				first = err
			}
			st.c = nil
		}
		st.dropped = true
		st.mu.Unlock()
		delete(s.colls, id)
	}
	return first
}

// apiError is an error in Chroma's shape: {"error": Name, "message": …}
// with its status code.
type apiError struct {
	status int
	name   string
	msg    string
}

func (e *apiError) Error() string { return e.name + ": " + e.msg }

func errf(status int, name, format string, a ...any) *apiError {
	return &apiError{status: status, name: name, msg: fmt.Sprintf(format, a...)}
}

func invalid(format string, a ...any) *apiError {
	return errf(http.StatusBadRequest, "InvalidArgumentError", format, a...)
}

// undecodable is Chroma's answer to a body its types cannot hold (a
// negative count, a null in an embedding, a nested metadata value): 422.
func undecodable(format string, a ...any) *apiError {
	return errf(http.StatusUnprocessableEntity, "ChromaError", "Failed to deserialize the JSON body into the target type: "+format, a...)
}

func notFound(format string, a ...any) *apiError {
	return errf(http.StatusNotFound, "NotFoundError", format, a...)
}

// handler is an endpoint: it returns the status and the value to answer
// as JSON, or an error.
type handler func(w http.ResponseWriter, r *http.Request) (int, any, error)

func (s *Server) handle(pattern string, h handler) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		status, v, err := h(w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSONTimed(w, status, v, timingOf(r.Context()))
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) { writeJSONTimed(w, status, v, nil) }

// writeJSONTimed is writeJSON, with tm's stages (the encoding included) in
// a Server-Timing header when tm is not nil.
func writeJSONTimed(w http.ResponseWriter, status int, v any, tm *timing) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"error": "InternalError", "message": err.Error()})
	}
	if tm != nil {
		tm.mark("encode")
		w.Header().Set("Server-Timing", tm.header())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// writeError answers err in Chroma's shape, mapping umbra's errors to
// Chroma's names and codes.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	var we *whereError
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &we):
		ae = invalid("%s", we.msg)
	case errors.As(err, &mb):
		ae = errf(http.StatusRequestEntityTooLarge, "InvalidArgumentError", "request body over %d bytes (the server's limit)", mb.Limit)
	case errors.Is(err, context.DeadlineExceeded):
		ae = errf(http.StatusGatewayTimeout, "TimeoutError", "request took longer than %v (the server's limit)", s.cfg.RequestTimeout)
	case errors.Is(err, umbra.ErrDimMismatch), errors.Is(err, umbra.ErrInvalidKey), errors.Is(err, umbra.ErrInvalidMeta),
		errors.Is(err, umbra.ErrInvalidFilter), errors.Is(err, umbra.ErrNonFinite), errors.Is(err, umbra.ErrZeroVector),
		errors.Is(err, umbra.ErrInvalidK), errors.Is(err, umbra.ErrInvalidOption), errors.Is(err, umbra.ErrIDCount),
		errors.Is(err, umbra.ErrDuplicateID):
		ae = invalid("%s", err.Error())
	case errors.Is(err, umbra.ErrTooLarge):
		ae = errf(http.StatusRequestEntityTooLarge, "InvalidArgumentError", "%s", err.Error())
	default:
		s.cfg.Logf("%s %s: %v", r.Method, r.URL.Path, err)
		ae = errf(http.StatusInternalServerError, "InternalError", "%s", err.Error())
	}
	writeJSON(w, ae.status, map[string]string{"error": ae.name, "message": ae.msg})
}

// ServeHTTP authenticates and bounds the request, then routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Token != "" && !s.authorized(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "AuthError", "message": "Unauthorized: this server needs a token (x-chroma-token: TOKEN, or Authorization: Bearer TOKEN)"})
		return
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	default:
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "RateLimitError", "message": fmt.Sprintf("the server is handling %d requests, its limit; retry", s.cfg.MaxInFlight)})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	if s.cfg.ServerTiming {
		ctx, _ = withTiming(ctx)
	}
	r = r.WithContext(ctx)
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) authorized(r *http.Request) bool {
	tok := r.Header.Get("X-Chroma-Token")
	if tok == "" {
		if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
			tok = strings.TrimSpace(a[7:])
		}
	}
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) == 1
}

// decode reads a JSON request body into v; an empty body leaves v as it
// is.
func decode(r *http.Request, v any) error {
	return decodeLifting(r, v, "", nil)
}

// decodeLifting is decode, but the embeddings in the top-level field key
// go into *dst by the fast path where it applies (fastjson.go).
func decodeLifting(r *http.Request, v any, key string, dst **embeddings) error {
	b, done, err := readBody(r)
	defer done()
	if err != nil {
		return err
	}
	tm := timingOf(r.Context())
	tm.mark("read")
	defer tm.mark("decode")
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if dst != nil {
		if rest, e, ok := liftEmbeddings(b, key); ok && json.Unmarshal(rest, v) == nil {
			*dst = &e
			return nil
		}
	}
	if err := json.Unmarshal(b, v); err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return ae
		}
		return invalid("Failed to parse the request body as JSON: %v", err)
	}
	return nil
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	const api = "/api/v2"
	s.handle("GET "+api+"/heartbeat", func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		return 200, map[string]int64{"nanosecond heartbeat": time.Now().UnixNano()}, nil
	})
	s.handle("GET "+api+"/version", func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		return 200, serverVersion, nil
	})
	s.handle("GET "+api+"/healthcheck", func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		return 200, map[string]bool{"is_executor_ready": true, "is_log_client_ready": true}, nil
	})
	s.handle("GET "+api+"/pre-flight-checks", func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		return 200, map[string]any{"max_batch_size": s.cfg.MaxBatchSize, "supports_base64_encoding": true}, nil
	})
	s.handle("GET "+api+"/auth/identity", func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		return 200, map[string]any{"user_id": "", "tenant": defaultTenant, "databases": []string{defaultDatabase}}, nil
	})
	s.handle("POST "+api+"/reset", s.reset)
	s.handle("POST "+api+"/tenants", s.createTenant)
	s.handle("GET "+api+"/tenants/{tenant}", s.getTenant)
	s.handle("PATCH "+api+"/tenants/{tenant}", s.updateTenant)
	s.handle("GET "+api+"/tenants/{tenant}/databases", s.listDatabases)
	s.handle("POST "+api+"/tenants/{tenant}/databases", s.createDatabase)
	s.handle("GET "+api+"/tenants/{tenant}/databases/{db}", s.getDatabase)
	s.handle("DELETE "+api+"/tenants/{tenant}/databases/{db}", s.deleteDatabase)
	const colls = api + "/tenants/{tenant}/databases/{db}/collections"
	s.handle("GET "+colls, s.listCollections)
	s.handle("POST "+colls, s.createCollection)
	s.handle("GET "+api+"/tenants/{tenant}/databases/{db}/collections_count", s.countCollections)
	s.handle("GET "+colls+"/{coll}", s.getCollection)
	s.handle("GET "+api+"/collections/{crn}", s.getCollectionByCRN)
	s.handle("PUT "+colls+"/{coll}", s.updateCollection)
	s.handle("DELETE "+colls+"/{coll}", s.deleteCollection)
	s.handle("POST "+colls+"/{coll}/add", s.add)
	s.handle("POST "+colls+"/{coll}/upsert", s.upsert)
	s.handle("POST "+colls+"/{coll}/update", s.update)
	s.handle("POST "+colls+"/{coll}/delete", s.deleteRecords)
	// GET …/collections/{id}/count and GET …/collections/by-id/{id}
	// share a shape: one pattern, told apart here.
	s.handle("GET "+colls+"/{coll}/{sub}", func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		if r.PathValue("coll") == "by-id" {
			r.SetPathValue("coll", r.PathValue("sub"))
			return s.getCollectionByID(w, r)
		}
		if r.PathValue("sub") == "count" {
			return s.count(w, r)
		}
		return 0, nil, notFound("GET %s: no such endpoint in the Chroma v2 API this server speaks", r.URL.Path)
	})
	s.handle("POST "+colls+"/{coll}/get", s.get)
	s.handle("POST "+colls+"/{coll}/query", s.query)
	s.handle("/", func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		return 0, nil, notFound("%s %s: no such endpoint in the Chroma v2 API this server speaks", r.Method, r.URL.Path)
	})
}
