package chroma

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/metaindex"
	"github.com/umbravec/umbra/internal/parallel"
	"github.com/umbravec/umbra/meta"
)

// payload is what a row's umbra payload holds: the record's document, URI
// and metadata as the client wrote them, and (under cosine, where umbra
// keeps the unit vector) the embedding's norm, so the embedding comes
// back as written, to float32 rounding.
type payload struct {
	Doc  *string                    `json:"d,omitempty"`
	URI  *string                    `json:"u,omitempty"`
	Meta map[string]json.RawMessage `json:"m,omitempty"`
	Norm float32                    `json:"n,omitempty"`
}

func decodePayload(b []byte) (payload, error) {
	var p payload
	if len(b) == 0 {
		return p, nil
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("a record's stored payload is not this server's: %v", err)
	}
	return p, nil
}

func (p payload) encode() []byte {
	b, _ := json.Marshal(p)
	return b
}

// metaJSON is a record's metadata as answered: null when it has none.
func (p payload) metaJSON() json.RawMessage {
	if len(p.Meta) == 0 {
		return nil
	}
	b, _ := json.Marshal(p.Meta)
	return b
}

// ---- request bodies

// embeddings are a request's embeddings: JSON numbers, or base64 strings
// of little-endian float32 (what the JS client sends once pre-flight-checks
// says supports_base64_encoding).
type embeddings [][]float32

func (e *embeddings) UnmarshalJSON(b []byte) error {
	if out, ok := base64List(b); ok {
		*e = out
		return nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("embeddings: expected a list of embeddings: %v", err)
	}
	out := make([][]float32, len(raw))
	for i, r := range raw {
		r = bytes.TrimSpace(r)
		switch {
		case len(r) > 0 && r[0] == '"':
			var s string
			if err := json.Unmarshal(r, &s); err != nil {
				return fmt.Errorf("embeddings[%d]: %v", i, err)
			}
			bs, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return fmt.Errorf("embeddings[%d]: not base64: %v", i, err)
			}
			if len(bs)%4 != 0 {
				return fmt.Errorf("embeddings[%d]: %d bytes of base64, not a whole number of float32", i, len(bs))
			}
			v := make([]float32, len(bs)/4)
			floatsFromLE(v, bs)
			out[i] = v
		case isNull(r):
			out[i] = nil
		default:
			var v []*float32
			if err := json.Unmarshal(r, &v); err != nil {
				return undecodable("embeddings[%d]: expected a list of numbers: %v", i, err)
			}
			out[i] = make([]float32, len(v))
			for j, x := range v {
				if x == nil {
					return undecodable("embeddings[%d][%d]: null: data did not match any variant of untagged enum Embeddings", i, j)
				}
				out[i][j] = *x
			}
		}
	}
	*e = out
	return nil
}

// base64List reads a JSON list of base64 strings (what the JS client sends
// for a write's embeddings) without a second pass of the JSON decoder;
// ok is false for anything else (numbers, nulls, escapes, a bad string),
// which the general path then reads and judges. The first pass finds the
// strings and what they decode to; the second decodes them into one block
// of float32s, split between the cores, each worker through a scratch
// buffer of its own: a thousand embeddings cost a handful of allocations,
// not two thousand (on a machine where fresh memory is slow to fault in,
// that was a millisecond or more a request).
func base64List(b []byte) (out [][]float32, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return [][]float32{}, skipSpace(b, i+1) == len(b)
	}
	type span struct{ s, e, n int } // the string b[s:e], n bytes decoded
	var spans []span
	total, widest := 0, 0
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		end := bytes.IndexByte(b[i+1:], '"')
		if end < 0 {
			return nil, false
		}
		s := b[i+1 : i+1+end]
		if len(s)%4 != 0 || bytes.IndexByte(s, '\\') >= 0 {
			return nil, false
		}
		n := len(s) / 4 * 3
		if n > 0 && s[len(s)-1] == '=' {
			n--
			if s[len(s)-2] == '=' {
				n--
			}
		}
		if n%4 != 0 {
			return nil, false
		}
		spans = append(spans, span{i + 1, i + 1 + end, n})
		total += n
		widest = max(widest, n)
		i = skipSpace(b, i+end+2)
		if i >= len(b) {
			return nil, false
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != ']' || skipSpace(b, i+1) != len(b) {
			return nil, false
		}
		break
	}
	all := make([]float32, total/4)
	out = make([][]float32, len(spans))
	off := 0
	for k, sp := range spans {
		out[k] = all[off : off+sp.n/4 : off+sp.n/4]
		off += sp.n / 4
	}
	// The strings are decoded on every core (a thousand embeddings of 768
	// are four megabytes of base64), each worker through its own scratch.
	w := parallel.Workers(0, len(spans), total/4)
	raws := make([][]byte, w)
	var bad atomic.Bool
	err := parallel.Run(context.Background(), w, len(spans), func(worker, k int) {
		if raws[worker] == nil {
			raws[worker] = make([]byte, widest+3)
		}
		raw, sp := raws[worker], spans[k]
		n, err := base64.StdEncoding.Decode(raw, b[sp.s:sp.e])
		if err != nil || n != sp.n {
			bad.Store(true)
			return
		}
		floatsFromLE(out[k], raw)
	})
	if err != nil || bad.Load() {
		return nil, false
	}
	return out, true
}

