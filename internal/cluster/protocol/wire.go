package protocol

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sync/atomic"

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
	WireVersion = 3 // the version this build reads and writes
	FrameHeader = 5 // u8 version, u32 checksum
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errWire is a message that cannot be read: too short for a frame, a
// checksum that does not match, or a body that does not decode. No build
// can read it.
var ErrWire = errors.New("unreadable cluster message")

// versionError is a message whose checksum holds but whose version this
// build does not know: a newer build wrote it, and may read it.
type VersionError struct{ Version byte }

func (e *VersionError) Error() string {
	return fmt.Sprintf("format version %d, and this build reads version %d: a newer umbra wrote it", e.Version, WireVersion)
}

// newFrame starts a message of this build's version with room for a body
// of size bytes; sealFrame fills in its checksum.
func NewFrame(size int) []byte {
	b := make([]byte, FrameHeader, FrameHeader+size)
	b[0] = WireVersion
	return b
}

// NoChecksum, set by a benchmark, leaves the frames' checksums out, to
// measure their cost (BenchmarkLoopbackSecurity). Never set outside
// benchmarks.
var NoChecksum atomic.Bool

// frameSum is the checksum of a frame: over its version byte and its body.
func FrameSum(b []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, b[:1]), castagnoli, b[FrameHeader:])
}

func SealFrame(b []byte) []byte {
	if NoChecksum.Load() {
		return b // the checksum's cost, measured (BenchmarkLoopbackSecurity)
	}
	binary.LittleEndian.PutUint32(b[1:FrameHeader], FrameSum(b))
	return b
}

// openFrame checks b's checksum, then its version, and returns its body.
// The error wraps errWire, or is a *versionError.
func OpenFrame(b []byte) ([]byte, error) {
	if len(b) < FrameHeader {
		return nil, fmt.Errorf("%w: %d bytes, too short to carry a checksum (%d)", ErrWire, len(b), FrameHeader)
	}
	if NoChecksum.Load() {
		// The checksum's cost, measured (BenchmarkLoopbackSecurity).
	} else if want, got := binary.LittleEndian.Uint32(b[1:FrameHeader]), FrameSum(b); want != got {
		return nil, fmt.Errorf("%w: checksum mismatch (the message says %08x, its %d bytes give %08x)", ErrWire, want, len(b), got)
	}
	switch v := b[0]; {
	case v > WireVersion:
		return nil, &VersionError{Version: v}
	case v < WireVersion:
		return nil, fmt.Errorf("%w: format version %d in a checksummed frame, which no umbra writes", ErrWire, v)
	}
	return b[FrameHeader:], nil
}

// frameJSON frames v's JSON (the admin requests and replies, a node's
// stats): the same version and checksum as every other cluster message.
func FrameJSON(v any) []byte {
	// umbra's own types, which always encode (an empty body would fail
	// its reader's decode, naming the message).
	j, _ := json.Marshal(v)
	return SealFrame(append(NewFrame(len(j)), j...))
}

// openJSON checks b's frame and decodes its JSON body into v.
func OpenJSON(b []byte, v any) error {
	body, err := OpenFrame(b)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", ErrWire, err)
	}
	return nil
}

