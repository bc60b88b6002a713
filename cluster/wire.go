package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The wire formats. Every message starts with a version byte; a reader
// refuses a version it does not know rather than guess (a replica stops
// applying its shard instead of skipping a write it cannot read, which
// would make it diverge). Version 1 carries vectors named by IDs or keys;
// version 2 adds fields (per-row metadata and payloads on writes, a where
// filter and the payload request on searches, payloads on hits) after the
// version-1 ones, so version 1's layout stays a prefix. A writer uses
// version 1 whenever the message has none of them, so a build that reads
// only version 1 keeps reading the writes and searches that do not use
// metadata.
//
// All integers are little-endian; float32 is IEEE 754 bits.

const (
	wireVersion1 = 1
	wireVersion  = 2 // the newest this build reads and writes
)

// errWire is a message that cannot be decoded.
var errWire = errors.New("malformed cluster message")

// Write operations, as logged in a shard's stream.
const (
	opAdd    = 1
	opUpsert = 2
	opDelete = 3
)

// writeMsg is one shard's part of a write: the rows of the call that hash
// to this shard, whole or as one of several pieces under the payload limit.
//
//	u8 version, u8 op, u8 naming (0 IDs, 1 keys), u32 n, u32 dim,
//	n × u64 IDs (naming IDs: the rows' IDs; naming keys: the IDs a new key
//	  gets, chosen by the client so that every replica assigns the same),
//	naming keys: n × (u32 length, bytes) keys,
//	op add/upsert: n × dim float32 rows,
//	version 2 only: u8 attrs (bit 0: metadata given, bit 1: payloads
//	  given), bit 0: n × (u32 length, meta.AppendBinary of the row's
//	  fields; length 0: none), bit 1: n × (u32 length, payload bytes;
//	  length 0: none).
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

func (m *writeMsg) n() int { return len(m.ids) }

func (m *writeMsg) version() byte {
	if m.metaSet || m.paySet {
		return wireVersion
	}
	return wireVersion1
}

// size is the encoded length in bytes.
func (m *writeMsg) size() int {
	s := 11 + 8*len(m.ids) + 4*len(m.rows)
	for _, k := range m.keys {
		s += 4 + len(k)
	}
	if m.metaSet || m.paySet {
		s++
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
	b := make([]byte, 0, m.size())
	naming := byte(0)
	if m.keys != nil {
		naming = 1
	}
	b = append(b, m.version(), m.op, naming)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.ids)))
	b = binary.LittleEndian.AppendUint32(b, uint32(m.dim))
	for _, id := range m.ids {
		b = binary.LittleEndian.AppendUint64(b, id)
	}
	for _, k := range m.keys {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
	}
	for _, v := range m.rows {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	if m.version() == wireVersion1 {
		return b
	}
	attrs := byte(0)
	if m.metaSet {
		attrs |= attrMeta
	}
	if m.paySet {
		attrs |= attrPayloads
	}
	b = append(b, attrs)
	for _, x := range m.meta {
		b = appendBytes(b, x)
	}
	for _, x := range m.payloads {
		b = appendBytes(b, x)
	}
	return b
}

func appendBytes(b, x []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
	return append(b, x...)
}

// reader walks a message, remembering the first failure.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("%w: %d bytes wanted, %d left", errWire, n, len(r.b))
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

// list reads n length-prefixed byte strings.
func (r *reader) list(n int) [][]byte {
	if r.err == nil && n > len(r.b)/4 {
		r.err = fmt.Errorf("%w: %d entries wanted, %d bytes left", errWire, n, len(r.b))
	}
	out := make([][]byte, 0, max(n, 0))
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, r.bytes())
	}
	return out
}