// floatsFromLE fills dst from the little-endian float32s at the start of
// b (what a base64 embedding carries): one copy where this machine's
// float32s lie in memory so, one value at a time elsewhere.
func floatsFromLE(dst []float32, b []byte) {
	if littleEndian && len(dst) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst)), b)
		return
	}
	for j := range dst {
		dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
	}
}

// littleEndian is whether this machine's float32s lie in memory as
// little-endian bytes.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

type writeRequest struct {
	IDs        []string                      `json:"ids"`
	Embeddings *embeddings                   `json:"embeddings"`
	Documents  *[]*string                    `json:"documents"`
	URIs       *[]*string                    `json:"uris"`
	Metadatas  *[]map[string]json.RawMessage `json:"metadatas"`
}

type readRequest struct {
	IDs           []string        `json:"ids"`
	Where         json.RawMessage `json:"where"`
	WhereDocument json.RawMessage `json:"where_document"`
	Include       []string        `json:"include"`
	Limit         *int            `json:"limit"`
	Offset        *int            `json:"offset"`
	// query only
	QueryEmbeddings *embeddings `json:"query_embeddings"`
	NResults        *int        `json:"n_results"`
}

// ---- looking a collection up

// state returns the path's collection (by id) locked for reading, or
// for writing; unlock releases it.
func (s *Server) state(r *http.Request, write bool) (st *collState, unlock func(), err error) {
	s.mu.Lock()
	rec, err := s.lookup(r, false, true)
	if err == nil {
		st = s.colls[rec.ID]
	}
	s.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	if st == nil {
		return nil, nil, notFound("Collection [%s] does not exist.", r.PathValue("coll"))
	}
	if write {
		st.mu.Lock()
		unlock = st.mu.Unlock
	} else {
		st.mu.RLock()
		unlock = st.mu.RUnlock
	}
	if st.dropped {
		unlock()
		return nil, nil, notFound("Collection [%s] does not exist.", r.PathValue("coll"))
	}
	return st, unlock, nil
}

// ---- writes

