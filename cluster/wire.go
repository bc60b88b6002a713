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
// a later version adds fields (metadata, payloads, where-filters) after
// the version-1 ones, so version 1's layout stays a prefix.
//
// All integers are little-endian; float32 is IEEE 754 bits.

const wireVersion = 1

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
//	op add/upsert: n × dim float32 rows.
type writeMsg struct {
	op   byte
	keys []string // nil: named by IDs
	ids  []uint64
	dim  int
	rows []float32 // n × dim; nil for a delete
}

func (m *writeMsg) n() int { return len(m.ids) }

// size is the encoded length in bytes.
func (m *writeMsg) size() int {
	s := 11 + 8*len(m.ids) + 4*len(m.rows)
	for _, k := range m.keys {
		s += 4 + len(k)
	}
	return s
}

func (m *writeMsg) encode() []byte {
	b := make([]byte, 0, m.size())
	naming := byte(0)
	if m.keys != nil {
		naming = 1
	}
	b = append(b, wireVersion, m.op, naming)
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
	return b
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

func (r *reader) version() {
	if v := r.u8(); r.err == nil && v != wireVersion {
		r.err = fmt.Errorf("%w: version %d, this build reads version %d (upgrade umbra)", errWire, v, wireVersion)
	}
}

func decodeWrite(b []byte) (*writeMsg, error) {
	r := &reader{b: b}
	r.version()
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
)

// request is one fan-out call to a shard.
//
//	u8 version, u8 kind, u64 minSeq (the caller's token for this shard:
//	answer only once applied this far), u32 waitMillis (how long the
//	replica may wait to catch up before it says it is behind),
//	kind search/range: u32 k, f32 threshold, u32 maxHits (0: none),
//	  u32 allowCount (0xFFFFFFFF: no filter) + IDs, u32 nq, u32 dim, rows;
//	kind await: u32 n + n × u64 sequences.
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
}

const noFilter = 0xFFFFFFFF

func (q *request) encode() []byte {
	b := make([]byte, 0, 40+8*len(q.allow)+4*len(q.queries)+8*len(q.seqs))
	b = append(b, wireVersion, q.kind)
	b = binary.LittleEndian.AppendUint64(b, q.minSeq)
	b = binary.LittleEndian.AppendUint32(b, q.waitMs)
	if q.kind == kindAwait {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(q.seqs)))
		for _, s := range q.seqs {
			b = binary.LittleEndian.AppendUint64(b, s)
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
	return b
}

func decodeRequest(b []byte) (*request, error) {
	r := &reader{b: b}
	r.version()
	q := &request{kind: r.u8(), minSeq: r.u64(), waitMs: r.u32()}
	switch {
	case r.err != nil:
	case q.kind == kindAwait:
		q.seqs = r.u64s(int(r.u32()))
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
	ID    uint64
	Score float32
	Key   string
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
//	  f32 score, str key);
//	status OK, await: u32 n, per sequence u8 code, str message, u32 m +
//	  m × u64 IDs.
type reply struct {
	status   byte
	applied  uint64
	msg      string
	hits     [][]hit
	outcomes []outcome
}

func appendStr(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func (p *reply) encode(kind byte) []byte {
	b := []byte{wireVersion, p.status}
	b = binary.LittleEndian.AppendUint64(b, p.applied)
	b = appendStr(b, p.msg)
	if p.status != statusOK {
		return b
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
		}
	}
	return b
}

func decodeReply(b []byte, kind byte) (*reply, error) {
	r := &reader{b: b}
	r.version()
	p := &reply{status: r.u8(), applied: r.u64(), msg: r.str()}
	if r.err == nil && p.status == statusOK {
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
