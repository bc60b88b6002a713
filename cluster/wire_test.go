package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// frame makes a frame of version v around body, its checksum right.
func frame(v byte, body []byte) []byte {
	b := append([]byte{v, 0, 0, 0, 0}, body...)
	return sealFrame(b)
}

// wireSamples are one message of every kind this build writes, with the
// request kind each reply answers (0 for a write).
func wireSamples() []struct {
	name string
	kind byte // 0: a write; else a request (reply false) or a reply to this kind
	rep  bool
	b    []byte
} {
	w := &writeMsg{op: opUpsert, dim: 2, ids: []uint64{1, 2}, keys: []string{"a", "b"}, rows: []float32{1, 2, 3, 4},
		metaSet: true, meta: [][]byte{meta.AppendBinary(nil, meta.Fields{"x": meta.IntOf(3)}), nil},
		paySet: true, payloads: [][]byte{nil, []byte("hello")}}
	type s = struct {
		name string
		kind byte
		rep  bool
		b    []byte
	}
	return []s{
		{"write", 0, false, w.encode()},
		{"write by IDs", 0, false, (&writeMsg{op: opAdd, dim: 3, ids: []uint64{9}, rows: []float32{1, 2, 3}}).encode()},
		{"delete by keys", 0, false, (&writeMsg{op: opDelete, ids: []uint64{0, 0}, keys: []string{"k1", "k2"}}).encode()},
		{"search", kindSearch, false, (&request{kind: kindSearch, minSeq: 5, waitMs: 500, k: 3, dim: 2, queries: []float32{1, 2}, allow: []uint64{4, 8},
			where: meta.Eq("x", meta.IntOf(1)).AppendJSON(nil), payload: true}).encode()},
		{"range", kindRange, false, (&request{kind: kindRange, threshold: 0.5, maxHits: 7, dim: 1, queries: []float32{3}}).encode()},
		{"await", kindAwait, false, (&request{kind: kindAwait, minSeq: 9, waitMs: 1000, seqs: []uint64{8, 9}}).encode()},
		{"lookup", kindLookup, false, (&request{kind: kindLookup, minSeq: 7, waitMs: 500, keys: []string{"doc/1", "ü"}}).encode()},
		{"rows", kindRows, false, (&request{kind: kindRows, minSeq: 3}).encode()},
		{"get", kindGet, false, (&request{kind: kindGet, minSeq: 3, waitMs: 500, from: 9, limit: 1024, include: includeVector | includePayload,
			where: meta.Eq("x", meta.IntOf(1)).AppendJSON(nil)}).encode()},
		{"get by IDs", kindGet, false, (&request{kind: kindGet, include: includeMeta, ids: []uint64{4, 1 << 40}}).encode()},
		{"get by keys", kindGet, false, (&request{kind: kindGet, keys: []string{"a", ""}, ids: nil}).encode()},
		{"count", kindCount, false, (&request{kind: kindCount, minSeq: 2, waitMs: 500, where: []byte(`{"x": 1}`)}).encode()},
		{"count all", kindCount, false, (&request{kind: kindCount}).encode()},
		{"search reply", kindSearch, true, (&reply{applied: 4, hits: [][]hit{{{ID: 1, Score: 0.5, Key: "k", Payload: "p\x00q"}, {ID: 2, Score: 0.25}}, {}}, payloads: true}).encode(kindSearch)},
		{"lookup reply", kindLookup, true, (&reply{applied: 4, hits: [][]hit{{{ID: 1, Key: "k"}}}}).encode(kindLookup)},
		{"await reply", kindAwait, true, (&reply{applied: 9, outcomes: []outcome{{ids: []uint64{1, 2}}, {code: codeIDExists, msg: "ID 3"}}}).encode(kindAwait)},
		{"rows reply", kindRows, true, (&reply{applied: 9, rows: 1 << 40}).encode(kindRows)},
		{"count reply", kindCount, true, (&reply{applied: 9, rows: 12}).encode(kindCount)},
		{"get reply", kindGet, true, (&reply{applied: 5, include: includeVector | includeMeta | includePayload, dim: 2, cut: true, recs: []record{
			{id: 1, key: "k", vec: []float32{1, 2}, meta: meta.AppendBinary(nil, meta.Fields{"x": meta.IntOf(3)}), payload: []byte("p")},
			{id: 7, vec: []float32{3, 4}}}}).encode(kindGet)},
		{"get reply of IDs", kindGet, true, (&reply{applied: 5, recs: []record{{id: 3, key: "a"}, {id: 4}}}).encode(kindGet)},
		{"error reply", kindSearch, true, (&reply{status: statusStopped, applied: 2, msg: "stopped"}).encode(kindSearch)},
	}
}

