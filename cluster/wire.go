package cluster

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/umbravec/umbra"
)

// The wire format. Every message umbra publishes (a write in a shard's
// stream, a request to a shard, a replica's reply) is one frame:
//
//	u8 version, u32 crc32c(version byte ‖ body), body
//
// The checksum is CRC-32C (Castagnoli), as the store's log records use.
// The first five bytes keep this meaning in every version, so a reader
// checks the checksum before it reads anything the version decides: a
// message too short to carry a checksum, or whose checksum does not
// match, is unreadable whatever its version byte says. A message that
// verifies but carries a version this build does not know was written by a
// newer umbra (a replica stops there rather than skip it, see replica.go);
// one that verifies and whose body does not decode under its version, or
// that carries a version no build writes in this frame (0 to 2: the
// unframed formats of earlier builds, no longer read), is unreadable.
//
// This build reads and writes version 3 only: umbra is unpublished, and
// the versions before it (a version byte and no checksum) are not read;
// a cluster whose streams were written by an earlier build is rebuilt
// (export a replica's store, build again), its messages would otherwise be
// skipped as unreadable. Version 3 has one layout per message with every
// field, described at each type below.
//
// All integers are little-endian; float32 is IEEE 754 bits; a str is a u32
// length and that many bytes. A reply too large for one NATS message is
// sent in pieces (fanout.go); the frame, and its checksum, cover the
// reply whole, checked once the pieces are put together.
//
// Decoders never allocate more than a small multiple of the message's
// length, whatever the counts in it claim: every count is checked
// against the bytes left before anything is made for it
// (TestWireAllocationBounded, FuzzDecodeFrame).
const (
	wireVersion = 3 // the version this build reads and writes
	frameHeader = 5 // u8 version, u32 checksum
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errWire is a message that cannot be read: too short for a frame, a
// checksum that does not match, or a body that does not decode. No build
// can read it.
var errWire = errors.New("unreadable cluster message")

// versionError is a message whose checksum holds but whose version this
// build does not know: a newer build wrote it, and may read it.
type versionError struct{ version byte }

func (e *versionError) Error() string {
	return fmt.Sprintf("format version %d, and this build reads version %d: a newer umbra wrote it", e.version, wireVersion)
}

// newFrame starts a message of this build's version with room for a body
// of size bytes; sealFrame fills in its checksum.
func newFrame(size int) []byte {
	b := make([]byte, frameHeader, frameHeader+size)
	b[0] = wireVersion
	return b
}

// frameSum is the checksum of a frame: over its version byte and its body.
func frameSum(b []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, b[:1]), castagnoli, b[frameHeader:])
}

func sealFrame(b []byte) []byte {
	if testHooks.noChecksum.Load() {
		return b // the checksum's cost, measured (BenchmarkLoopbackSecurity)
	}
	binary.LittleEndian.PutUint32(b[1:frameHeader], frameSum(b))
	return b
}

// openFrame checks b's checksum, then its version, and returns its body.
// The error wraps errWire, or is a *versionError.
func openFrame(b []byte) ([]byte, error) {
	if len(b) < frameHeader {
		return nil, fmt.Errorf("%w: %d bytes, too short to carry a checksum (%d)", errWire, len(b), frameHeader)
	}
	if testHooks.noChecksum.Load() {
		// The checksum's cost, measured (BenchmarkLoopbackSecurity).
	} else if want, got := binary.LittleEndian.Uint32(b[1:frameHeader]), frameSum(b); want != got {
		return nil, fmt.Errorf("%w: checksum mismatch (the message says %08x, its %d bytes give %08x)", errWire, want, len(b), got)
	}
	switch v := b[0]; {
	case v > wireVersion:
		return nil, &versionError{version: v}
	case v < wireVersion:
		return nil, fmt.Errorf("%w: format version %d in a checksummed frame, which no umbra writes", errWire, v)
	}
	return b[frameHeader:], nil
}

// frameJSON frames v's JSON (the admin requests and replies, a node's
// stats): the same version and checksum as every other cluster message.
func frameJSON(v any) []byte {
	// umbra's own types, which always encode (an empty body would fail
	// its reader's decode, naming the message).
	j, _ := json.Marshal(v)
	return sealFrame(append(newFrame(len(j)), j...))
}