// checkWrite checks a write's lists agree with its ids, its ids are
// unique and valid keys, and its batch is within the limit.
func (s *Server) checkWrite(req *writeRequest, needEmbeddings bool) error {
	n := len(req.IDs)
	if n > s.cfg.MaxBatchSize {
		return invalid("Cannot submit more than %d records at once (max_batch_size, as pre-flight-checks reports); got %d", s.cfg.MaxBatchSize, n)
	}
	var bad []string
	lens := []string{fmt.Sprintf("ids: %d", n)}
	check := func(name string, l int, given bool) {
		if given {
			lens = append(lens, fmt.Sprintf("%s: %d", name, l))
			if l != n {
				bad = append(bad, name)
			}
		}
	}
	if req.Embeddings != nil {
		check("embeddings", len(*req.Embeddings), true)
	}
	if req.Documents != nil {
		check("documents", len(*req.Documents), true)
	}
	if req.URIs != nil {
		check("uris", len(*req.URIs), true)
	}
	if req.Metadatas != nil {
		check("metadatas", len(*req.Metadatas), true)
	}
	if len(bad) > 0 {
		return invalid("Unequal lengths for fields: %s", strings.Join(lens, ", "))
	}
	if needEmbeddings && req.Embeddings == nil {
		return invalid("Expected embeddings: this server computes none (send embeddings, or let the client's embedding function make them)")
	}
	seen := make(map[string]struct{}, n)
	var dups []string
	for _, id := range req.IDs {
		if id == "" {
			return invalid("Expected IDs to be non-empty strings")
		}
		if _, ok := seen[id]; ok {
			dups = append(dups, id)
		}
		seen[id] = struct{}{}
	}
	if len(dups) > 0 {
		return errf(http.StatusBadRequest, "DuplicateIDError", "Expected IDs to be unique, found duplicates of: %s", strings.Join(dups, ", "))
	}
	if req.Embeddings != nil {
		for i, e := range *req.Embeddings {
			if e == nil {
				return invalid("embeddings[%d] (id %q): null; every record needs an embedding", i, req.IDs[i])
			}
			if len(e) == 0 {
				return invalid("embeddings[%d] (id %q): empty", i, req.IDs[i])
			}
			for _, x := range e {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					return invalid("embeddings[%d] (id %q): a NaN or infinite value", i, req.IDs[i])
				}
			}
		}
	}
	if req.Metadatas != nil {
		for i, m := range *req.Metadatas {
			for k, v := range m {
				if k == "" {
					return invalid("Validation error: metadatas: Invalid metadata at index %d (a key is empty)", i)
				}
				if _, err := parseMetaValue(k, v, true); err != nil {
					return undecodable("metadatas[%d].%s: data did not match any variant of untagged enum MetadataValue (%v)", i, k, err)
				}
			}
		}
	}
	return nil
}

// ensure creates the collection's store at the dimension of the first
// embeddings written to it; the caller holds st.mu for writing.
func (s *Server) ensure(ctx context.Context, st *collState, dim int) error {
	if st.c != nil {
		return nil
	}
	c, err := s.cfg.Backend.Create(ctx, st.id, dim, st.metric)
	if err != nil {
		return err
	}
	st.c = c
	st.setDim(dim)
	return nil
}

func (st *collState) setDim(d int) { st.dim = d; st.dimSeen.Store(int64(d)) }

func (st *collState) checkDims(es [][]float32) error {
	for _, e := range es {
		if len(e) != st.dim {
			return invalid("Collection expecting embedding with dimension of %d, got %d", st.dim, len(e))
		}
	}
	return nil
}

// stored returns the stored records of keys, by key.
func stored(ctx context.Context, c umbra.Collection, keys []string, vectors bool) (map[string]umbra.Record, error) {
	out := map[string]umbra.Record{}
	if c == nil || len(keys) == 0 {
		return out, nil
	}
	recs, err := c.Get(ctx, umbra.Selection{Keys: keys, Payloads: true, Vectors: vectors})
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		out[r.Key] = r
	}
	return out, nil
}

// row is one record of a write, ready for umbra.
type row struct {
	key    string
	vec    []float32
	fields meta.Fields
	p      payload
}