// decodeAs decodes b as a sample of its kind and encodes it again.
func decodeAs(kind byte, rep bool, b []byte) ([]byte, error) {
	switch {
	case kind == 0:
		m, err := decodeWrite(b)
		if err != nil {
			return nil, err
		}
		return m.encode(), nil
	case rep:
		p, err := decodeReply(b, kind)
		if err != nil {
			return nil, err
		}
		return p.encode(kind), nil
	default:
		q, err := decodeRequest(b)
		if err != nil {
			return nil, err
		}
		return q.encode(), nil
	}
}

// Every message is a version-3 frame with its checksum: each decodes and
// encodes back to the same bytes; every truncation, extension and
// single-bit flip is refused as unreadable before anything else is read;
// a frame that verifies with a newer version is a versionError, one with
// an older version (the unframed formats) unreadable.
func TestWireFrame(t *testing.T) {
	r := testkit.Rand(t)
	for _, s := range wireSamples() {
		t.Run(s.name, func(t *testing.T) {
			if s.b[0] != wireVersion {
				t.Fatalf("version %d", s.b[0])
			}
			again, err := decodeAs(s.kind, s.rep, s.b)
			if err != nil || !bytes.Equal(again, s.b) {
				t.Fatalf("round trip: %v\n got %x\nwant %x", err, again, s.b)
			}
			refused := func(what string, b []byte) {
				t.Helper()
				_, err := decodeAs(s.kind, s.rep, b)
				var ve *versionError
				if !errors.Is(err, errWire) || errors.As(err, &ve) {
					t.Fatalf("%s: %v, want errWire", what, err)
				}
			}
			for cut := range len(s.b) {
				refused(fmt.Sprintf("cut at %d of %d", cut, len(s.b)), s.b[:cut])
			}
			for _, extra := range [][]byte{{0}, {1, 2, 3, 4}, bytes.Repeat([]byte{0xAB}, 100)} {
				refused(fmt.Sprintf("%d bytes added", len(extra)), append(bytes.Clone(s.b), extra...))
			}
			for bit := range 8 * len(s.b) {
				b := bytes.Clone(s.b)
				b[bit/8] ^= 1 << (bit % 8)
				refused(fmt.Sprintf("bit %d flipped", bit), b)
			}
			body := s.b[frameHeader:]
			_, err = decodeAs(s.kind, s.rep, frame(wireVersion+1, body))
			var ve *versionError
			if !errors.As(err, &ve) || ve.version != wireVersion+1 || !strings.Contains(err.Error(), "newer umbra") {
				t.Fatalf("a newer version: %v", err)
			}
			for v := range byte(wireVersion) {
				refused(fmt.Sprintf("version %d framed", v), frame(v, body))
			}
			// A body with one more byte, checksummed: verified, then
			// refused by its decoder.
			refused("a byte past the end", frame(wireVersion, append(bytes.Clone(body), byte(r.IntN(256)))))
		})
	}
	for _, b := range [][]byte{nil, {9}, {9, 1, 2, 3}} {
		if _, err := decodeWrite(b); !errors.Is(err, errWire) || !strings.Contains(err.Error(), "too short to carry a checksum") {
			t.Fatalf("% x: %v", b, err)
		}
	}
	// Bodies that verify and do not decode: each names what is wrong.
	w := (&writeMsg{op: opAdd, dim: 2, ids: []uint64{1}, rows: []float32{1, 0}}).encode()
	for _, c := range []struct {
		name, want string
		edit       func(body []byte)
	}{
		{"op 9", "op 9", func(b []byte) { b[0] = 9 }},
		{"naming 2", "naming 2", func(b []byte) { b[1] = 2 }},
		{"attrs 4", "attributes 0x4", func(b []byte) { b[2] = 4 }},
		{"n huge", "IDs wanted", func(b []byte) { binary.LittleEndian.PutUint32(b[3:], 1<<31) }},
		{"dim 0", "dimension 0", func(b []byte) { binary.LittleEndian.PutUint32(b[7:], 0) }},
	} {
		body := bytes.Clone(w[frameHeader:])
		c.edit(body)
		if _, err := decodeWrite(frame(wireVersion, body)); !errors.Is(err, errWire) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	d := (&writeMsg{op: opDelete, ids: []uint64{1}}).encode()
	body := bytes.Clone(d[frameHeader:])
	body[2] = attrMeta
	if _, err := decodeWrite(frame(wireVersion, append(body, 0, 0, 0, 0))); !errors.Is(err, errWire) || !strings.Contains(err.Error(), "attributes") {
		t.Fatalf("a delete with metadata: %v", err)
	}
	// A replica reads a write for its collection's dimension, and its
	// metadata as a canonical encoding.
	if _, _, err := readWrite(w, 3); !errors.Is(err, errWire) || !strings.Contains(err.Error(), "dimension 2 for a collection of dimension 3") {
		t.Fatalf("another dimension: %v", err)
	}
	for _, op := range []byte{opAdd, opUpsert, opDelete} {
		m := &writeMsg{op: op, dim: 2, ids: []uint64{5, ReservedIDs + 9}}
		if op != opDelete {
			m.rows = []float32{1, 0, 0, 1}
		}
		if _, _, err := readWrite(m.encode(), 2); !errors.Is(err, errWire) || !strings.Contains(err.Error(), "one of the cluster's own") {
			t.Fatalf("op %d naming a reserved ID: %v", op, err)
		}
	}
	bad := (&writeMsg{op: opAdd, dim: 2, ids: []uint64{7}, rows: []float32{1, 0}, metaSet: true, meta: [][]byte{{0x01, 0x01, 'a', 0x09}}}).encode()
	if _, _, err := readWrite(bad, 2); !errors.Is(err, errWire) || !strings.Contains(err.Error(), "metadata of row 0") {
		t.Fatalf("bad metadata: %v", err)
	}
}

// A filter is localized to a shard's fields: one the shard does not know
// matches none (or all, negated).
func TestLocalFilter(t *testing.T) {
	known := map[string]meta.Kind{"a": meta.Int}
	for _, c := range []struct {
		f    meta.Filter
		want string
	}{
		{meta.Eq("a", meta.IntOf(1)), `a == 1`},
		{meta.Eq("b", meta.IntOf(1)), `none`},
		{meta.And(meta.Eq("a", meta.IntOf(1)), meta.Ne("b", meta.IntOf(1)), meta.Nin("b"), meta.NotContains("b", "t")), `(a == 1 AND all AND all AND all)`},
		{meta.Or(meta.In("b", meta.IntOf(1)), meta.Not(meta.Contains("b", "t"))), `(none OR NOT none)`},
	} {
		f, err := localFilter(c.f.AppendJSON(nil), known)
		if err != nil {
			t.Fatal(err)
		}
		if f.String() != c.want {
			t.Fatalf("%v on a shard knowing only a: %v, want %s", c.f, f, c.want)
		}
	}
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// allocBound is what a decoder may allocate for a message of n bytes.
func allocBound(n int) uint64 { return uint64(8*n + 64<<10) }

// decoders are every decoder, by name.
var decoders = []struct {
	name string
	f    func([]byte)
}{
	{"write", func(b []byte) { decodeWrite(b) }},
	{"request", func(b []byte) { decodeRequest(b) }},
	{"search reply", func(b []byte) { decodeReply(b, kindSearch) }},
	{"range reply", func(b []byte) { decodeReply(b, kindRange) }},
	{"await reply", func(b []byte) { decodeReply(b, kindAwait) }},
	{"lookup reply", func(b []byte) { decodeReply(b, kindLookup) }},
	{"rows reply", func(b []byte) { decodeReply(b, kindRows) }},
	{"get reply", func(b []byte) { decodeReply(b, kindGet) }},
	{"count reply", func(b []byte) { decodeReply(b, kindCount) }},
}

// checkAllocs fails t when a decoder allocates more than allocBound on b.
func checkAllocs(t *testing.T, what string, b []byte) {
	t.Helper()
	for _, d := range decoders {
		if got := allocated(func() { d.f(b) }); got > allocBound(len(b)) {
			t.Errorf("%s (%d bytes): the %s decoder allocated %d bytes, over %d", what, len(b), d.name, got, allocBound(len(b)))
		}
	}
}

// The decoders allocate at most a small multiple of a message's length
// whatever its counts claim: messages of 1 MiB packed with the smallest
// entries each kind has (empty keys, empty hit lists, empty outcomes,
// empty metadata), and others claiming 2³²−1 entries.
func TestWireAllocationBounded(t *testing.T) {
	const n = 1 << 20
	u32 := func(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
	zeros := make([]byte, n)
	var bodies [][]byte
	// A lookup of n/4 empty keys.
	b := append([]byte{kindLookup}, make([]byte, 12)...)
	bodies = append(bodies, append(u32(b, n/4), zeros[:n]...))
	// A search reply of n/4 empty hit lists, and one of n/4 empty
	// outcomes' worth.
	b = append([]byte{statusOK}, make([]byte, 12)...)
	bodies = append(bodies, append(u32(append(bytes.Clone(b), 0), n/4), zeros[:n]...))
	bodies = append(bodies, append(u32(bytes.Clone(b), n/9), zeros[:n]...))
	// A delete by keys of n/12 rows with empty keys, and an add with
	// metadata and payloads of n/16 rows of dimension 1.
	w := u32(u32([]byte{opDelete, 1, 0}, n/12), 1)
	bodies = append(bodies, append(w, zeros[:n]...))
	w = u32(u32([]byte{opAdd, 0, attrMeta | attrPayloads}, n/20), 1)
	bodies = append(bodies, append(w, zeros[:n]...))
	// A get reply of n/12 rows with empty keys, and one of n/16 rows
	// with empty metadata and payloads.
	g := append([]byte{statusOK}, make([]byte, 12)...)
	bodies = append(bodies, append(u32(u32(append(bytes.Clone(g), 0, 0), 0), n/12), zeros[:n]...))
	bodies = append(bodies, append(u32(u32(append(bytes.Clone(g), includeMeta|includePayload, 0), 0), n/20), zeros[:n]...))
	// Counts of 2³²−1.
	for _, head := range [][]byte{
		u32(append([]byte{kindLookup}, make([]byte, 12)...), ^uint32(0)),
		u32(append([]byte{kindAwait}, make([]byte, 12)...), ^uint32(0)),
		u32(append([]byte{statusOK}, make([]byte, 12)...), ^uint32(0)),
		u32(append([]byte{statusOK}, make([]byte, 13)...), ^uint32(0)),
		u32(u32([]byte{opAdd, 1, 3}, ^uint32(0)), ^uint32(0)),
	} {
		bodies = append(bodies, append(head, zeros[:n]...))
	}
	for i, body := range bodies {
		checkAllocs(t, fmt.Sprintf("message %d", i), frame(wireVersion, body))
	}
}

// FuzzDecodeFrame: no input panics any decoder or makes it allocate more
// than allocBound; what decodes encodes back to the same bytes. Each input
// is tried as it is (mostly refused by its checksum) and framed with its
// checksum right (its first byte the version, the rest the body), so that
// the bodies' decoders are reached.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range wireSamples() {
		f.Add(s.b)
		f.Add(append([]byte{s.b[0]}, s.b[frameHeader:]...))
	}
	f.Add([]byte{9, 1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		inputs := [][]byte{data}
		if len(data) > 0 {
			inputs = append(inputs, frame(data[0], data[1:]))
		}
		for _, b := range inputs {
			// All decoders at once (reading the memory statistics stops
			// the world: once an input keeps the fuzzing fast).
			if got := allocated(func() {
				for _, d := range decoders {
					d.f(b)
				}
			}); got > uint64(len(decoders))*allocBound(len(b)) {
				t.Fatalf("%d bytes: the decoders allocated %d", len(b), got)
			}
			if m, err := decodeWrite(b); err == nil && !bytes.Equal(m.encode(), b) {
				t.Fatalf("write %+v encodes to %x, decoded from %x", m, m.encode(), b)
			}
			if q, err := decodeRequest(b); err == nil && !bytes.Equal(q.encode(), b) {
				t.Fatalf("request %+v encodes to %x, decoded from %x", q, q.encode(), b)
			}
			for _, k := range []byte{kindSearch, kindRange, kindAwait, kindLookup, kindRows, kindGet, kindCount} {
				if p, err := decodeReply(b, k); err == nil && !bytes.Equal(p.encode(k), b) {
					t.Fatalf("reply to kind %d %+v encodes to %x, decoded from %x", k, p, p.encode(k), b)
				}
			}
			_, err := decodeWrite(b)
			var ve *versionError
			if err != nil && !errors.Is(err, errWire) && !errors.As(err, &ve) {
				t.Fatalf("an error of another kind: %v", err)
			}
		}
	})
}

// The frame's cost: sealing and checking a write message of about 1 MiB
// (2,048 rows of dimension 128), the checksum alone and the whole decode.
func BenchmarkFrame(b *testing.B) {
	const n, dim = 2048, 128
	m := &writeMsg{op: opAdd, dim: dim, ids: make([]uint64, n), rows: make([]float32, n*dim)}
	msg := m.encode()
	b.Run("checksum", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			frameSum(msg)
		}
	})
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			m.encode()
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if _, err := decodeWrite(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
