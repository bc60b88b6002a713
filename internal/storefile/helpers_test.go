package storefile

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// randFloats returns n values with arbitrary bit patterns (NaNs, infinities,
// subnormals included): the format must keep bits, not values.
func randFloats(r *rand.Rand, n int) []float32 {
	fs := make([]float32, n)
	for i := range fs {
		if r.IntN(4) == 0 {
			fs[i] = math.Float32frombits(r.Uint32())
		} else {
			fs[i] = float32(r.NormFloat64())
		}
	}
	return fs
}

func randKey(r *rand.Rand) string {
	b := make([]byte, r.IntN(20))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return string(b)
}

func randSnapshot(r *rand.Rand) *Snapshot {
	dim := 1 + r.IntN(40)
	stride := (dim + 3) &^ 3
	if r.IntN(3) == 0 {
		stride += 4 * r.IntN(3)
	}
	var n int
	switch r.IntN(5) {
	case 0:
		n = 0
	case 1:
		n = 63 + r.IntN(3) // around a bitmap word boundary
	default:
		n = r.IntN(300)
	}
	s := &Snapshot{
		Dim: dim, Stride: stride, Metric: uint8(r.Uint32()), Precision: uint8(r.IntN(3)), NextID: r.Uint64(),
		IDs: make([]uint64, n), Rows: randFloats(r, n*stride),
	}
	for i := range s.IDs {
		s.IDs[i] = r.Uint64()
	}
	if n > 0 && r.IntN(2) == 0 {
		s.Deleted = make([]uint64, (n+63)/64)
		for i := range n {
			if r.IntN(4) == 0 {
				s.Deleted[i/64] |= 1 << (i % 64)
			}
		}
	}
	if r.IntN(2) == 0 {
		s.Keys = map[uint64]string{}
		for range r.IntN(30) {
			s.Keys[r.Uint64()>>r.IntN(64)] = randKey(r)
		}
	}
	// Half the snapshots have no schema, meta or payloads (a version-1
	// base); the others some of each, or entries all empty.
	if r.IntN(2) == 0 {
		if r.IntN(2) == 0 {
			s.Schema = randBytes(r, 1+r.IntN(100))
		}
		if r.IntN(3) != 0 {
			s.Meta = randEntries(r, n)
		}
		if r.IntN(3) != 0 {
			s.Payloads = randEntries(r, n)
		}
	}
	return s
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// randEntries returns n entries of random lengths: empty (nil or not)
// often, now and then one large enough to be written apart from the
// others, sometimes all of them empty.
func randEntries(r *rand.Rand, n int) [][]byte {
	e := make([][]byte, n)
	if r.IntN(8) == 0 {
		if r.IntN(2) == 0 {
			for i := range e {
				e[i] = []byte{}
			}
		}
		return e
	}
	for i := range e {
		switch k := r.IntN(20); {
		case k < 6:
			if k == 0 {
				e[i] = []byte{}
			}
		case k < 19:
			e[i] = randBytes(r, 1+r.IntN(60))
		default:
			e[i] = randBytes(r, 4000+r.IntN(9000))
		}
	}
	return e
}

// requireSameEntries compares per-row entries, treating a nil list like
// one of empty entries and a nil entry like an empty one; got, read back,
// must be in the canonical form: nil when no entry has bytes, nil entries
// for empty ones.
func requireSameEntries(t testing.TB, n int, want, got [][]byte, what string, msg ...any) {
	t.Helper()
	if !anyBytes(want) {
		require.Nil(t, got, "%s: no row has any, yet read back %d entries %v", what, len(got), msg)
		return
	}
	require.Len(t, got, n, "%s %v", what, msg)
	for i := range n {
		require.True(t, bytes.Equal(want[i], got[i]), "%s of row %d %v", what, i, msg)
		if len(got[i]) == 0 {
			require.Nil(t, got[i], "%s of row %d: an empty entry reads back as nil %v", what, i, msg)
		} else {
			require.Equal(t, len(got[i]), cap(got[i]), "%s of row %d: capacity cut to length %v", what, i, msg)
		}
	}
}

// requireSameSnapshot compares two snapshots bit for bit, treating a nil
// bitmap like an all-zero one and a nil key map like an empty one.
func requireSameSnapshot(t testing.TB, want, got *Snapshot, msg ...any) {
	t.Helper()
	require.Equal(t, want.Dim, got.Dim, msg...)
	require.Equal(t, want.Stride, got.Stride, msg...)
	require.Equal(t, want.Metric, got.Metric, msg...)
	require.Equal(t, want.Precision, got.Precision, msg...)
	require.Equal(t, want.NextID, got.NextID, msg...)
	require.Equal(t, len(want.IDs), len(got.IDs), msg...)
	if len(want.IDs) > 0 {
		require.Equal(t, want.IDs, got.IDs, msg...)
	}
	require.True(t, bytes.Equal(floatBytes(want.Rows), floatBytes(got.Rows)), msg...)
	for i := range want.IDs {
		require.Equal(t, want.IsDeleted(i), got.IsDeleted(i), "row %d deleted %v", i, msg)
	}
	require.Len(t, got.Deleted, (len(got.IDs)+63)/64, msg...)
	require.Equal(t, len(want.Keys), len(got.Keys), msg...)
	for id, k := range want.Keys {
		require.Equal(t, k, got.Keys[id], "key of %d %v", id, msg)
	}
	require.True(t, bytes.Equal(want.Schema, got.Schema), "schema %v", msg)
	if len(want.Schema) == 0 {
		require.Nil(t, got.Schema, msg...)
	}
	requireSameEntries(t, len(want.IDs), want.Meta, got.Meta, "meta", msg...)
	requireSameEntries(t, len(want.IDs), want.Payloads, got.Payloads, "payloads", msg...)
}

func randRecord(r *rand.Rand, dim int) Record {
	return randRecordOf(r, dim, Op(1+r.IntN(6)), byte(r.IntN(16)))
}

// randRecordOf returns a random record of op; for OpWrite, flags (the
// payload's bit set) says which optional parts it carries.
func randRecordOf(r *rand.Rand, dim int, op Op, flags byte) Record {
	n := 1 + r.IntN(4)
	rec := Record{Op: op, IDs: make([]uint64, n)}
	for i := range rec.IDs {
		rec.IDs[i] = r.Uint64() >> r.IntN(64)
	}
	if op != OpWrite {
		flags = 0
	}
	if rec.Op == OpAdd || rec.Op == OpUpsert || rec.Op == OpUpsertKeys || rec.Op == OpWrite {
		rec.Rows = randFloats(r, n*dim)
	}
	if rec.Op == OpSetKey || rec.Op == OpUpsertKeys || flags&writeKeys != 0 {
		rec.Keys = make([]string, n)
		for i := range rec.Keys {
			rec.Keys[i] = randKey(r)
		}
	}
	rec.Upsert = flags&writeUpsert != 0
	if flags&writeMeta != 0 {
		rec.Meta = randRecordEntries(r, n)
	}
	if flags&writePayloads != 0 {
		rec.Payloads = randRecordEntries(r, n)
	}
	return rec
}

// randRecordEntries returns n entries, some empty, one now and then a few
// hundred bytes: small, because many log tests scan every cut or every
// byte of their logs (the crash test appends large ones).
func randRecordEntries(r *rand.Rand, n int) [][]byte {
	e := make([][]byte, n)
	for i := range e {
		switch k := r.IntN(10); {
		case k < 2:
		case k < 9:
			e[i] = randBytes(r, 1+r.IntN(40))
		default:
			e[i] = randBytes(r, 100+r.IntN(300))
		}
	}
	return e
}

func requireSameRecord(t testing.TB, want, got Record, msg ...any) {
	t.Helper()
	require.Equal(t, want.Op, got.Op, msg...)
	require.Equal(t, want.IDs, got.IDs, msg...)
	require.True(t, bytes.Equal(floatBytes(want.Rows), floatBytes(got.Rows)), "rows %v", msg)
	require.Equal(t, len(want.Keys), len(got.Keys), msg...)
	for i := range want.Keys {
		require.Equal(t, want.Keys[i], got.Keys[i], msg...)
	}
	require.Equal(t, want.Upsert, got.Upsert, msg...)
	for _, part := range []struct {
		what      string
		want, got [][]byte
	}{{"meta", want.Meta, got.Meta}, {"payloads", want.Payloads, got.Payloads}} {
		require.Equal(t, len(part.want), len(part.got), "%s %v", part.what, msg)
		for i := range part.want {
			require.True(t, bytes.Equal(part.want[i], part.got[i]), "%s %d %v", part.what, i, msg)
			if len(part.got[i]) == 0 {
				require.Nil(t, part.got[i], "%s %d: empty reads back as nil %v", part.what, i, msg)
			}
		}
	}
}

// encodeLog builds a log in memory as a Log under SyncEveryCall would
// write it: each frame says everything before it was synced.
func encodeLog(dim int, gen uint64, recs []Record) []byte {
	b := encodeLogHeader(dim, gen)
	for i := range recs {
		b = appendFrame(b, &recs[i], logVersion, gen, int64(len(b)), int64(len(b)))
	}
	return b
}

// encodeBaseBytes is WriteBase into memory.
func encodeBaseBytes(t testing.TB, s *Snapshot, gen uint64) []byte {
	t.Helper()
	require.NoError(t, s.validate())
	var buf bytes.Buffer
	require.NoError(t, encodeBase(&buf, s, gen))
	return buf.Bytes()
}

// requireFormatError checks that err is a *FormatError naming a section and
// wrapping want.
func requireFormatError(t testing.TB, err error, want error, msg string, args ...any) *FormatError {
	t.Helper()
	ctx := fmt.Sprintf(msg, args...)
	require.Error(t, err, ctx)
	var fe *FormatError
	require.ErrorAs(t, err, &fe, ctx)
	require.NotEmpty(t, fe.Section, ctx)
	if want != nil {
		require.ErrorIs(t, err, want, ctx)
	}
	return fe
}