// put writes rows: Add for new ones (add), Upsert otherwise, then
// updates the document index with their IDs.
func (s *Server) put(ctx context.Context, st *collState, rows []row, add bool) error {
	if len(rows) == 0 {
		return nil
	}
	vecs := make([][]float32, len(rows))
	keys := make([]string, len(rows))
	fields := make([]meta.Fields, len(rows))
	pls := make([][]byte, len(rows))
	w := parallel.Workers(0, len(rows), len(rows)*len(rows[0].vec))
	if err := parallel.Run(ctx, w, len(rows), func(_, i int) {
		r := &rows[i]
		vecs[i], keys[i], fields[i], pls[i] = r.vec, r.key, r.fields, r.p.encode()
	}); err != nil {
		return err
	}
	opts := []umbra.WriteOption{umbra.WithKeys(keys...), umbra.WithMeta(fields...), umbra.WithPayloads(pls...)}
	var ids []uint64
	var err error
	if add {
		ids, err = st.c.Add(ctx, umbra.Vectors(vecs), opts...)
	} else {
		ids, err = st.c.Upsert(ctx, umbra.Vectors(vecs), opts...)
	}
	if err != nil {
		return err
	}
	if len(ids) != len(rows) {
		return fmt.Errorf("the collection stored %d rows of %d and reported no error", len(ids), len(rows))
	}
	for i, id := range ids {
		st.docs.set(id, rows[i].p.Doc)
	}
	return nil
}

// newRow builds the row of record i of req, over the stored record old
// (nil for a new one): metadata merged, document and URI kept unless
// given, the embedding kept unless given.
func (st *collState) newRow(req *writeRequest, i int, old *umbra.Record) (row, error) {
	r := row{key: req.IDs[i]}
	if old != nil {
		p, err := decodePayload(old.Payload)
		if err != nil {
			return r, err
		}
		r.p = p
		r.vec = old.Vector
		if st.metric == umbra.Cosine && p.Norm > 0 {
			// The stored unit vector, back at its norm: written again it
			// is normalised to the same unit vector.
			r.vec = scaled(old.Vector, p.Norm)
		}
	}
	if req.Embeddings != nil {
		r.vec = (*req.Embeddings)[i]
		r.p.Norm = 0
		if st.metric == umbra.Cosine {
			r.p.Norm = norm(r.vec)
		}
	}
	if req.Documents != nil {
		r.p.Doc = (*req.Documents)[i]
	}
	if req.URIs != nil {
		r.p.URI = (*req.URIs)[i]
	}
	if req.Metadatas != nil {
		if m := (*req.Metadatas)[i]; m != nil || old == nil {
			if old == nil {
				r.p.Meta = mergeMeta(nil, m)
			} else {
				r.p.Meta = mergeMeta(r.p.Meta, m)
			}
		}
	}
	f, err := fieldsOf(r.p.Meta)
	if err != nil {
		return r, invalid("metadatas[%d] (id %q): %v", i, req.IDs[i], err)
	}
	r.fields = f
	return r, nil
}

func norm(v []float32) float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return float32(math.Sqrt(s))
}

func scaled(v []float32, by float32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x * by
	}
	return out
}

// write is add, upsert and update: mode 'a' adds the records not stored
// (a stored id is left as it is, as Chroma does), 'u' upserts, 'p'
// updates the stored ones only.
func (s *Server) write(r *http.Request, mode byte) (int, any, error) {
	var req writeRequest
	if err := decodeLifting(r, &req, "embeddings", &req.Embeddings); err != nil {
		return 0, nil, err
	}
	if err := s.checkWrite(&req, mode != 'p'); err != nil {
		return 0, nil, err
	}
	st, unlock, err := s.state(r, true)
	if err != nil {
		return 0, nil, err
	}
	defer unlock()
	ctx := r.Context()
	if req.Embeddings != nil && len(*req.Embeddings) > 0 && (mode != 'p' || st.c != nil) {
		es := *req.Embeddings
		for _, e := range es {
			if len(e) != len(es[0]) {
				return 0, nil, invalid("Expected every embedding to have the dimension of the first, %d; got one of %d", len(es[0]), len(e))
			}
		}
		if err := s.ensure(ctx, st, len(es[0])); err != nil {
			return 0, nil, err
		}
		if err := st.checkDims(es); err != nil {
			return 0, nil, err
		}
	}
	status := 200
	if mode == 'a' {
		status = 201
	}
	if st.c == nil {
		return status, struct{}{}, nil
	}
	old, err := stored(ctx, st.c, req.IDs, mode == 'p' && req.Embeddings == nil)
	if err != nil {
		return 0, nil, err
	}
	// Every row is built (and judged) first, then written in one call —
	// an Add of the new ones, or an Upsert of them all — so a write is
	// stored whole or not at all. The rows are independent: they are
	// built on every core, and the error is the first bad row's in the
	// call's order, as one pass would give.
	var picks []int // the records that make a row
	for i, id := range req.IDs {
		_, ok := old[id]
		switch {
		case mode == 'a' && ok, mode == 'p' && !ok:
			continue
		}
		picks = append(picks, i)
	}
	rows := make([]row, len(picks))
	errs := make([]error, len(picks))
	w := parallel.Workers(0, len(picks), len(picks)*max(st.dim, 1))
	if err := parallel.Run(ctx, w, len(picks), func(_, j int) {
		i := picks[j]
		var op *umbra.Record
		if o, ok := old[req.IDs[i]]; ok {
			op = &o
		}
		rows[j], errs[j] = st.newRow(&req, i, op)
	}); err != nil {
		return 0, nil, err
	}
	for _, err := range errs {
		if err != nil {
			return 0, nil, err
		}
	}
	tm := timingOf(ctx)
	tm.mark("rows")
	if err := s.put(tm.traced(ctx), st, rows, mode == 'a'); err != nil {
		return 0, nil, err
	}
	tm.mark("write")
	return status, struct{}{}, nil
}

