package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/umbravec/umbra/internal/metaindex"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// wireSamples are one message of every kind this build writes, with the
// request kind each reply answers (0 for a write).
func wireSamples() []struct {
	name string
	kind byte // 0: a write; else a request (reply false) or a reply to this kind
	rep  bool
	b    []byte
} {
	w := &WriteMsg{Op: OpUpsert, Dim: 2, IDs: []uint64{1, 2}, Keys: []string{"a", "b"}, Rows: []float32{1, 2, 3, 4},
		MetaSet: true, Meta: [][]byte{metaindex.AppendBinary(nil, meta.Fields{"x": meta.IntOf(3)}), nil},
		PaySet: true, Payloads: [][]byte{nil, []byte("hello")}}
	type s = struct {
		name string
		kind byte
		rep  bool
		b    []byte
	}
	return []s{
		{"write", 0, false, w.Encode()},
		{"write by IDs", 0, false, (&WriteMsg{Op: OpAdd, Dim: 3, IDs: []uint64{9}, Rows: []float32{1, 2, 3}}).Encode()},
		{"delete by keys", 0, false, (&WriteMsg{Op: OpDelete, IDs: []uint64{0, 0}, Keys: []string{"k1", "k2"}}).Encode()},
		{"search", KindSearch, false, (&Request{Kind: KindSearch, MinSeq: 5, WaitMs: 500, K: 3, Dim: 2, Queries: []float32{1, 2}, Allow: []uint64{4, 8},
			Where: meta.Eq("x", meta.IntOf(1)).AppendJSON(nil), Payload: true}).Encode()},
		{"range", KindRange, false, (&Request{Kind: KindRange, Threshold: 0.5, MaxHits: 7, Dim: 1, Queries: []float32{3}}).Encode()},
		{"await", KindAwait, false, (&Request{Kind: KindAwait, MinSeq: 9, WaitMs: 1000, Seqs: []uint64{8, 9}}).Encode()},
		{"lookup", KindLookup, false, (&Request{Kind: KindLookup, MinSeq: 7, WaitMs: 500, Keys: []string{"doc/1", "ü"}}).Encode()},
		{"rows", KindRows, false, (&Request{Kind: KindRows, MinSeq: 3}).Encode()},
		{"get", KindGet, false, (&Request{Kind: KindGet, MinSeq: 3, WaitMs: 500, From: 9, Limit: 1024, Include: IncludeVector | IncludePayload,
			Where: meta.Eq("x", meta.IntOf(1)).AppendJSON(nil)}).Encode()},
		{"get by IDs", KindGet, false, (&Request{Kind: KindGet, Include: IncludeMeta, IDs: []uint64{4, 1 << 40}}).Encode()},
		{"get by keys", KindGet, false, (&Request{Kind: KindGet, Keys: []string{"a", ""}, IDs: nil}).Encode()},
		{"count", KindCount, false, (&Request{Kind: KindCount, MinSeq: 2, WaitMs: 500, Where: []byte(`{"x": 1}`)}).Encode()},
		{"count all", KindCount, false, (&Request{Kind: KindCount}).Encode()},
		{"search reply", KindSearch, true, (&Reply{Applied: 4, Hits: [][]Hit{{{ID: 1, Score: 0.5, Key: "k", Payload: "p\x00q"}, {ID: 2, Score: 0.25}}, {}}, Payloads: true}).Encode(KindSearch)},
		{"lookup reply", KindLookup, true, (&Reply{Applied: 4, Hits: [][]Hit{{{ID: 1, Key: "k"}}}}).Encode(KindLookup)},
		{"await reply", KindAwait, true, (&Reply{Applied: 9, Outcomes: []Outcome{{IDs: []uint64{1, 2}}, {Code: CodeIDExists, Msg: "ID 3"}}}).Encode(KindAwait)},
		{"rows reply", KindRows, true, (&Reply{Applied: 9, Rows: 1 << 40}).Encode(KindRows)},
		{"count reply", KindCount, true, (&Reply{Applied: 9, Rows: 12}).Encode(KindCount)},
		{"get reply", KindGet, true, (&Reply{Applied: 5, Include: IncludeVector | IncludeMeta | IncludePayload, Dim: 2, Cut: true, Recs: []Row{
			{ID: 1, Key: "k", Vector: []float32{1, 2}, Meta: metaindex.AppendBinary(nil, meta.Fields{"x": meta.IntOf(3)}), Payload: []byte("p")},
			{ID: 7, Vector: []float32{3, 4}}}}).Encode(KindGet)},
		{"get reply of IDs", KindGet, true, (&Reply{Applied: 5, Recs: []Row{{ID: 3, Key: "a"}, {ID: 4}}}).Encode(KindGet)},
		{"error reply", KindSearch, true, (&Reply{Status: StatusStopped, Applied: 2, Msg: "stopped"}).Encode(KindSearch)},
	}
}