// Write operations, as logged in a shard's stream.
const (
	OpAdd    = 1
	OpUpsert = 2
	OpDelete = 3
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
//	attrs bit 0: n × str metaindex.AppendBinary of the row's fields (empty: none),
//	attrs bit 1: n × str payloads (empty: none).
//
// "Given" keeps the engine's distinction: an upsert without metadata
// keeps the replaced rows' own, one with it (even empty) replaces it.
type WriteMsg struct {
	Op       byte
	Keys     []string // nil: named by IDs
	IDs      []uint64
	Dim      int
	Rows     []float32 // n × dim; nil for a delete
	MetaSet  bool
	Meta     [][]byte // n encoded rows (metaindex.AppendBinary), when metaSet
	PaySet   bool
	Payloads [][]byte // n payloads, when paySet
}

const (
	attrMeta     = 1
	attrPayloads = 2
)

// writeHeader is the bytes of a write message besides its rows' own.
const WriteHeader = FrameHeader + 11

func (m *WriteMsg) N() int { return len(m.IDs) }

// size is the encoded length in bytes.
func (m *WriteMsg) Size() int {
	s := WriteHeader + 8*len(m.IDs) + 4*len(m.Rows)
	for _, k := range m.Keys {
		s += 4 + len(k)
	}
	for _, b := range m.Meta {
		s += 4 + len(b)
	}
	for _, b := range m.Payloads {
		s += 4 + len(b)
	}
	return s
}

func (m *WriteMsg) Encode() []byte {
	b := NewFrame(m.Size() - FrameHeader)
	naming := byte(0)
	if m.Keys != nil {
		naming = 1
	}
	attrs := byte(0)
	if m.MetaSet {
		attrs |= attrMeta
	}
	if m.PaySet {
		attrs |= attrPayloads
	}
	b = append(b, m.Op, naming, attrs)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.IDs)))
	b = binary.LittleEndian.AppendUint32(b, uint32(m.Dim))
	for _, id := range m.IDs {
		b = binary.LittleEndian.AppendUint64(b, id)
	}
	for _, k := range m.Keys {
		b = appendStr(b, k)
	}
	for _, v := range m.Rows {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	for _, x := range m.Meta {
		b = appendBytes(b, x)
	}
	for _, x := range m.Payloads {
		b = appendBytes(b, x)
	}
	return SealFrame(b)
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
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrWire}, args...)...)
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
func DecodeWrite(b []byte) (*WriteMsg, error) {
	body, err := OpenFrame(b)
	if err != nil {
		return nil, err
	}
	r := &reader{b: body}
	m := &WriteMsg{Op: r.u8()}
	naming := r.u8()
	attrs := r.u8()
	n := int(r.u32())
	m.Dim = int(r.u32())
	switch {
	case r.err != nil:
	case m.Op < OpAdd || m.Op > OpDelete || naming > 1:
		r.fail("op %d, naming %d", m.Op, naming)
	case attrs&^(attrMeta|attrPayloads) != 0 || attrs != 0 && m.Op == OpDelete:
		r.fail("attributes %#x on op %d", attrs, m.Op)
	}
	m.IDs = r.u64s(n)
	if naming == 1 {
		m.Keys = r.strs(n)
	}
	if m.Op != OpDelete && r.err == nil {
		if m.Dim <= 0 || n < 0 || n > 0 && m.Dim > len(r.b)/4/n {
			r.fail("%d rows of dimension %d in %d bytes", n, m.Dim, len(r.b))
		} else {
			m.Rows = r.f32s(n * m.Dim)
		}
	}
	if attrs&attrMeta != 0 {
		m.MetaSet, m.Meta = true, r.list(n)
	}
	if attrs&attrPayloads != 0 {
		m.PaySet, m.Payloads = true, r.list(n)
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return m, nil
}

// Request kinds a replica answers.
const (
	KindSearch = 1 // top k of each query
	KindRange  = 2 // every row within a threshold, up to maxHits
	KindAwait  = 3 // wait until applied, then report the outcomes of seqs
	KindLookup = 4 // the IDs of the keys the shard holds
	KindRows   = 5 // how many rows the shard holds
	KindGet    = 6 // stored rows, in ID order, with what the caller asks of each
	KindCount  = 7 // how many rows a where filter matches
)

// What a get asks of each row besides its ID and key (request.include).
const (
	IncludeVector  = 1
	IncludeMeta    = 2
	IncludePayload = 4
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
type Request struct {
	Kind      byte
	MinSeq    uint64
	WaitMs    uint32
	K         int
	Threshold float32
	MaxHits   int
	Allow     []uint64 // nil: no filter
	Dim       int
	Queries   []float32 // nq × dim
	Seqs      []uint64
	Keys      []string // kind lookup
	Where     []byte   // nil: no filter
	Payload   bool
	// kind get: rows from ID from on, at most limit of them, among ids or
	// keys when non-nil, with what include asks.
	From    uint64
	Limit   int
	Include byte
	IDs     []uint64
}

const NoFilter = 0xFFFFFFFF

func (q *Request) Encode() []byte {
	size := 48 + 8*len(q.Allow) + 4*len(q.Queries) + 8*len(q.Seqs) + len(q.Where)
	for _, k := range q.Keys {
		size += 4 + len(k)
	}
	b := NewFrame(size)
	b = append(b, q.Kind)
	b = binary.LittleEndian.AppendUint64(b, q.MinSeq)
	b = binary.LittleEndian.AppendUint32(b, q.WaitMs)
	switch q.Kind {
	case KindAwait:
		b = binary.LittleEndian.AppendUint32(b, uint32(len(q.Seqs)))
		for _, s := range q.Seqs {
			b = binary.LittleEndian.AppendUint64(b, s)
		}
		return SealFrame(b)
	case KindRows:
		return SealFrame(b)
	case KindLookup:
		b = binary.LittleEndian.AppendUint32(b, uint32(len(q.Keys)))
		for _, k := range q.Keys {
			b = appendStr(b, k)
		}
		return SealFrame(b)
	case KindGet:
		b = binary.LittleEndian.AppendUint64(b, q.From)
		b = binary.LittleEndian.AppendUint32(b, uint32(q.Limit))
		b = append(b, q.Include)
		if q.IDs == nil {
			b = binary.LittleEndian.AppendUint32(b, NoFilter)
		} else {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(q.IDs)))
			for _, id := range q.IDs {
				b = binary.LittleEndian.AppendUint64(b, id)
			}
		}
		if q.Keys == nil {
			b = binary.LittleEndian.AppendUint32(b, NoFilter)
		} else {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(q.Keys)))
			for _, k := range q.Keys {
				b = appendStr(b, k)
			}
		}
		return SealFrame(appendWhere(b, q.Where))
	case KindCount:
		return SealFrame(appendWhere(b, q.Where))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(q.K))
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(q.Threshold))
	b = binary.LittleEndian.AppendUint32(b, uint32(q.MaxHits))
	if q.Allow == nil {
		b = binary.LittleEndian.AppendUint32(b, NoFilter)
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(q.Allow)))
		for _, id := range q.Allow {
			b = binary.LittleEndian.AppendUint64(b, id)
		}
	}
	nq := 0
	if q.Dim > 0 {
		nq = len(q.Queries) / q.Dim
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(nq))
	b = binary.LittleEndian.AppendUint32(b, uint32(q.Dim))
	for _, v := range q.Queries {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	b = appendWhere(b, q.Where)
	b = append(b, byte(btoi(q.Payload)))
	return SealFrame(b)
}

