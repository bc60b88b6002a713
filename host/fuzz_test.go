package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
)

// The fuzz targets below share one contract: whatever the bytes, a reader
// returns a result or an error (never a panic), a sized and a streaming
// reader agree, a result is no larger than the input allows, memory stays
// within a bound set by the input's length (not by what a header claims),
// and a valid result written back reads back identically. Seed corpora live
// in testdata/fuzz/<target>; run one with
//
//	go test -run '^$' -fuzz '^FuzzReadNPY$' -fuzztime 10s ./host

// fuzzAllocBound is what reading n bytes may allocate: a few pieces of
// working buffer plus a small multiple of the input (bvecs widens 4x, and a
// chunked stream copies once at the end).
func fuzzAllocBound(n int) uint64 { return 4*pieceBytes + 16*uint64(n) + 1<<20 }

// fuzzCap is small so that the cap's own path is fuzzed too.
const fuzzCap = 1 << 16

// readBoth reads b through a sized reader and a one-byte stream and checks
// that they agree on success and on the kind of failure.
func readBoth[T any](t *testing.T, b []byte, read func(io.Reader) (T, error), equal func(a, b T) bool) (T, error) {
	t.Helper()
	var got T
	var err error
	alloc := allocatedDuring(func() { got, err = read(bytes.NewReader(b)) })
	if alloc > fuzzAllocBound(len(b)) {
		t.Fatalf("reading %d bytes allocated %d", len(b), alloc)
	}
	sgot, serr := read(iotest.OneByteReader(streamOnly{bytes.NewReader(b)}))
	switch {
	case errors.Is(serr, ErrTooLarge):
		// Only a stream is capped; it must have had a reason.
		if len(b) <= fuzzCap && err == nil {
			t.Fatalf("stream refused as too large what the sized reader read: %v", serr)
		}
	case (err == nil) != (serr == nil):
		t.Fatalf("sized and stream readers disagree: %v vs %v", err, serr)
	case err == nil && !equal(got, sgot):
		t.Fatalf("sized and stream readers read different values")
	}
	if err != nil && !errors.Is(err, ErrFormat) {
		t.Fatalf("error does not wrap ErrFormat: %v", err)
	}
	return got, err
}

func sameMatrix(a, b *Matrix) bool {
	if a.Rows != b.Rows || a.Dim != b.Dim || len(a.Data) != len(b.Data) {
		return false
	}
	for i := range a.Data {
		if math.Float32bits(a.Data[i]) != math.Float32bits(b.Data[i]) {
			return false
		}
	}
	return true
}

func FuzzReadNPY(f *testing.F) {
	f.Add(append(numpyNPYBytes(1, "<f4", []int64{2, 3}), le32(fixtureValues(6))...))
	f.Add(append(numpyNPYBytes(3, "<f2", []int64{1, 4}), le16(fixtureValues(4))...))
	f.Fuzz(func(t *testing.T, b []byte) {
		read := func(r io.Reader) (*Matrix, error) {
			return readNPYFrom(context.Background(), r, MaxStreamBytes(fuzzCap))
		}
		m, err := readBoth(t, b, read, sameMatrix)
		if err != nil {
			return
		}
		if m.Rows*m.Dim != len(m.Data) || m.Dim <= 0 || 2*len(m.Data) > len(b) {
			t.Fatalf("%d bytes gave %dx%d with %d values", len(b), m.Rows, m.Dim, len(m.Data))
		}
		var w bytes.Buffer
		if err := writeNPY(&w, m, "<f4"); err != nil {
			t.Fatal(err)
		}
		back, err := readNPYFrom(context.Background(), &w)
		if err != nil || !sameMatrix(m, back) {
			t.Fatalf("write then read is not the identity: %v", err)
		}
	})
}