// openJSON checks b's frame and decodes its JSON body into v.
func openJSON(b []byte, v any) error {
	body, err := openFrame(b)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", errWire, err)
	}
	return nil
}

// Write operations, as logged in a shard's stream.
const (
	opAdd    = 1
	opUpsert = 2
	opDelete = 3
)

// writeMsg is one shard's part of a write: the rows of the call that hash
// to this shard, whole or as one of several pieces under the payload limit.
// Its body:
//
//	u8 op, u8 naming (0 IDs, 1 keys), u8 attrs (bit 0: metadata given,
//	  bit 1: payloads given; 0 on a delete), u32 n, u32 dim,
//	n × u64 IDs (naming IDs: the rows' IDs; naming keys: the IDs a new key
//	  gets, chosen by the client so that every replica assigns the same),
//	naming keys: n × str keys,
//	op add/upsert: n × dim float32 rows,
//	attrs bit 0: n × str meta.AppendBinary of the row's fields (empty: none),
//	attrs bit 1: n × str payloads (empty: none).
//
// "Given" keeps the engine's distinction: an upsert without metadata
// keeps the replaced rows' own, one with it (even empty) replaces it.
type writeMsg struct {
	op       byte
	keys     []string // nil: named by IDs
	ids      []uint64
	dim      int
	rows     []float32 // n × dim; nil for a delete
	metaSet  bool
	meta     [][]byte // n encoded rows (meta.AppendBinary), when metaSet
	paySet   bool
	payloads [][]byte // n payloads, when paySet
}

const (
	attrMeta     = 1
	attrPayloads = 2
)

// writeHeader is the bytes of a write message besides its rows' own.
const writeHeader = frameHeader + 11

func (m *writeMsg) n() int { return len(m.ids) }

// size is the encoded length in bytes.
func (m *writeMsg) size() int {
	s := writeHeader + 8*len(m.ids) + 4*len(m.rows)
	for _, k := range m.keys {
		s += 4 + len(k)
	}
	for _, b := range m.meta {
		s += 4 + len(b)
	}
	for _, b := range m.payloads {
		s += 4 + len(b)
	}
	return s
}

func (m *writeMsg) encode() []byte {
	b := newFrame(m.size() - frameHeader)
	naming := byte(0)
	if m.keys != nil {
		naming = 1
	}
	attrs := byte(0)
	if m.metaSet {
		attrs |= attrMeta
	}
	if m.paySet {
		attrs |= attrPayloads
	}
	b = append(b, m.op, naming, attrs)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.ids)))
	b = binary.LittleEndian.AppendUint32(b, uint32(m.dim))
	for _, id := range m.ids {
		b = binary.LittleEndian.AppendUint64(b, id)
	}
	for _, k := range m.keys {
		b = appendStr(b, k)
	}
	for _, v := range m.rows {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	for _, x := range m.meta {
		b = appendBytes(b, x)
	}
	for _, x := range m.payloads {
		b = appendBytes(b, x)
	}
	return sealFrame(b)
}

func appendBytes(b, x []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
	return append(b, x...)
}

func appendStr(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// reader walks a message's body, remembering the first failure.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{errWire}, args...)...)
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("%d bytes wanted, %d left", n, len(r.b))
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u8() byte {
	p := r.take(1)
	if p == nil {
		return 0
	}
	return p[0]
}

func (r *reader) u32() uint32 {
	p := r.take(4)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(p)
}

func (r *reader) u64() uint64 {
	p := r.take(8)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(p)
}

func (r *reader) str() string {
	n := r.u32()
	return string(r.take(int(n)))
}

// bytes reads a u32 length and that many bytes (nil for none).
func (r *reader) bytes() []byte {
	n := r.u32()
	if n == 0 {
		return nil
	}
	return r.take(int(n))
}

// count reads a u32 count of entries of at least min bytes each, refused
// when the bytes left cannot hold that many: what a decoder makes for the
// entries is then bounded by the message's length.
func (r *reader) count(min int, what string) int {
	n := int(r.u32())
	if r.err == nil && (n < 0 || n > len(r.b)/min) {
		r.fail("%d %s in %d bytes", n, what, len(r.b))
		return 0
	}
	return n
}

// list reads n length-prefixed byte strings.
func (r *reader) list(n int) [][]byte {
	if r.err == nil && (n < 0 || n > len(r.b)/4) {
		r.fail("%d entries wanted, %d bytes left", n, len(r.b))
	}
	if r.err != nil {
		return nil
	}
	out := make([][]byte, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, r.bytes())
	}
	return out
}