// appendWhere appends a request's where filter: its length and bytes, or
// noFilter.
func appendWhere(b, where []byte) []byte {
	if where == nil {
		return binary.LittleEndian.AppendUint32(b, NoFilter)
	}
	return appendBytes(b, where)
}

// where reads a request's where filter (nil: none).
func (r *reader) where() []byte {
	n := r.u32()
	if n == NoFilter {
		return nil
	}
	w := r.take(int(n))
	if w == nil && r.err == nil {
		w = []byte{}
	}
	return w
}

// decodeRequest reads a request; its errors are decodeWrite's.
func DecodeRequest(b []byte) (*Request, error) {
	body, err := OpenFrame(b)
	if err != nil {
		return nil, err
	}
	r := &reader{b: body}
	q := &Request{Kind: r.u8(), MinSeq: r.u64(), WaitMs: r.u32()}
	switch {
	case r.err != nil:
	case q.Kind == KindAwait:
		q.Seqs = r.u64s(int(r.u32()))
	case q.Kind == KindRows:
	case q.Kind == KindLookup:
		q.Keys = r.strs(int(r.u32()))
	case q.Kind == KindGet:
		q.From = r.u64()
		q.Limit = int(r.u32())
		q.Include = r.u8()
		if q.Include&^(IncludeVector|IncludeMeta|IncludePayload) != 0 && r.err == nil {
			r.fail("include %#x", q.Include)
		}
		if n := r.u32(); n != NoFilter {
			if q.IDs = r.u64s(int(n)); q.IDs == nil && r.err == nil {
				q.IDs = []uint64{}
			}
		}
		if n := r.u32(); n != NoFilter {
			if q.Keys = r.strs(int(n)); q.Keys == nil && r.err == nil {
				q.Keys = []string{}
			}
		}
		q.Where = r.where()
	case q.Kind == KindCount:
		q.Where = r.where()
	case q.Kind == KindSearch || q.Kind == KindRange:
		q.K = int(r.u32())
		q.Threshold = math.Float32frombits(r.u32())
		q.MaxHits = int(r.u32())
		if n := r.u32(); n != NoFilter {
			q.Allow = r.u64s(int(n))
			if q.Allow == nil && r.err == nil {
				q.Allow = []uint64{}
			}
		}
		nq := int(r.u32())
		q.Dim = int(r.u32())
		if r.err == nil && (q.Dim <= 0 || nq < 0 || nq > len(r.b)/4/q.Dim) {
			r.fail("%d queries of dimension %d in %d bytes", nq, q.Dim, len(r.b))
		}
		q.Queries = r.f32s(nq * q.Dim)
		q.Where = r.where()
		switch p := r.u8(); {
		case r.err != nil:
		case p > 1:
			r.fail("withPayload %d", p)
		default:
			q.Payload = p == 1
		}
	default:
		r.fail("request kind %d", q.Kind)
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return q, nil
}

// Reply statuses.
const (
	StatusOK      = 0
	StatusBehind  = 1 // not applied up to minSeq within waitMillis: ask another replica
	StatusError   = 2 // the replica cannot answer (message says why)
	StatusStopped = 3 // the replica stopped at a message it cannot apply (message names it and the way out)
)

// hit is one result on the wire.
type Hit struct {
	ID      uint64
	Score   float32
	Key     string
	Payload string
}

// outcome is how a replica applied one write message: every replica
// applies the same messages in the same order to the same state, so every
// one reaches the same outcome.
type Outcome struct {
	Code byte   // outcome code (codeOK, codeIDExists, …)
	Msg  string // the error, in words
	IDs  []uint64
}

// reply is a replica's answer. Its body:
//
//	u8 status, u64 applied, str message,
//	status OK, kind rows or count: u64 rows;
//	status OK, kind get: u8 include, u8 cut (1: the replica stopped short
//	  of limit to bound the answer's bytes: more rows may follow the
//	  last), u32 dim, u32 n, per row u64 ID, str key, include vector:
//	  dim × f32, include meta: str metaindex.AppendBinary, include payload:
//	  str payload;
//	status OK, kind await: u32 n, per sequence u8 code, str message,
//	  u32 m + m × u64 IDs;
//	status OK, kind search/range/lookup: u8 withPayload, u32 nq, per query
//	  u32 n + n × (u64 ID, f32 score, str key, withPayload 1: str payload).
type Reply struct {
	Status   byte
	Applied  uint64
	Msg      string
	Hits     [][]Hit
	Outcomes []Outcome
	Rows     uint64 // kind rows, count
	Payloads bool   // every hit carries its payload
	// kind get: the rows, what each carries (the request's include), the
	// dimension of their vectors, and whether the replica cut the answer
	// short.
	Recs    []Row
	Include byte
	Dim     int
	Cut     bool
}

// record is one row of a get's answer.
type Row struct {
	ID      uint64
	Key     string
	Vector  []float32
	Meta    []byte // metaindex.AppendBinary of the row's fields
	Payload []byte
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

func (p *Reply) Encode(kind byte) []byte {
	b := NewFrame(64 + len(p.Msg))
	b = append(b, p.Status)
	b = binary.LittleEndian.AppendUint64(b, p.Applied)
	b = appendStr(b, p.Msg)
	if p.Status != StatusOK {
		return SealFrame(b)
	}
	switch kind {
	case KindRows, KindCount:
		b = binary.LittleEndian.AppendUint64(b, p.Rows)
	case KindGet:
		b = append(b, p.Include, byte(btoi(p.Cut)))
		b = binary.LittleEndian.AppendUint32(b, uint32(p.Dim))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Recs)))
		for _, rec := range p.Recs {
			b = binary.LittleEndian.AppendUint64(b, rec.ID)
			b = appendStr(b, rec.Key)
			if p.Include&IncludeVector != 0 {
				for _, v := range rec.Vector {
					b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
				}
			}
			if p.Include&IncludeMeta != 0 {
				b = appendBytes(b, rec.Meta)
			}
			if p.Include&IncludePayload != 0 {
				b = appendBytes(b, rec.Payload)
			}
		}
	case KindAwait:
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Outcomes)))
		for _, o := range p.Outcomes {
			b = append(b, o.Code)
			b = appendStr(b, o.Msg)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(o.IDs)))
			for _, id := range o.IDs {
				b = binary.LittleEndian.AppendUint64(b, id)
			}
		}
	default:
		b = append(b, byte(btoi(p.Payloads)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Hits)))
		for _, hs := range p.Hits {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(hs)))
			for _, h := range hs {
				b = binary.LittleEndian.AppendUint64(b, h.ID)
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(h.Score))
				b = appendStr(b, h.Key)
				if p.Payloads {
					b = appendStr(b, h.Payload)
				}
			}
		}
	}
	return SealFrame(b)
}

