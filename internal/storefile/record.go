package storefile

import (
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
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Record is one logged change. IDs is never empty. Rows is set for OpAdd,
// OpUpsert and OpUpsertKeys only: len(IDs)*dim values, row i at
// [i*dim, (i+1)*dim), without the stride padding of a base file. Keys is set
// for OpSetKey and OpUpsertKeys only: Keys[i] names IDs[i].
type Record struct {
	Op   Op
	IDs  []uint64
	Rows []float32
	Keys []string
}

// maxPayload bounds one record so its length fits the frame's uint32.
const maxPayload = math.MaxUint32

func (r *Record) validate(dim int) error {
	if len(r.IDs) == 0 {
		return fmt.Errorf("%w: %v record without IDs", ErrInvalid, r.Op)
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
	for _, k := range r.Keys {
		size += 4 + uint64(len(k))
	}
	return size
}

// appendPayload encodes a validated record: op u8, n u32, n IDs u64, then
// n*dim float32 (add, upsert) or n × (len u32, bytes) (set-key).
func (r *Record) appendPayload(b []byte) []byte {
	b = append(b, byte(r.Op))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.IDs)))
	b = appendU64sLE(b, r.IDs)
	b = appendFloatsLE(b, r.Rows)
	for _, k := range r.Keys {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
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
	switch r.Op {
	case OpDelete:
		if len(p) != 0 {
			return Record{}, fmt.Errorf("delete record has %d bytes after its IDs", len(p))
		}
		return r, nil
	case OpAdd, OpUpsert, OpUpsertKeys:
		want, ok := mulNoOverflow(n, uint64(dim), 4)
		if !ok || uint64(len(p)) < want || r.Op != OpUpsertKeys && uint64(len(p)) != want {
			return Record{}, fmt.Errorf("%v of %d IDs at dim %d needs %d×%d×4 row bytes, has %d", r.Op, n, dim, n, dim, len(p))
		}
		r.Rows = make([]float32, int(n)*dim)
		copy(floatBytes(r.Rows), p)
		fixFloatsFromLE(r.Rows)
		if r.Op != OpUpsertKeys {
			return r, nil
		}
		p = p[want:]
		fallthrough
	case OpSetKey:
		r.Keys = make([]string, n)
		for i := range r.Keys {
			if len(p) < 4 {
				return Record{}, fmt.Errorf("key %d: %d bytes left, length needs 4", i, len(p))
			}
			l := uint64(binary.LittleEndian.Uint32(p))
			if l > uint64(len(p)-4) {
				return Record{}, fmt.Errorf("key %d claims %d bytes, %d left", i, l, len(p)-4)
			}
			r.Keys[i] = string(p[4 : 4+l])
			p = p[4+l:]
		}
		if len(p) != 0 {
			return Record{}, fmt.Errorf("%v record has %d bytes after its keys", r.Op, len(p))
		}
		return r, nil
	}
	return Record{}, fmt.Errorf("unknown op %d", uint8(r.Op))
}