func (s *Server) add(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return s.write(r, 'a')
}
func (s *Server) upsert(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return s.write(r, 'u')
}
func (s *Server) update(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return s.write(r, 'p')
}

// ---- selecting records

// filter compiles a request's where into an umbra filter over the
// collection's fields (a condition on a field no record has matches no
// record; its negation every record).
func (st *collState) filter(ctx context.Context, where json.RawMessage) (meta.Filter, error) {
	if len(where) == 0 || isNull(where) {
		return meta.Filter{}, nil
	}
	f, err := compileWhere(where)
	if err != nil {
		return meta.Filter{}, err
	}
	if st.c == nil {
		return f, nil
	}
	sum, err := st.c.Summary(ctx)
	if err != nil {
		return meta.Filter{}, err
	}
	return metaindex.Absent(f, func(field string) bool { _, ok := sum.Fields[field]; return ok }), nil
}

// selection is the rows a request's ids, where and where_document select,
// as sorted IDs with their keys (ids naming no record are left out);
// all is true when nothing narrows the selection.
type selection struct {
	ids  []uint64
	keys map[uint64]string
}

func (s *Server) selectRows(ctx context.Context, st *collState, req *readRequest) (selection, error) {
	sel := selection{keys: map[uint64]string{}}
	f, err := st.filter(ctx, req.Where)
	if err != nil {
		return sel, err
	}
	var docs docSet
	hasDoc := len(req.WhereDocument) > 0 && !isNull(req.WhereDocument)
	if hasDoc {
		if docs, err = st.docs.eval(req.WhereDocument, 0); err != nil {
			return sel, err
		}
	}
	if st.c == nil {
		return sel, nil
	}
	us := umbra.Selection{Where: f}
	switch {
	case req.IDs != nil:
		us.Keys = req.IDs
	case hasDoc && !docs.not:
		us.IDs = docs.ids
		if us.IDs == nil {
			us.IDs = []uint64{}
		}
	}
	recs, err := st.c.Get(ctx, us)
	if err != nil {
		return sel, err
	}
	for _, r := range recs {
		sel.ids = append(sel.ids, r.ID)
		sel.keys[r.ID] = r.Key
	}
	if hasDoc && (req.IDs != nil || docs.not) {
		sel.ids = docs.and(docSet{ids: sel.ids}).ids
	}
	return sel, nil
}

// include is a get's or query's include list, checked.
func include(given []string, query bool) ([]string, map[string]bool, error) {
	if given == nil {
		given = []string{"documents", "metadatas"}
		if query {
			given = append(given, "distances")
		}
	}
	set := map[string]bool{}
	for _, x := range given {
		switch x {
		case "documents", "embeddings", "metadatas", "distances", "uris", "data":
			set[x] = true
		default:
			return nil, nil, errf(http.StatusUnprocessableEntity, "ChromaError", "Failed to deserialize the JSON body into the target type: include: unknown variant `%s`, expected one of `distances`, `documents`, `embeddings`, `metadatas`, `uris`", x)
		}
	}
	return given, set, nil
}