// decodeReply reads a reply to a request of kind; its errors are
// decodeWrite's.
func DecodeReply(b []byte, kind byte) (*Reply, error) {
	body, err := OpenFrame(b)
	if err != nil {
		return nil, err
	}
	r := &reader{b: body}
	p := &Reply{Status: r.u8(), Applied: r.u64(), Msg: r.str()}
	switch {
	case r.err != nil:
	case p.Status > StatusStopped:
		r.fail("reply status %d", p.Status)
	case p.Status != StatusOK:
	case kind == KindRows || kind == KindCount:
		p.Rows = r.u64()
	case kind == KindGet:
		p.Include = r.u8()
		switch c := r.u8(); {
		case r.err != nil:
		case c > 1 || p.Include&^(IncludeVector|IncludeMeta|IncludePayload) != 0:
			r.fail("get reply: include %#x, cut %d", p.Include, c)
		default:
			p.Cut = c == 1
		}
		p.Dim = int(r.u32())
		per := minRecord + 4*btoi(p.Include&IncludeMeta != 0) + 4*btoi(p.Include&IncludePayload != 0)
		if p.Include&IncludeVector != 0 && r.err == nil {
			if p.Dim <= 0 || p.Dim > umbra.MaxDim {
				r.fail("get reply: vectors of dimension %d", p.Dim)
			}
			per += 4 * p.Dim
		}
		n := r.count(per, "rows")
		p.Recs = make([]Row, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			rec := Row{ID: r.u64(), Key: r.str()}
			if p.Include&IncludeVector != 0 {
				rec.Vector = r.f32s(p.Dim)
			}
			if p.Include&IncludeMeta != 0 {
				rec.Meta = r.bytes()
			}
			if p.Include&IncludePayload != 0 {
				rec.Payload = r.bytes()
			}
			p.Recs = append(p.Recs, rec)
		}
	case kind == KindAwait:
		n := r.count(minOutcome, "outcomes")
		p.Outcomes = make([]Outcome, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			o := Outcome{Code: r.u8(), Msg: r.str()}
			o.IDs = r.u64s(int(r.u32()))
			p.Outcomes = append(p.Outcomes, o)
		}
	default:
		switch w := r.u8(); {
		case r.err != nil:
		case w > 1:
			r.fail("withPayload %d", w)
		default:
			p.Payloads = w == 1
		}
		n := r.count(minHits, "hit lists")
		p.Hits = make([][]Hit, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			m := r.count(minHit+4*btoi(p.Payloads), "hits")
			hs := make([]Hit, m)
			for j := 0; j < m && r.err == nil; j++ {
				hs[j] = Hit{ID: r.u64(), Score: math.Float32frombits(r.u32()), Key: r.str()}
				if p.Payloads {
					hs[j].Payload = r.str()
				}
			}
			p.Hits = append(p.Hits, hs)
		}
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return p, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Frame makes a frame of version v around body, its checksum right (for
// tests of what a reader does with other versions).
func Frame(v byte, body []byte) []byte {
	b := append([]byte{v, 0, 0, 0, 0}, body...)
	return SealFrame(b)
}