// FuzzReadVecs fuzzes .fvecs, .bvecs and .ivecs alike: the three share one
// record reader, and a valid input is its own canonical encoding, so it must
// re-encode byte for byte.
func FuzzReadVecs(f *testing.F) {
	f.Add(byte(0), fvecsBytes(3, fixtureValues(6)))
	f.Add(byte(1), vecsRecords(4, []uint8{0, 1, 128, 255, 7, 7, 7, 7}, appendU8))
	f.Add(byte(2), vecsRecords(2, []int32{-1, 0, math.MaxInt32, math.MinInt32}, appendI32))
	f.Fuzz(func(t *testing.T, kind byte, b []byte) {
		opt := MaxStreamBytes(fuzzCap)
		var encoded []byte
		var rows int
		switch kind % 3 {
		case 0:
			m, err := readBoth(t, b, func(r io.Reader) (*Matrix, error) { return readFvecsFrom(context.Background(), r, opt) }, sameMatrix)
			if err != nil {
				return
			}
			var w bytes.Buffer
			if err := writeFvecs(&w, m); err != nil {
				t.Fatal(err)
			}
			encoded, rows = w.Bytes(), m.Rows
		case 1:
			m, err := readBoth(t, b, func(r io.Reader) (*Matrix, error) { return readBvecsFrom(context.Background(), r, opt) }, sameMatrix)
			if err != nil {
				return
			}
			vals := make([]uint8, len(m.Data))
			for i, v := range m.Data {
				if v != float32(uint8(v)) {
					t.Fatalf("bvecs value %v is not a byte", v)
				}
				vals[i] = uint8(v)
			}
			encoded, rows = vecsRecords(m.Dim, vals, appendU8), m.Rows
		case 2:
			m, err := readBoth(t, b, func(r io.Reader) (*intMatrix, error) { return readIvecsFrom(context.Background(), r, opt) },
				func(a, b *intMatrix) bool { return a.Rows == b.Rows && a.Dim == b.Dim && slicesEqual(a.Data, b.Data) })
			if err != nil {
				return
			}
			encoded, rows = vecsRecords(m.Dim, m.Data, appendI32), m.Rows
		}
		if rows == 0 || !bytes.Equal(encoded, b) {
			t.Fatalf("%d rows re-encode to %d bytes, not the %d read", rows, len(encoded), len(b))
		}
	})
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func FuzzReadIDs(f *testing.F) {
	f.Add(idsNPY("<u8", []uint64{0, 1, math.MaxUint64}))
	f.Add(idsNPY("<i8", []uint64{5, 1 << 62}))
	f.Add(idsNPY("<i8", []uint64{math.MaxUint64})) // -1
	f.Fuzz(func(t *testing.T, b []byte) {
		read := func(r io.Reader) ([]uint64, error) { return ReadIDs(context.Background(), r, MaxStreamBytes(fuzzCap)) }
		ids, err := readBoth(t, b, read, slicesEqual[uint64])
		if err != nil {
			return
		}
		if 8*len(ids) > len(b) {
			t.Fatalf("%d bytes gave %d IDs", len(b), len(ids))
		}
		// The payload is the 8n bytes before where the reader stopped.
		r := bytes.NewReader(b)
		if _, err := ReadIDs(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		end := len(b) - r.Len()
		tail := b[end-8*len(ids) : end]
		for i, id := range ids {
			if got := binary.LittleEndian.Uint64(tail[8*i:]); got != id {
				t.Fatalf("ID %d is %d, stored %d", i, id, got)
			}
		}
	})
}

// FuzzMatrixReader: whatever a file holds, OpenMatrixFile then ReadRows,
// in pieces of any size, gives exactly what ReadMatrixFile gives (the same
// rows bit for bit, or the same error), knows the row count of a regular
// file, and allocates no more than the file's length allows.
func FuzzMatrixReader(f *testing.F) {
	f.Add(byte(0), byte(1), append(numpyNPYBytes(1, "<f4", []int64{2, 3}), le32(fixtureValues(6))...))
	f.Add(byte(0), byte(2), append(numpyNPYBytes(3, "<f2", []int64{3, 4}), le16(fixtureValues(12))...))
	f.Add(byte(1), byte(0), fvecsBytes(3, fixtureValues(9)))
	f.Add(byte(2), byte(3), vecsRecords(4, []uint8{0, 1, 128, 255, 7, 7, 7, 7}, appendU8))
	f.Fuzz(func(t *testing.T, kind, per byte, b []byte) {
		path := filepath.Join(t.TempDir(), "x"+[]string{".npy", ".fvecs", ".bvecs"}[kind%3])
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		want, wantErr := ReadMatrixFile(ctx, path)
		var got []float32
		var err error
		rows := -2
		alloc := allocatedDuring(func() {
			var r *MatrixReader
			if r, err = OpenMatrixFile(ctx, path); err != nil {
				return
			}
			defer r.Close()
			rows = r.Rows()
			dst := make([]float32, min(r.Dim()*(1+int(per)%8), 1<<16))
			if len(dst) < r.Dim() && rows != 0 {
				dst = make([]float32, r.Dim()) // dims past 64Ki: one row's room, backed by a row
			}
			if rows == 0 {
				dst = nil // ask whether a row remains, with no room for one
			}
			for {
				var k int
				k, err = r.ReadRows(dst)
				got = append(got, dst[:k*r.Dim()]...)
				if errors.Is(err, io.EOF) {
					err = nil
					return
				}
				if err != nil {
					return
				}
				if k == 0 {
					err = errors.New("ReadRows gave no row and no error")
					return
				}
			}
		})
		if alloc > fuzzAllocBound(len(b))+4*uint64(len(b)) {
			t.Fatalf("reading %d bytes in rows allocated %d", len(b), alloc)
		}
		switch {
		case (wantErr == nil) != (err == nil):
			t.Fatalf("ReadMatrixFile and the reader disagree: %v vs %v", wantErr, err)
		case err != nil && err.Error() != wantErr.Error():
			t.Fatalf("different errors: %v vs %v", wantErr, err)
		case err == nil && (rows != want.Rows || !sameMatrix(want, &Matrix{Rows: rows, Dim: want.Dim, Data: got})):
			t.Fatalf("reader gave %d rows (%d values), ReadMatrixFile %d", rows, len(got), want.Rows)
		}
	})
}
