package storefile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// Op is what a log record does. The codes are part of the file format.
type Op uint8

// The operations a log records. The engine decides what each means for its
// index; the log only keeps them in order.
const (
	OpAdd    Op = 1 // new rows under new IDs
	OpUpsert Op = 2 // rows that replace (or create) the rows of IDs
	OpDelete Op = 3 // IDs removed
	OpSetKey Op = 4 // string keys naming IDs
	// OpUpsertKeys is OpUpsert whose IDs are also named by string keys, in
	// one record, so a keyed write is replayed whole or not at all.
	OpUpsertKeys Op = 5
	// OpWrite is an add or upsert (Record.Upsert) whose rows may carry
	// keys, opaque metadata and opaque payloads, all in one record, so the
	// write is replayed whole or not at all. Builds before it report a log
	// holding one as corrupt (unknown op); see FORMAT.md.
	OpWrite Op = 6
)

// OpWrite flags: which optional parts a record carries. Other bits are 0.
const (
	writeUpsert   = 1 << 0
	writeKeys     = 1 << 1
	writeMeta     = 1 << 2
	writePayloads = 1 << 3
	writeFlags    = writeUpsert | writeKeys | writeMeta | writePayloads
)

func (o Op) String() string {
	switch o {
	case OpAdd:
		return "add"
	case OpUpsert:
		return "upsert"
	case OpDelete:
		return "delete"
	case OpSetKey:
		return "set-key"
	case OpUpsertKeys:
		return "upsert-keys"
	case OpWrite:
		return "write"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Record is one logged change. IDs is never empty. Rows is set for OpAdd,
// OpUpsert, OpUpsertKeys and OpWrite only: len(IDs)*dim values, row i at
// [i*dim, (i+1)*dim), without the stride padding of a base file. Keys is set
// for OpSetKey and OpUpsertKeys, and may be for OpWrite: Keys[i] names
// IDs[i] (in OpUpsertKeys and OpWrite, an empty key names nothing).
//
// Upsert, Meta and Payloads belong to OpWrite only. Upsert says the rows
// replace (or create) those of their IDs rather than being new. Meta and
// Payloads are each empty (the record carries none) or have one entry per
// ID, entry i being IDs[i]'s bytes (opaque here; empty for none). Replay
// returns an empty entry as nil, and an OpWrite's Keys, Meta and Payloads
// as nil when the record carries none.
type Record struct {
	Op   Op
	IDs  []uint64
	Rows []float32
	Keys []string

	Upsert         bool
	Meta, Payloads [][]byte
}

// maxPayload bounds one record so its length fits the frame's uint32.
const maxPayload = math.MaxUint32

func (r *Record) validate(dim int) error {
	if len(r.IDs) == 0 {
		return fmt.Errorf("%w: %v record without IDs", ErrInvalid, r.Op)
	}
	if r.Op != OpWrite && (r.Upsert || len(r.Meta) != 0 || len(r.Payloads) != 0) {
		return fmt.Errorf("%w: %v record carries the upsert flag, meta or payloads, which only a write record (op %d) holds",
			ErrInvalid, r.Op, uint8(OpWrite))
	}
	switch r.Op {
	case OpAdd, OpUpsert:
		if uint64(len(r.Rows)) != uint64(len(r.IDs))*uint64(dim) || len(r.Keys) != 0 {
			return fmt.Errorf("%w: %v record with %d IDs needs %d row values (dim %d) and no keys, has %d values and %d keys",
				ErrInvalid, r.Op, len(r.IDs), len(r.IDs)*dim, dim, len(r.Rows), len(r.Keys))
		}
	case OpDelete:
		if len(r.Rows) != 0 || len(r.Keys) != 0 {
			return fmt.Errorf("%w: delete record carries rows or keys", ErrInvalid)
		}
	case OpUpsertKeys:
		if uint64(len(r.Rows)) != uint64(len(r.IDs))*uint64(dim) || len(r.Keys) != len(r.IDs) {
			return fmt.Errorf("%w: upsert-keys record with %d IDs needs %d row values (dim %d) and %d keys, has %d values and %d keys",
				ErrInvalid, len(r.IDs), len(r.IDs)*dim, dim, len(r.IDs), len(r.Rows), len(r.Keys))
		}
	case OpSetKey:
		if len(r.Keys) != len(r.IDs) || len(r.Rows) != 0 {
			return fmt.Errorf("%w: set-key record with %d IDs has %d keys and %d row values", ErrInvalid, len(r.IDs), len(r.Keys), len(r.Rows))
		}
	case OpWrite:
		if uint64(len(r.Rows)) != uint64(len(r.IDs))*uint64(dim) {
			return fmt.Errorf("%w: write record with %d IDs needs %d row values (dim %d), has %d",
				ErrInvalid, len(r.IDs), len(r.IDs)*dim, dim, len(r.Rows))
		}
		for _, part := range []struct {
			what string
			n    int
		}{{"keys", len(r.Keys)}, {"meta entries", len(r.Meta)}, {"payloads", len(r.Payloads)}} {
			if part.n != 0 && part.n != len(r.IDs) {
				return fmt.Errorf("%w: write record with %d IDs has %d %s; want none or one per ID", ErrInvalid, len(r.IDs), part.n, part.what)
			}
		}
	default:
		return fmt.Errorf("%w: unknown op %d", ErrInvalid, uint8(r.Op))
	}
	if size := r.payloadSize(); size > maxPayload {
		return fmt.Errorf("%w: %v record of %d bytes, a record holds at most %d", ErrInvalid, r.Op, size, uint64(maxPayload))
	}
	return nil
}

func (r *Record) payloadSize() uint64 {
	size := 5 + 8*uint64(len(r.IDs)) + 4*uint64(len(r.Rows))
	if r.Op == OpWrite {
		size++ // flags
	}
	for _, k := range r.Keys {
		size += 4 + uint64(len(k))
	}
	for _, e := range [][][]byte{r.Meta, r.Payloads} {
		for _, b := range e {
			size += 4 + uint64(len(b))
		}
	}
	return size
}

// flags returns an OpWrite record's flags byte.
func (r *Record) flags() byte {
	var f byte
	if r.Upsert {
		f |= writeUpsert
	}
	if len(r.Keys) > 0 {
		f |= writeKeys
	}
	if len(r.Meta) > 0 {
		f |= writeMeta
	}
	if len(r.Payloads) > 0 {
		f |= writePayloads
	}
	return f
}

// appendPayload encodes a validated record: op u8, n u32, n IDs u64, (for
// write: flags u8,) then n*dim float32 (add, upsert, upsert-keys, write),
// then n × (len u32, bytes) for each of the keys (set-key, upsert-keys,
// write), meta and payloads (write) the record carries.
func (r *Record) appendPayload(b []byte) []byte {
	return r.appendPayloadTail(appendFloatsLE(r.appendPayloadHead(b), r.Rows))
}

// appendPayloadHead encodes the payload's fields before the rows.
func (r *Record) appendPayloadHead(b []byte) []byte {
	b = append(b, byte(r.Op))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.IDs)))
	b = appendU64sLE(b, r.IDs)
	if r.Op == OpWrite {
		b = append(b, r.flags())
	}
	return b
}