// fetched is what a read answers for each row.
type fetched struct {
	key string
	vec []float32
	p   payload
}

// fetch reads the rows ids (sorted or not) with what inc asks.
func (st *collState) fetch(ctx context.Context, ids []uint64, inc map[string]bool) (map[uint64]fetched, error) {
	out := make(map[uint64]fetched, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	needP := inc["documents"] || inc["metadatas"] || inc["uris"] || (inc["embeddings"] && st.metric == umbra.Cosine)
	recs, err := st.c.Get(ctx, umbra.Selection{IDs: sorted, Payloads: needP, Vectors: inc["embeddings"]})
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		f := fetched{key: r.Key, vec: r.Vector}
		if needP {
			if f.p, err = decodePayload(r.Payload); err != nil {
				return nil, err
			}
			if st.metric == umbra.Cosine && f.p.Norm > 0 && f.vec != nil {
				f.vec = scaled(f.vec, f.p.Norm)
			}
		}
		out[r.ID] = f
	}
	return out, nil
}

// columns are a get's or one query's answer lists.
type columns struct {
	ids       []string
	embs      [][]float32
	docs      []*string
	uris      []*string
	metas     []json.RawMessage
	distances []float32
}

func (c *columns) add(f fetched, inc map[string]bool) {
	c.ids = append(c.ids, f.key)
	if inc["embeddings"] {
		c.embs = append(c.embs, f.vec)
	}
	if inc["documents"] {
		c.docs = append(c.docs, f.p.Doc)
	}
	if inc["uris"] {
		c.uris = append(c.uris, f.p.URI)
	}
	if inc["metadatas"] {
		c.metas = append(c.metas, orNullMeta(f.p.metaJSON()))
	}
}

func orNullMeta(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return b
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req readRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	incList, inc, err := include(req.Include, false)
	if err != nil {
		return 0, nil, err
	}
	for name, v := range map[string]*int{"limit": req.Limit, "offset": req.Offset} {
		if v != nil && *v < 0 {
			return 0, nil, undecodable("%s: invalid value: integer `%d`, expected u32", name, *v)
		}
	}
	st, unlock, err := s.state(r, false)
	if err != nil {
		return 0, nil, err
	}
	defer unlock()
	ctx := r.Context()
	sel, err := s.selectRows(ctx, st, &req)
	if err != nil {
		return 0, nil, err
	}
	ids := sel.ids
	off, lim := 0, -1
	if req.Offset != nil {
		off = *req.Offset
	}
	if req.Limit != nil {
		lim = *req.Limit
	}
	ids = page(ids, lim, off)
	got, err := st.fetch(ctx, ids, inc)
	if err != nil {
		return 0, nil, err
	}
	var c columns
	c.ids = []string{}
	for _, id := range ids {
		if f, ok := got[id]; ok {
			c.add(f, inc)
		}
	}
	out := map[string]any{"ids": c.ids, "embeddings": nil, "documents": nil, "uris": nil, "metadatas": nil, "include": incList}
	fill(out, &c, inc)
	return 200, out, nil
}

// fill sets the included lists of one answer (empty lists, not null,
// when included and nothing matched).
func fill(out map[string]any, c *columns, inc map[string]bool) {
	if inc["embeddings"] {
		out["embeddings"] = nonNil(c.embs)
	}
	if inc["documents"] {
		out["documents"] = nonNil(c.docs)
	}
	if inc["uris"] {
		out["uris"] = nonNil(c.uris)
	}
	if inc["metadatas"] {
		out["metadatas"] = nonNil(c.metas)
	}
}

func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

func (s *Server) count(w http.ResponseWriter, r *http.Request) (int, any, error) {
	st, unlock, err := s.state(r, false)
	if err != nil {
		return 0, nil, err
	}
	defer unlock()
	if st.c == nil {
		return 200, 0, nil
	}
	n, err := st.c.Count(r.Context(), meta.Filter{})
	if err != nil {
		return 0, nil, err
	}
	return 200, n, nil
}