// strs reads n strs.
func (r *reader) strs(n int) []string {
	if r.err == nil && (n < 0 || n > len(r.b)/4) {
		r.fail("%d strings wanted, %d bytes left", n, len(r.b))
	}
	if r.err != nil {
		return nil
	}
	out := make([]string, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, r.str())
	}
	return out
}

func (r *reader) f32s(n int) []float32 {
	if r.err == nil && (n < 0 || n > len(r.b)/4) {
		r.fail("%d floats wanted, %d bytes left", n, len(r.b))
	}
	p := r.take(4 * n)
	if p == nil {
		return nil
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
	}
	return out
}

func (r *reader) u64s(n int) []uint64 {
	if r.err == nil && (n < 0 || n > len(r.b)/8) {
		r.fail("%d IDs wanted, %d bytes left", n, len(r.b))
	}
	p := r.take(8 * n)
	if p == nil {
		return nil
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(p[8*i:])
	}
	return out
}

// end refuses bytes left after the last field.
func (r *reader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes past the end", len(r.b))
	}
	return r.err
}

// decodeWrite reads a write message. The error wraps errWire (no build
// can read it) or is a *versionError (a newer build may).
func decodeWrite(b []byte) (*writeMsg, error) {
	body, err := openFrame(b)
	if err != nil {
		return nil, err
	}
	r := &reader{b: body}
	m := &writeMsg{op: r.u8()}
	naming := r.u8()
	attrs := r.u8()
	n := int(r.u32())
	m.dim = int(r.u32())
	switch {
	case r.err != nil:
	case m.op < opAdd || m.op > opDelete || naming > 1:
		r.fail("op %d, naming %d", m.op, naming)
	case attrs&^(attrMeta|attrPayloads) != 0 || attrs != 0 && m.op == opDelete:
		r.fail("attributes %#x on op %d", attrs, m.op)
	}
	m.ids = r.u64s(n)
	if naming == 1 {
		m.keys = r.strs(n)
	}
	if m.op != opDelete && r.err == nil {
		if m.dim <= 0 || n < 0 || n > 0 && m.dim > len(r.b)/4/n {
			r.fail("%d rows of dimension %d in %d bytes", n, m.dim, len(r.b))
		} else {
			m.rows = r.f32s(n * m.dim)
		}
	}
	if attrs&attrMeta != 0 {
		m.metaSet, m.meta = true, r.list(n)
	}
	if attrs&attrPayloads != 0 {
		m.paySet, m.payloads = true, r.list(n)
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return m, nil
}

// Request kinds a replica answers.
const (
	kindSearch = 1 // top k of each query
	kindRange  = 2 // every row within a threshold, up to maxHits
	kindAwait  = 3 // wait until applied, then report the outcomes of seqs
	kindLookup = 4 // the IDs of the keys the shard holds
	kindRows   = 5 // how many rows the shard holds
	kindGet    = 6 // stored rows, in ID order, with what the caller asks of each
	kindCount  = 7 // how many rows a where filter matches
)

// What a get asks of each row besides its ID and key (request.include).
const (
	includeVector  = 1
	includeMeta    = 2
	includePayload = 4
)

// request is one fan-out call to a shard. Its body:
//
//	u8 kind, u64 minSeq (the caller's token for this shard: answer only
//	once applied this far), u32 waitMillis (how long the replica may wait
//	to catch up before it says it is behind),
//	kind search/range: u32 k, f32 threshold, u32 maxHits (0: none),
//	  u32 allowCount (0xFFFFFFFF: no filter) + allowCount × u64 IDs,
//	  u32 nq, u32 dim, nq × dim float32 queries,
//	  u32 whereLength (0xFFFFFFFF: no filter) + the filter in the where
//	  syntax (meta.Filter.AppendJSON), u8 withPayload (1: hits carry
//	  payloads);
//	kind await: u32 n + n × u64 sequences;
//	kind lookup: u32 n + n × str keys; its reply is a search's with one
//	  query, a hit (ID, score 0, key) per key held;
//	kind rows: nothing more;
//	kind get: u64 from, u32 limit, u8 include (includeVector, …),
//	  u32 idCount (0xFFFFFFFF: none) + idCount × u64 IDs,
//	  u32 keyCount (0xFFFFFFFF: none) + keyCount × str keys,
//	  u32 whereLength (0xFFFFFFFF: no filter) + the filter;
//	kind count: u32 whereLength (0xFFFFFFFF: no filter) + the filter.
type request struct {
	kind      byte
	minSeq    uint64
	waitMs    uint32
	k         int
	threshold float32
	maxHits   int
	allow     []uint64 // nil: no filter
	dim       int
	queries   []float32 // nq × dim
	seqs      []uint64
	keys      []string // kind lookup
	where     []byte   // nil: no filter
	payload   bool
	// kind get: rows from ID from on, at most limit of them, among ids or
	// keys when non-nil, with what include asks.
	from    uint64
	limit   int
	include byte
	ids     []uint64
}

const noFilter = 0xFFFFFFFF

func (q *request) encode() []byte {
	size := 48 + 8*len(q.allow) + 4*len(q.queries) + 8*len(q.seqs) + len(q.where)
	for _, k := range q.keys {
		size += 4 + len(k)
	}
	b := newFrame(size)
	b = append(b, q.kind)
	b = binary.LittleEndian.AppendUint64(b, q.minSeq)
	b = binary.LittleEndian.AppendUint32(b, q.waitMs)
	switch q.kind {
	case kindAwait:
		b = binary.LittleEndian.AppendUint32(b, uint32(len(q.seqs)))
		for _, s := range q.seqs {
			b = binary.LittleEndian.AppendUint64(b, s)
		}
		return sealFrame(b)
	case kindRows:
		return sealFrame(b)
	case kindLookup:
		b = binary.LittleEndian.AppendUint32(b, uint32(len(q.keys)))
		for _, k := range q.keys {
			b = appendStr(b, k)
		}
		return sealFrame(b)
	case kindGet:
		b = binary.LittleEndian.AppendUint64(b, q.from)
		b = binary.LittleEndian.AppendUint32(b, uint32(q.limit))
		b = append(b, q.include)
		if q.ids == nil {
			b = binary.LittleEndian.AppendUint32(b, noFilter)
		} else {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(q.ids)))
			for _, id := range q.ids {
				b = binary.LittleEndian.AppendUint64(b, id)
			}
		}
		if q.keys == nil {
			b = binary.LittleEndian.AppendUint32(b, noFilter)
		} else {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(q.keys)))
			for _, k := range q.keys {
				b = appendStr(b, k)
			}
		}
		return sealFrame(appendWhere(b, q.where))
	case kindCount:
		return sealFrame(appendWhere(b, q.where))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(q.k))
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(q.threshold))
	b = binary.LittleEndian.AppendUint32(b, uint32(q.maxHits))
	if q.allow == nil {
		b = binary.LittleEndian.AppendUint32(b, noFilter)
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(q.allow)))
		for _, id := range q.allow {
			b = binary.LittleEndian.AppendUint64(b, id)
		}
	}
	nq := 0
	if q.dim > 0 {
		nq = len(q.queries) / q.dim
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(nq))
	b = binary.LittleEndian.AppendUint32(b, uint32(q.dim))
	for _, v := range q.queries {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	b = appendWhere(b, q.where)
	b = append(b, byte(btoi(q.payload)))
	return sealFrame(b)
}