// appendPayloadTail encodes the payload's fields after the rows.
func (r *Record) appendPayloadTail(b []byte) []byte {
	for _, k := range r.Keys {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
	}
	for _, e := range [][][]byte{r.Meta, r.Payloads} {
		for _, v := range e {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// decodePayload is appendPayload's inverse; it checks every count against
// the bytes present and that nothing is left over. The error says why; the
// caller names the record.
func decodePayload(p []byte, dim int) (Record, error) {
	if len(p) < 5 {
		return Record{}, fmt.Errorf("payload of %d bytes, at least 5 needed", len(p))
	}
	r := Record{Op: Op(p[0])}
	n := uint64(binary.LittleEndian.Uint32(p[1:]))
	p = p[5:]
	if n == 0 {
		return Record{}, fmt.Errorf("%v record without IDs", r.Op)
	}
	if n > uint64(len(p))/8 {
		return Record{}, fmt.Errorf("%d IDs declared, %d bytes left", n, len(p))
	}
	r.IDs = make([]uint64, n)
	copy(u64Bytes(r.IDs), p)
	fixU64sFromLE(r.IDs)
	p = p[8*n:]
	flags := byte(0)
	if r.Op == OpWrite {
		if len(p) < 1 {
			return Record{}, fmt.Errorf("write record ends before its flags")
		}
		if flags = p[0]; flags&^writeFlags != 0 {
			return Record{}, fmt.Errorf("write record has flags %#02x; bits other than %#02x are never written", flags, writeFlags)
		}
		r.Upsert = flags&writeUpsert != 0
		p = p[1:]
	}
	switch r.Op {
	case OpDelete:
		if len(p) != 0 {
			return Record{}, fmt.Errorf("delete record has %d bytes after its IDs", len(p))
		}
		return r, nil
	case OpAdd, OpUpsert, OpUpsertKeys, OpWrite:
		want, ok := mulNoOverflow(n, uint64(dim), 4)
		exact := r.Op == OpAdd || r.Op == OpUpsert || r.Op == OpWrite && flags&^writeUpsert == 0
		if !ok || uint64(len(p)) < want || exact && uint64(len(p)) != want {
			return Record{}, fmt.Errorf("%v of %d IDs at dim %d needs %d×%d×4 row bytes, has %d", r.Op, n, dim, n, dim, len(p))
		}
		r.Rows = make([]float32, int(n)*dim)
		copy(floatBytes(r.Rows), p)
		fixFloatsFromLE(r.Rows)
		p = p[want:]
	case OpSetKey:
	default:
		return Record{}, fmt.Errorf("unknown op %d", uint8(r.Op))
	}
	var err error
	if r.Op == OpSetKey || r.Op == OpUpsertKeys || flags&writeKeys != 0 {
		r.Keys = make([]string, n)
		for i := range r.Keys {
			var k []byte
			if k, p, err = nextEntry(p, "key", i); err != nil {
				return Record{}, err
			}
			r.Keys[i] = string(k)
		}
	}
	if flags&(writeMeta|writePayloads) != 0 {
		// One copy for all of them: p is the reader's buffer, reused for
		// the next frame.
		p = bytes.Clone(p)
		for _, part := range []struct {
			flag byte
			what string
			dst  *[][]byte
		}{{writeMeta, "meta", &r.Meta}, {writePayloads, "payload", &r.Payloads}} {
			if flags&part.flag == 0 {
				continue
			}
			*part.dst = make([][]byte, n)
			for i := range *part.dst {
				if (*part.dst)[i], p, err = nextEntry(p, part.what, i); err != nil {
					return Record{}, err
				}
			}
		}
	}
	if len(p) != 0 {
		return Record{}, fmt.Errorf("%v record has %d bytes after its last part", r.Op, len(p))
	}
	return r, nil
}

// nextEntry splits p's first entry (len u32, bytes) from the rest; the
// entry is nil when empty, else a view of p with its capacity cut to its
// length. what and i name it in an error.
func nextEntry(p []byte, what string, i int) (entry, rest []byte, err error) {
	if len(p) < 4 {
		return nil, nil, fmt.Errorf("%s %d: %d bytes left, its length needs 4", what, i, len(p))
	}
	l := uint64(binary.LittleEndian.Uint32(p))
	if l > uint64(len(p)-4) {
		return nil, nil, fmt.Errorf("%s %d claims %d bytes, %d left", what, i, l, len(p)-4)
	}
	end := 4 + int(l)
	if l > 0 {
		entry = p[4:end:end]
	}
	return entry, p[end:], nil
}