func (s *Server) deleteRecords(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req readRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if len(req.IDs) > s.cfg.MaxBatchSize {
		return 0, nil, invalid("Cannot delete more than %d records by id at once (max_batch_size); got %d", s.cfg.MaxBatchSize, len(req.IDs))
	}
	st, unlock, err := s.state(r, true)
	if err != nil {
		return 0, nil, err
	}
	defer unlock()
	ctx := r.Context()
	none := req.IDs == nil && (len(req.Where) == 0 || isNull(req.Where)) && (len(req.WhereDocument) == 0 || isNull(req.WhereDocument))
	if none || st.c == nil {
		if !none {
			if _, err := compileWhere(req.Where); len(req.Where) > 0 && !isNull(req.Where) && err != nil {
				return 0, nil, err
			}
		}
		return 200, map[string]int{"deleted": 0}, nil
	}
	sel, err := s.selectRows(ctx, st, &req)
	if err != nil {
		return 0, nil, err
	}
	if len(sel.ids) > 0 {
		if err := st.c.Delete(ctx, umbra.WithIDs(sel.ids...)); err != nil {
			return 0, nil, err
		}
		for _, id := range sel.ids {
			st.docs.remove(id)
		}
	}
	return 200, map[string]int{"deleted": len(sel.ids)}, nil
}

// ---- query

// distance turns umbra's score into Chroma's distance for the space:
// cosine 1 - cos, ip 1 - dot, l2 the squared distance.
func distance(m umbra.Metric, score float32) float32 {
	switch m {
	case umbra.Cosine, umbra.Dot:
		return 1 - score
	}
	return score
}

func (s *Server) query(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req readRequest
	if err := decodeLifting(r, &req, "query_embeddings", &req.QueryEmbeddings); err != nil {
		return 0, nil, err
	}
	incList, inc, err := include(req.Include, true)
	if err != nil {
		return 0, nil, err
	}
	if req.QueryEmbeddings == nil || len(*req.QueryEmbeddings) == 0 {
		return 0, nil, invalid("Expected query_embeddings: a non-empty list of embeddings (this server computes none)")
	}
	qs := *req.QueryEmbeddings
	if len(qs) > s.cfg.MaxBatchSize {
		return 0, nil, invalid("Cannot query more than %d embeddings at once (max_batch_size); got %d", s.cfg.MaxBatchSize, len(qs))
	}
	k := 10
	if req.NResults != nil {
		k = *req.NResults
	}
	if k < 0 {
		return 0, nil, undecodable("n_results: invalid value: integer `%d`, expected u32", k)
	}
	if k == 0 {
		return 0, nil, invalid("Expected n_results to be a positive integer, got 0")
	}
	st, unlock, err := s.state(r, false)
	if err != nil {
		return 0, nil, err
	}
	defer unlock()
	ctx := r.Context()
	tm := timingOf(ctx)
	tm.mark("lookup")
	for i, q := range qs {
		if q == nil {
			return 0, nil, invalid("query_embeddings[%d]: null", i)
		}
		if st.c != nil && len(q) != st.dim {
			return 0, nil, invalid("Collection expecting embedding with dimension of %d, got %d", st.dim, len(q))
		}
	}
	if st.c != nil && int64(len(qs))*int64(k) > maxQueryHits {
		// Bound the answer: k past the collection's rows adds nothing.
		rows, err := st.c.Count(ctx, meta.Filter{})
		if err != nil {
			return 0, nil, err
		}
		if n := int64(len(qs)) * int64(min(k, rows)); n > maxQueryHits {
			return 0, nil, invalid("A query of %d embeddings with n_results %d would answer %d results; this server answers at most %d per request (query fewer embeddings at once, or ask fewer results)", len(qs), k, n, maxQueryHits)
		}
	}
	perQuery := make([]columns, len(qs))
	if st.c != nil {
		if err := s.search(ctx, st, &req, qs, k, inc, perQuery); err != nil {
			return 0, nil, err
		}
	}
	out := map[string]any{"embeddings": nil, "documents": nil, "uris": nil, "metadatas": nil, "distances": nil, "include": incList}
	lists := map[string][]any{}
	ids := make([][]string, len(qs))
	for i := range perQuery {
		c := &perQuery[i]
		ids[i] = nonNil(c.ids)
		one := map[string]any{}
		fill(one, c, inc)
		if inc["distances"] {
			one["distances"] = nonNil(c.distances)
		}
		for name, v := range one {
			lists[name] = append(lists[name], v)
		}
	}
	out["ids"] = ids
	for name, v := range lists {
		out[name] = v
	}
	tm.mark("assemble")
	return 200, out, nil
}