// appendWhere appends a request's where filter: its length and bytes, or
// noFilter.
func appendWhere(b, where []byte) []byte {
	if where == nil {
		return binary.LittleEndian.AppendUint32(b, noFilter)
	}
	return appendBytes(b, where)
}

// where reads a request's where filter (nil: none).
func (r *reader) where() []byte {
	n := r.u32()
	if n == noFilter {
		return nil
	}
	w := r.take(int(n))
	if w == nil && r.err == nil {
		w = []byte{}
	}
	return w
}

// decodeRequest reads a request; its errors are decodeWrite's.
func decodeRequest(b []byte) (*request, error) {
	body, err := openFrame(b)
	if err != nil {
		return nil, err
	}
	r := &reader{b: body}
	q := &request{kind: r.u8(), minSeq: r.u64(), waitMs: r.u32()}
	switch {
	case r.err != nil:
	case q.kind == kindAwait:
		q.seqs = r.u64s(int(r.u32()))
	case q.kind == kindRows:
	case q.kind == kindLookup:
		q.keys = r.strs(int(r.u32()))
	case q.kind == kindGet:
		q.from = r.u64()
		q.limit = int(r.u32())
		q.include = r.u8()
		if q.include&^(includeVector|includeMeta|includePayload) != 0 && r.err == nil {
			r.fail("include %#x", q.include)
		}
		if n := r.u32(); n != noFilter {
			if q.ids = r.u64s(int(n)); q.ids == nil && r.err == nil {
				q.ids = []uint64{}
			}
		}
		if n := r.u32(); n != noFilter {
			if q.keys = r.strs(int(n)); q.keys == nil && r.err == nil {
				q.keys = []string{}
			}
		}
		q.where = r.where()
	case q.kind == kindCount:
		q.where = r.where()
	case q.kind == kindSearch || q.kind == kindRange:
		q.k = int(r.u32())
		q.threshold = math.Float32frombits(r.u32())
		q.maxHits = int(r.u32())
		if n := r.u32(); n != noFilter {
			q.allow = r.u64s(int(n))
			if q.allow == nil && r.err == nil {
				q.allow = []uint64{}
			}
		}
		nq := int(r.u32())
		q.dim = int(r.u32())
		if r.err == nil && (q.dim <= 0 || nq < 0 || nq > len(r.b)/4/q.dim) {
			r.fail("%d queries of dimension %d in %d bytes", nq, q.dim, len(r.b))
		}
		q.queries = r.f32s(nq * q.dim)
		q.where = r.where()
		switch p := r.u8(); {
		case r.err != nil:
		case p > 1:
			r.fail("withPayload %d", p)
		default:
			q.payload = p == 1
		}
	default:
		r.fail("request kind %d", q.kind)
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return q, nil
}

// Reply statuses.
const (
	statusOK      = 0
	statusBehind  = 1 // not applied up to minSeq within waitMillis: ask another replica
	statusError   = 2 // the replica cannot answer (message says why)
	statusStopped = 3 // the replica stopped at a message it cannot apply (message names it and the way out)
)

// hit is one result on the wire.
type hit struct {
	ID      uint64
	Score   float32
	Key     string
	Payload string
}

// outcome is how a replica applied one write message: every replica
// applies the same messages in the same order to the same state, so every
// one reaches the same outcome.
type outcome struct {
	code byte   // outcome code (codeOK, codeIDExists, …)
	msg  string // the error, in words
	ids  []uint64
}

// reply is a replica's answer. Its body:
//
//	u8 status, u64 applied, str message,
//	status OK, kind rows or count: u64 rows;
//	status OK, kind get: u8 include, u8 cut (1: the replica stopped short
//	  of limit to bound the answer's bytes: more rows may follow the
//	  last), u32 dim, u32 n, per row u64 ID, str key, include vector:
//	  dim × f32, include meta: str meta.AppendBinary, include payload:
//	  str payload;
//	status OK, kind await: u32 n, per sequence u8 code, str message,
//	  u32 m + m × u64 IDs;
//	status OK, kind search/range/lookup: u8 withPayload, u32 nq, per query
//	  u32 n + n × (u64 ID, f32 score, str key, withPayload 1: str payload).
type reply struct {
	status   byte
	applied  uint64
	msg      string
	hits     [][]hit
	outcomes []outcome
	rows     uint64 // kind rows, count
	payloads bool   // every hit carries its payload
	// kind get: the rows, what each carries (the request's include), the
	// dimension of their vectors, and whether the replica cut the answer
	// short.
	recs    []record
	include byte
	dim     int
	cut     bool
}

// record is one row of a get's answer.
type record struct {
	id      uint64
	key     string
	vec     []float32
	meta    []byte // meta.AppendBinary of the row's fields
	payload []byte
}

// minRecord is the least bytes one row of a get's answer takes.
const minRecord = 8 + 4

// The least bytes one entry of a reply takes: a hit without and with its
// payload, an outcome, a query's hit list.
const (
	minHit     = 8 + 4 + 4
	minOutcome = 1 + 4 + 4
	minHits    = 4
)

func (p *reply) encode(kind byte) []byte {
	b := newFrame(64 + len(p.msg))
	b = append(b, p.status)
	b = binary.LittleEndian.AppendUint64(b, p.applied)
	b = appendStr(b, p.msg)
	if p.status != statusOK {
		return sealFrame(b)
	}
	switch kind {
	case kindRows, kindCount:
		b = binary.LittleEndian.AppendUint64(b, p.rows)
	case kindGet:
		b = append(b, p.include, byte(btoi(p.cut)))
		b = binary.LittleEndian.AppendUint32(b, uint32(p.dim))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.recs)))
		for _, rec := range p.recs {
			b = binary.LittleEndian.AppendUint64(b, rec.id)
			b = appendStr(b, rec.key)
			if p.include&includeVector != 0 {
				for _, v := range rec.vec {
					b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
				}
			}
			if p.include&includeMeta != 0 {
				b = appendBytes(b, rec.meta)
			}
			if p.include&includePayload != 0 {
				b = appendBytes(b, rec.payload)
			}
		}
	case kindAwait:
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.outcomes)))
		for _, o := range p.outcomes {
			b = append(b, o.code)
			b = appendStr(b, o.msg)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(o.ids)))
			for _, id := range o.ids {
				b = binary.LittleEndian.AppendUint64(b, id)
			}
		}
	default:
		b = append(b, byte(btoi(p.payloads)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.hits)))
		for _, hs := range p.hits {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(hs)))
			for _, h := range hs {
				b = binary.LittleEndian.AppendUint64(b, h.ID)
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(h.Score))
				b = appendStr(b, h.Key)
				if p.payloads {
					b = appendStr(b, h.Payload)
				}
			}
		}
	}
	return sealFrame(b)
}