func (r *reader) f32s(n int) []float32 {
	if r.err == nil && (n < 0 || n > len(r.b)/4) {
		r.err = fmt.Errorf("%w: %d floats wanted, %d bytes left", errWire, n, len(r.b))
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
		r.err = fmt.Errorf("%w: %d IDs wanted, %d bytes left", errWire, n, len(r.b))
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

// version reads the version byte: 1 or 2, or an error naming it.
func (r *reader) version() byte {
	v := r.u8()
	if r.err == nil && (v < wireVersion1 || v > wireVersion) {
		r.err = fmt.Errorf("%w: version %d, this build reads versions 1 to %d (upgrade umbra)", errWire, v, wireVersion)
	}
	return v
}

func decodeWrite(b []byte) (*writeMsg, error) {
	r := &reader{b: b}
	v := r.version()
	m := &writeMsg{op: r.u8()}
	naming := r.u8()
	n := int(r.u32())
	m.dim = int(r.u32())
	if r.err == nil && (m.op < opAdd || m.op > opDelete || naming > 1) {
		r.err = fmt.Errorf("%w: op %d, naming %d", errWire, m.op, naming)
	}
	m.ids = r.u64s(n)
	if naming == 1 && r.err == nil {
		m.keys = make([]string, n)
		for i := range m.keys {
			m.keys[i] = r.str()
		}
	}
	if m.op != opDelete && r.err == nil {
		if m.dim <= 0 || n > 0 && m.dim > len(r.b)/4/n {
			r.err = fmt.Errorf("%w: %d rows of dimension %d in %d bytes", errWire, n, m.dim, len(r.b))
		} else {
			m.rows = r.f32s(n * m.dim)
		}
	}
	if v == wireVersion && r.err == nil {
		attrs := r.u8()
		switch {
		case r.err != nil:
		case attrs == 0 || attrs&^(attrMeta|attrPayloads) != 0 || m.op == opDelete:
			r.err = fmt.Errorf("%w: attributes %#x on op %d", errWire, attrs, m.op)
		default:
			if attrs&attrMeta != 0 {
				m.metaSet, m.meta = true, r.list(n)
			}
			if attrs&attrPayloads != 0 {
				m.paySet, m.payloads = true, r.list(n)
			}
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d bytes past the end", errWire, len(r.b))
	}
	return m, r.err
}

// Request kinds a replica answers.
const (
	kindSearch = 1 // top k of each query
	kindRange  = 2 // every row within a threshold, up to maxHits
	kindAwait  = 3 // wait until applied, then report the outcomes of seqs
	kindLookup = 4 // the IDs of the keys the shard holds
	kindRows   = 5 // how many rows the shard holds
)

// request is one fan-out call to a shard.
//
//	u8 version, u8 kind, u64 minSeq (the caller's token for this shard:
//	answer only once applied this far), u32 waitMillis (how long the
//	replica may wait to catch up before it says it is behind),
//	kind search/range: u32 k, f32 threshold, u32 maxHits (0: none),
//	  u32 allowCount (0xFFFFFFFF: no filter) + IDs, u32 nq, u32 dim, rows;
//	kind await: u32 n + n × u64 sequences;
//	kind lookup: u32 n + n × (u32 length, key bytes); its reply is a
//	  search's with one query, a hit (ID, score 0, key) per key held;
//	kind rows: nothing more;
//	version 2 only (search/range): u32 whereLength (0xFFFFFFFF: no filter)
//	  + the filter in the where syntax (meta.Filter.AppendJSON), u8
//	  withPayload (1: hits carry payloads; the reply is version 2).
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
}

func (q *request) version() byte {
	if q.kind != kindAwait && (q.where != nil || q.payload) {
		return wireVersion
	}
	return wireVersion1
}

const noFilter = 0xFFFFFFFF

func (q *request) encode() []byte {
	b := make([]byte, 0, 48+8*len(q.allow)+4*len(q.queries)+8*len(q.seqs)+len(q.where))
	b = append(b, q.version(), q.kind)
	b = binary.LittleEndian.AppendUint64(b, q.minSeq)
	b = binary.LittleEndian.AppendUint32(b, q.waitMs)
	if q.kind == kindAwait {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(q.seqs)))
		for _, s := range q.seqs {
			b = binary.LittleEndian.AppendUint64(b, s)
		}
		return b
	}
	if q.kind == kindRows {
		return b
	}
	if q.kind == kindLookup {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(q.keys)))
		for _, k := range q.keys {
			b = appendStr(b, k)
		}
		return b
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
	if q.version() == wireVersion1 {
		return b
	}
	if q.where == nil {
		b = binary.LittleEndian.AppendUint32(b, noFilter)
	} else {
		b = appendBytes(b, q.where)
	}
	return append(b, byte(btoi(q.payload)))
}