// maxQueryHits bounds the results one query request answers (embeddings
// times n_results, n_results capped at the collection's rows), so that no
// request makes the server hold an unbounded answer.
const maxQueryHits = 1 << 20

// errFindingID is Chroma's answer to a query whose ids name a record that
// does not exist.
const errFindingID = "Error executing plan: Internal error: Error finding id"

func (s *Server) search(ctx context.Context, st *collState, req *readRequest, qs [][]float32, k int, inc map[string]bool, perQuery []columns) error {
	f, err := st.filter(ctx, req.Where)
	if err != nil {
		return err
	}
	// A search with no filter at all goes through umbra's coalescing
	// (concurrent single queries share one pass); one with a Where, even
	// an empty one, is run on its own.
	var opts []umbra.SearchOption
	if f != (meta.Filter{}) {
		opts = append(opts, umbra.Where(f))
	}
	hasDoc := len(req.WhereDocument) > 0 && !isNull(req.WhereDocument)
	var allow []uint64
	restrict := false
	if req.IDs != nil {
		recs, err := st.c.Get(ctx, umbra.Selection{Keys: req.IDs})
		if err != nil {
			return err
		}
		if len(recs) != len(req.IDs) {
			have := map[string]bool{}
			for _, r := range recs {
				have[r.Key] = true
			}
			for _, id := range req.IDs {
				if !have[id] {
					return errf(http.StatusInternalServerError, "InternalError", "%s: record %q does not exist", errFindingID, id)
				}
			}
		}
		for _, r := range recs {
			allow = append(allow, r.ID)
		}
		slices.Sort(allow)
		allow = slices.Compact(allow)
		restrict = true
	}
	if hasDoc {
		d, err := st.docs.eval(req.WhereDocument, 0)
		if err != nil {
			return err
		}
		if d.not && !restrict {
			// A negation: every row but those the index names.
			recs, err := st.c.Get(ctx, umbra.Selection{})
			if err != nil {
				return err
			}
			for _, r := range recs {
				allow = append(allow, r.ID)
			}
			restrict = true
		}
		if restrict {
			allow = d.and(docSet{ids: allow}).ids
		} else {
			allow = d.ids
		}
		restrict = true
	}
	if restrict {
		opts = append(opts, umbra.Allow(allow...))
	}
	tm := timingOf(ctx)
	tm.mark("filter")
	sctx := tm.traced(ctx)
	var hits [][]umbra.Hit
	if len(qs) == 1 {
		h, err := st.c.Search(sctx, qs[0], k, opts...)
		if err != nil {
			return err
		}
		hits = [][]umbra.Hit{h}
	} else if hits, err = st.c.SearchBatch(sctx, qs, k, opts...); err != nil {
		return err
	}
	tm.mark("search")
	var all []uint64
	for _, hs := range hits {
		for _, h := range hs {
			all = append(all, h.ID)
		}
	}
	got, err := st.fetch(ctx, all, inc)
	if err != nil {
		return err
	}
	tm.mark("fetch")
	for i, hs := range hits {
		c := &perQuery[i]
		for _, h := range hs {
			fr, ok := got[h.ID]
			if !ok {
				fr = fetched{key: h.Key}
			}
			if fr.key == "" {
				fr.key = h.Key
			}
			c.add(fr, inc)
			if inc["distances"] {
				c.distances = append(c.distances, distance(st.metric, h.Score))
			}
		}
	}
	return nil
}