// decodeReply reads a reply to a request of kind; its errors are
// decodeWrite's.
func decodeReply(b []byte, kind byte) (*reply, error) {
	body, err := openFrame(b)
	if err != nil {
		return nil, err
	}
	r := &reader{b: body}
	p := &reply{status: r.u8(), applied: r.u64(), msg: r.str()}
	switch {
	case r.err != nil:
	case p.status > statusStopped:
		r.fail("reply status %d", p.status)
	case p.status != statusOK:
	case kind == kindRows || kind == kindCount:
		p.rows = r.u64()
	case kind == kindGet:
		p.include = r.u8()
		switch c := r.u8(); {
		case r.err != nil:
		case c > 1 || p.include&^(includeVector|includeMeta|includePayload) != 0:
			r.fail("get reply: include %#x, cut %d", p.include, c)
		default:
			p.cut = c == 1
		}
		p.dim = int(r.u32())
		per := minRecord + 4*btoi(p.include&includeMeta != 0) + 4*btoi(p.include&includePayload != 0)
		if p.include&includeVector != 0 && r.err == nil {
			if p.dim <= 0 || p.dim > umbra.MaxDim {
				r.fail("get reply: vectors of dimension %d", p.dim)
			}
			per += 4 * p.dim
		}
		n := r.count(per, "rows")
		p.recs = make([]record, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			rec := record{id: r.u64(), key: r.str()}
			if p.include&includeVector != 0 {
				rec.vec = r.f32s(p.dim)
			}
			if p.include&includeMeta != 0 {
				rec.meta = r.bytes()
			}
			if p.include&includePayload != 0 {
				rec.payload = r.bytes()
			}
			p.recs = append(p.recs, rec)
		}
	case kind == kindAwait:
		n := r.count(minOutcome, "outcomes")
		p.outcomes = make([]outcome, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			o := outcome{code: r.u8(), msg: r.str()}
			o.ids = r.u64s(int(r.u32()))
			p.outcomes = append(p.outcomes, o)
		}
	default:
		switch w := r.u8(); {
		case r.err != nil:
		case w > 1:
			r.fail("withPayload %d", w)
		default:
			p.payloads = w == 1
		}
		n := r.count(minHits, "hit lists")
		p.hits = make([][]hit, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			m := r.count(minHit+4*btoi(p.payloads), "hits")
			hs := make([]hit, m)
			for j := 0; j < m && r.err == nil; j++ {
				hs[j] = hit{ID: r.u64(), Score: math.Float32frombits(r.u32()), Key: r.str()}
				if p.payloads {
					hs[j].Payload = r.str()
				}
			}
			p.hits = append(p.hits, hs)
		}
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return p, nil
}