func decodeRequest(b []byte) (*request, error) {
	r := &reader{b: b}
	v := r.version()
	q := &request{kind: r.u8(), minSeq: r.u64(), waitMs: r.u32()}
	switch {
	case r.err != nil:
	case q.kind == kindAwait:
		q.seqs = r.u64s(int(r.u32()))
	case q.kind == kindRows && v == wireVersion1:
	case q.kind == kindLookup && v == wireVersion1:
		n := int(r.u32())
		if r.err == nil && n > len(r.b)/4 {
			r.err = fmt.Errorf("%w: %d keys in %d bytes", errWire, n, len(r.b))
		}
		for i := 0; i < n && r.err == nil; i++ {
			q.keys = append(q.keys, r.str())
		}
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
		if r.err == nil && (q.dim <= 0 || nq > len(r.b)/4/q.dim) {
			r.err = fmt.Errorf("%w: %d queries of dimension %d in %d bytes", errWire, nq, q.dim, len(r.b))
		}
		q.queries = r.f32s(nq * q.dim)
		if v == wireVersion {
			if n := r.u32(); n != noFilter {
				q.where = r.take(int(n))
				if q.where == nil && r.err == nil {
					q.where = []byte{}
				}
			}
			switch p := r.u8(); {
			case r.err != nil:
			case p > 1:
				r.err = fmt.Errorf("%w: withPayload %d", errWire, p)
			default:
				q.payload = p == 1
			}
			if r.err == nil && q.where == nil && !q.payload {
				r.err = fmt.Errorf("%w: a version 2 request with no version 2 fields", errWire)
			}
		}
	case v == wireVersion:
		r.err = fmt.Errorf("%w: a version 2 request of kind %d", errWire, q.kind)
	default:
		r.err = fmt.Errorf("%w: request kind %d", errWire, q.kind)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d bytes past the end", errWire, len(r.b))
	}
	return q, r.err
}

// Reply statuses.
const (
	statusOK     = 0
	statusBehind = 1 // not applied up to minSeq within waitMillis: ask another replica
	statusError  = 2 // the replica cannot answer (message says why)
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

// reply is a replica's answer.
//
//	u8 version, u8 status, u64 applied, str message,
//	status OK, search/range: u32 nq, per query u32 n + n × (u64 ID,
//	  f32 score, str key; version 2: str payload);
//	status OK, await: u32 n, per sequence u8 code, str message, u32 m +
//	  m × u64 IDs;
//	status OK, rows: u64 rows.
type reply struct {
	status   byte
	applied  uint64
	msg      string
	hits     [][]hit
	outcomes []outcome
	rows     uint64 // kind rows
	payloads bool   // version 2: every hit carries its payload
}

func appendStr(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func (p *reply) encode(kind byte) []byte {
	v := byte(wireVersion1)
	if p.payloads {
		v = wireVersion
	}
	b := []byte{v, p.status}
	b = binary.LittleEndian.AppendUint64(b, p.applied)
	b = appendStr(b, p.msg)
	if p.status != statusOK {
		return b
	}
	if kind == kindRows {
		return binary.LittleEndian.AppendUint64(b, p.rows)
	}
	if kind == kindAwait {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.outcomes)))
		for _, o := range p.outcomes {
			b = append(b, o.code)
			b = appendStr(b, o.msg)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(o.ids)))
			for _, id := range o.ids {
				b = binary.LittleEndian.AppendUint64(b, id)
			}
		}
		return b
	}
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
	return b
}

func decodeReply(b []byte, kind byte) (*reply, error) {
	r := &reader{b: b}
	v := r.version()
	p := &reply{status: r.u8(), applied: r.u64(), msg: r.str(), payloads: v == wireVersion}
	if r.err == nil && p.status == statusOK && kind == kindRows {
		p.rows = r.u64()
	} else if r.err == nil && p.status == statusOK {
		n := int(r.u32())
		if r.err == nil && n > len(r.b) {
			r.err = fmt.Errorf("%w: %d entries in %d bytes", errWire, n, len(r.b))
		}
		if kind == kindAwait {
			for i := 0; i < n && r.err == nil; i++ {
				o := outcome{code: r.u8(), msg: r.str()}
				o.ids = r.u64s(int(r.u32()))
				p.outcomes = append(p.outcomes, o)
			}
		} else {
			for i := 0; i < n && r.err == nil; i++ {
				m := int(r.u32())
				if r.err == nil && m > len(r.b)/16 {
					r.err = fmt.Errorf("%w: %d hits in %d bytes", errWire, m, len(r.b))
					break
				}
				hs := make([]hit, m)
				for j := range hs {
					hs[j] = hit{ID: r.u64(), Score: math.Float32frombits(r.u32()), Key: r.str()}
					if p.payloads {
						hs[j].Payload = r.str()
					}
				}
				p.hits = append(p.hits, hs)
			}
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d bytes past the end", errWire, len(r.b))
	}
	return p, r.err
}