// decodeAs decodes b as a sample of its kind and encodes it again.
func decodeAs(kind byte, rep bool, b []byte) ([]byte, error) {
	switch {
	case kind == 0:
		m, err := DecodeWrite(b)
		if err != nil {
			return nil, err
		}
		return m.Encode(), nil
	case rep:
		p, err := DecodeReply(b, kind)
		if err != nil {
			return nil, err
		}
		return p.Encode(kind), nil
	default:
		q, err := DecodeRequest(b)
		if err != nil {
			return nil, err
		}
		return q.Encode(), nil
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
			if s.b[0] != WireVersion {
				t.Fatalf("version %d", s.b[0])
			}
			again, err := decodeAs(s.kind, s.rep, s.b)
			if err != nil || !bytes.Equal(again, s.b) {
				t.Fatalf("round trip: %v\n got %x\nwant %x", err, again, s.b)
			}
			refused := func(what string, b []byte) {
				t.Helper()
				_, err := decodeAs(s.kind, s.rep, b)
				var ve *VersionError
				if !errors.Is(err, ErrWire) || errors.As(err, &ve) {
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
			body := s.b[FrameHeader:]
			_, err = decodeAs(s.kind, s.rep, Frame(WireVersion+1, body))
			var ve *VersionError
			if !errors.As(err, &ve) || ve.Version != WireVersion+1 || !strings.Contains(err.Error(), "newer umbra") {
				t.Fatalf("a newer version: %v", err)
			}
			for v := range byte(WireVersion) {
				refused(fmt.Sprintf("version %d framed", v), Frame(v, body))
			}
			// A body with one more byte, checksummed: verified, then
			// refused by its decoder.
			refused("a byte past the end", Frame(WireVersion, append(bytes.Clone(body), byte(r.IntN(256)))))
		})
	}
	for _, b := range [][]byte{nil, {9}, {9, 1, 2, 3}} {
		if _, err := DecodeWrite(b); !errors.Is(err, ErrWire) || !strings.Contains(err.Error(), "too short to carry a checksum") {
			t.Fatalf("% x: %v", b, err)
		}
	}
	// Bodies that verify and do not decode: each names what is wrong.
	w := (&WriteMsg{Op: OpAdd, Dim: 2, IDs: []uint64{1}, Rows: []float32{1, 0}}).Encode()
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
		body := bytes.Clone(w[FrameHeader:])
		c.edit(body)
		if _, err := DecodeWrite(Frame(WireVersion, body)); !errors.Is(err, ErrWire) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	d := (&WriteMsg{Op: OpDelete, IDs: []uint64{1}}).Encode()
	body := bytes.Clone(d[FrameHeader:])
	body[2] = attrMeta
	if _, err := DecodeWrite(Frame(WireVersion, append(body, 0, 0, 0, 0))); !errors.Is(err, ErrWire) || !strings.Contains(err.Error(), "attributes") {
		t.Fatalf("a delete with metadata: %v", err)
	}
	// A replica reads a write for its collection's dimension, and its
	// metadata as a canonical encoding.
	if _, _, err := ReadWrite(w, 3); !errors.Is(err, ErrWire) || !strings.Contains(err.Error(), "dimension 2 for a collection of dimension 3") {
		t.Fatalf("another dimension: %v", err)
	}
	for _, op := range []byte{OpAdd, OpUpsert, OpDelete} {
		m := &WriteMsg{Op: op, Dim: 2, IDs: []uint64{5, ReservedIDs + 9}}
		if op != OpDelete {
			m.Rows = []float32{1, 0, 0, 1}
		}
		if _, _, err := ReadWrite(m.Encode(), 2); !errors.Is(err, ErrWire) || !strings.Contains(err.Error(), "one of the cluster's own") {
			t.Fatalf("op %d naming a reserved ID: %v", op, err)
		}
	}
	bad := (&WriteMsg{Op: OpAdd, Dim: 2, IDs: []uint64{7}, Rows: []float32{1, 0}, MetaSet: true, Meta: [][]byte{{0x01, 0x01, 'a', 0x09}}}).Encode()
	if _, _, err := ReadWrite(bad, 2); !errors.Is(err, ErrWire) || !strings.Contains(err.Error(), "metadata of row 0") {
		t.Fatalf("bad metadata: %v", err)
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
	{"write", func(b []byte) { DecodeWrite(b) }},
	{"request", func(b []byte) { DecodeRequest(b) }},
	{"search reply", func(b []byte) { DecodeReply(b, KindSearch) }},
	{"range reply", func(b []byte) { DecodeReply(b, KindRange) }},
	{"await reply", func(b []byte) { DecodeReply(b, KindAwait) }},
	{"lookup reply", func(b []byte) { DecodeReply(b, KindLookup) }},
	{"rows reply", func(b []byte) { DecodeReply(b, KindRows) }},
	{"get reply", func(b []byte) { DecodeReply(b, KindGet) }},
	{"count reply", func(b []byte) { DecodeReply(b, KindCount) }},
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
	b := append([]byte{KindLookup}, make([]byte, 12)...)
	bodies = append(bodies, append(u32(b, n/4), zeros[:n]...))
	// A search reply of n/4 empty hit lists, and one of n/4 empty
	// outcomes' worth.
	b = append([]byte{StatusOK}, make([]byte, 12)...)
	bodies = append(bodies, append(u32(append(bytes.Clone(b), 0), n/4), zeros[:n]...))
	bodies = append(bodies, append(u32(bytes.Clone(b), n/9), zeros[:n]...))
	// A delete by keys of n/12 rows with empty keys, and an add with
	// metadata and payloads of n/16 rows of dimension 1.
	w := u32(u32([]byte{OpDelete, 1, 0}, n/12), 1)
	bodies = append(bodies, append(w, zeros[:n]...))
	w = u32(u32([]byte{OpAdd, 0, attrMeta | attrPayloads}, n/20), 1)
	bodies = append(bodies, append(w, zeros[:n]...))
	// A get reply of n/12 rows with empty keys, and one of n/16 rows
	// with empty metadata and payloads.
	g := append([]byte{StatusOK}, make([]byte, 12)...)
	bodies = append(bodies, append(u32(u32(append(bytes.Clone(g), 0, 0), 0), n/12), zeros[:n]...))
	bodies = append(bodies, append(u32(u32(append(bytes.Clone(g), IncludeMeta|IncludePayload, 0), 0), n/20), zeros[:n]...))
	// Counts of 2³²−1.
	for _, head := range [][]byte{
		u32(append([]byte{KindLookup}, make([]byte, 12)...), ^uint32(0)),
		u32(append([]byte{KindAwait}, make([]byte, 12)...), ^uint32(0)),
		u32(append([]byte{StatusOK}, make([]byte, 12)...), ^uint32(0)),
		u32(append([]byte{StatusOK}, make([]byte, 13)...), ^uint32(0)),
		u32(u32([]byte{OpAdd, 1, 3}, ^uint32(0)), ^uint32(0)),
	} {
		bodies = append(bodies, append(head, zeros[:n]...))
	}
	for i, body := range bodies {
		checkAllocs(t, fmt.Sprintf("message %d", i), Frame(WireVersion, body))
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
		f.Add(append([]byte{s.b[0]}, s.b[FrameHeader:]...))
	}
	f.Add([]byte{9, 1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		inputs := [][]byte{data}
		if len(data) > 0 {
			inputs = append(inputs, Frame(data[0], data[1:]))
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
			if m, err := DecodeWrite(b); err == nil && !bytes.Equal(m.Encode(), b) {
				t.Fatalf("write %+v encodes to %x, decoded from %x", m, m.Encode(), b)
			}
			if q, err := DecodeRequest(b); err == nil && !bytes.Equal(q.Encode(), b) {
				t.Fatalf("request %+v encodes to %x, decoded from %x", q, q.Encode(), b)
			}
			for _, k := range []byte{KindSearch, KindRange, KindAwait, KindLookup, KindRows, KindGet, KindCount} {
				if p, err := DecodeReply(b, k); err == nil && !bytes.Equal(p.Encode(k), b) {
					t.Fatalf("reply to kind %d %+v encodes to %x, decoded from %x", k, p, p.Encode(k), b)
				}
			}
			_, err := DecodeWrite(b)
			var ve *VersionError
			if err != nil && !errors.Is(err, ErrWire) && !errors.As(err, &ve) {
				t.Fatalf("an error of another kind: %v", err)
			}
		}
	})
}

// The frame's cost: sealing and checking a write message of about 1 MiB
// (2,048 rows of dimension 128), the checksum alone and the whole decode.
func BenchmarkFrame(b *testing.B) {
	const n, dim = 2048, 128
	m := &WriteMsg{Op: OpAdd, Dim: dim, IDs: make([]uint64, n), Rows: make([]float32, n*dim)}
	msg := m.Encode()
	b.Run("checksum", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			FrameSum(msg)
		}
	})
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			m.Encode()
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if _, err := DecodeWrite(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
