package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/atomicfile"
	"github.com/umbravec/umbra/internal/testkit"
)

// vecsRecords encodes rows of dim components, each component by enc, as
// TEXMEX records.
func vecsRecords[T any](dim int, vals []T, enc func([]byte, T) []byte) []byte {
	var b []byte
	for i := 0; i < len(vals); i += dim {
		b = binary.LittleEndian.AppendUint32(b, uint32(dim))
		for _, v := range vals[i : i+dim] {
			b = enc(b, v)
		}
	}
	return b
}

func appendI32(b []byte, v int32) []byte { return binary.LittleEndian.AppendUint32(b, uint32(v)) }
func appendU8(b []byte, v uint8) []byte  { return append(b, v) }

// idsNPY encodes ids as a 1-D .npy of descr "<i8" or "<u8", numpy's layout.
func idsNPY(descr string, ids []uint64) []byte {
	b := numpyNPYBytes(1, descr, []int64{int64(len(ids))})
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint64(b, id)
	}
	return b
}

func TestBvecsRoundTrip(t *testing.T) {
	rng := testkit.Rand(t)
	for _, tc := range []struct{ rows, dim int }{{1, 1}, {7, 128}, {3, 3 << 20}} {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.dim), func(t *testing.T) {
			vals := make([]uint8, tc.rows*tc.dim)
			for i := range vals {
				vals[i] = uint8(rng.Uint32())
			}
			file := vecsRecords(tc.dim, vals, appendU8)
			for kind, r := range readers(file) {
				if kind == "onebyte" && len(vals) > 10000 {
					continue
				}
				m, err := readBvecsFrom(t.Context(), r)
				require.NoError(t, err, kind)
				require.Equal(t, tc.rows, m.Rows, kind)
				require.Equal(t, tc.dim, m.Dim, kind)
				for i, v := range vals {
					if m.Data[i] != float32(v) {
						t.Fatalf("%s: value %d is %v, want %d", kind, i, m.Data[i], v)
					}
				}
			}
			path := filepath.Join(t.TempDir(), "x.BVECS")
			require.NoError(t, os.WriteFile(path, file, 0o644))
			m, err := ReadMatrixFile(t.Context(), path)
			require.NoError(t, err)
			assert.Equal(t, tc.rows, m.Rows)
		})
	}
}

func TestIvecsRoundTrip(t *testing.T) {
	rng := testkit.Rand(t)
	for _, tc := range []struct{ rows, dim int }{{1, 1}, {10, 100}, {2, 400000}} {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.dim), func(t *testing.T) {
			vals := make([]int32, tc.rows*tc.dim)
			for i := range vals {
				vals[i] = int32(rng.Uint32()) // negatives too: ivecs is not only IDs
			}
			file := vecsRecords(tc.dim, vals, appendI32)
			for kind, r := range readers(file) {
				if kind == "onebyte" && len(vals) > 10000 {
					continue
				}
				m, err := readIvecsFrom(t.Context(), r)
				require.NoError(t, err, kind)
				assert.Equal(t, tc.rows, m.Rows, kind)
				assert.Equal(t, tc.dim, m.Dim, kind)
				assert.Equal(t, vals, m.Data, kind)
				assert.Equal(t, vals[(tc.rows-1)*tc.dim:], m.Row(tc.rows-1))
			}
		})
	}
}

func TestVecsMalformed(t *testing.T) {
	good := vecsRecords(2, []int32{1, 2, 3, 4, 5, 6}, appendI32)
	goodB := vecsRecords(3, []uint8{1, 2, 3, 4, 5, 6}, appendU8)
	cases := []struct {
		name string
		read func(io.Reader) error
		file []byte
		want []string
	}{
		{"ivecs ragged", ivecsErr, append(bytes.Clone(good), vecsRecords(3, []int32{7, 8, 9}, appendI32)...),
			[]string{"ivecs stream", "vector 3 has dim 3, but vector 0 has dim 2", "at byte 36"}},
		{"ivecs truncated", ivecsErr, good[:len(good)-2], []string{"vector 2 truncated", "got 6", "at byte 24"}},
		{"ivecs empty", ivecsErr, nil, []string{"no vectors", "ivecs"}},
		{"bvecs truncated", bvecsErr, goodB[:len(goodB)-1], []string{"bvecs stream", "vector 1 truncated", "needs 3 bytes", "got 2"}},
		{"bvecs ragged", bvecsErr, append(bytes.Clone(goodB), vecsRecords(2, []uint8{1, 2}, appendU8)...),
			[]string{"vector 2 has dim 2, but vector 0 has dim 3", "at byte 14"}},
		{"bvecs negative dim", bvecsErr, appendI32(nil, -1), []string{"vector 0: dim -1 must be positive"}},
		{"bvecs fed fvecs", bvecsErr, fvecsBytes(2, []float32{1, 2, 3, 4}), []string{"vector 1 has dim", "but vector 0 has dim 2", "at byte 6"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for kind, r := range readers(tc.file) {
				requireFormatError(t, kind, tc.read(r), tc.want...)
			}
		})
	}
}

// TestNPYReadAsFvecs: the npy magic read as a dim is a large number; the
// message must say so whichever way the bytes come.
func TestNPYReadAsFvecs(t *testing.T) {
	file := append(numpyNPYBytes(1, "<f4", []int64{4, 3}), le32(fixtureValues(12))...)
	for kind, r := range readers(file) {
		_, err := readFvecsFrom(t.Context(), r)
		require.Error(t, err, kind)
		if kind == "sized" {
			assert.ErrorIs(t, err, ErrFormat)
			assert.Contains(t, err.Error(), "vector 0 truncated")
		} else {
			assert.ErrorIs(t, err, ErrTooLarge, kind)
			assert.Contains(t, err.Error(), "is this fvecs data?", kind)
		}
	}
}

func ivecsErr(r io.Reader) error { _, err := readIvecsFrom(context.Background(), r); return err }
func bvecsErr(r io.Reader) error { _, err := readBvecsFrom(context.Background(), r); return err }

func TestReadIDs(t *testing.T) {
	rng := testkit.Rand(t)
	for _, n := range []int{0, 1, 1000, 300000} {
		ids := make([]uint64, n)
		for i := range ids {
			ids[i] = rng.Uint64() >> rng.IntN(64)
		}
		signed := make([]uint64, n)
		for i := range signed {
			signed[i] = ids[i] >> 1 // non-negative as int64
		}
		for _, tc := range []struct {
			descr string
			ids   []uint64
		}{{"<u8", ids}, {"<i8", signed}} {
			file := idsNPY(tc.descr, tc.ids)
			for kind, r := range readers(file) {
				if kind == "onebyte" && n > 1000 {
					continue
				}
				got, err := ReadIDs(t.Context(), r)
				require.NoError(t, err, "%s %s n=%d", kind, tc.descr, n)
				assert.Equal(t, len(tc.ids), len(got))
				assert.Equal(t, tc.ids, got, "%s %s", kind, tc.descr)
			}
			path := filepath.Join(t.TempDir(), "ids.npy")
			require.NoError(t, os.WriteFile(path, file, 0o644))
			got, err := ReadIDsFile(t.Context(), path)
			require.NoError(t, err)
			assert.Equal(t, tc.ids, got)
		}
	}
}

func TestReadIDsFileIvecs(t *testing.T) {
	rng := testkit.Rand(t)
	ids := make([]int32, 500)
	want := make([]uint64, len(ids))
	for i := range ids {
		ids[i] = int32(rng.Uint32() >> 1)
		want[i] = uint64(ids[i])
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ids.ivecs")
	require.NoError(t, os.WriteFile(path, vecsRecords(1, ids, appendI32), 0o644))
	got, err := ReadIDsFile(t.Context(), path)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	ids[321] = -5
	require.NoError(t, os.WriteFile(path, vecsRecords(1, ids, appendI32), 0o644))
	_, err = ReadIDsFile(t.Context(), path)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrFormat)
	assert.Contains(t, err.Error(), "vector 321 holds ID -5")

	require.NoError(t, os.WriteFile(path, vecsRecords(2, ids[:10], appendI32), 0o644))
	_, err = ReadIDsFile(t.Context(), path)
	assert.ErrorIs(t, err, ErrFormat)
	assert.Contains(t, err.Error(), "dim 2")

	// Ground truth is not a matrix of vectors: ReadMatrixFile says where to go.
	_, err = ReadMatrixFile(t.Context(), path)
	assert.ErrorIs(t, err, ErrFormat)
	assert.Contains(t, err.Error(), "ReadIDsFile")
}

func TestReadIDsMalformed(t *testing.T) {
	rng := testkit.Rand(t)
	ids := make([]uint64, 40)
	for i := range ids {
		ids[i] = rng.Uint64() >> 1
	}
	neg := slices.Clone(ids)
	neg[17] = uint64(math.MaxUint64 - 2) // -3 as int64
	cases := []struct {
		name string
		file []byte
		want []string
	}{
		{"negative int64", idsNPY("<i8", neg), []string{"ID 17 is -3", "non-negative"}},
		{"2-D", append(numpyNPYBytes(1, "<i8", []int64{20, 2}), idsNPY("<i8", ids)[128:]...), []string{"shape (20, 2) is 2-D", "1-D"}},
		{"float dtype", append(numpyNPYBytes(1, "<f4", []int64{4}), le32(fixtureValues(4))...), []string{"dtype '<f4'", "for IDs", "'<i8'"}},
		{"big-endian", append(numpyNPYBytes(1, ">i8", []int64{4}), make([]byte, 32)...), []string{"dtype '>i8'"}},
		{"truncated", idsNPY("<u8", ids)[:128+8*40-3], []string{"payload truncated", "(40,)", "uint64", "320 bytes"}},
		{"not npy", vecsRecords(1, []int32{1, 2}, appendI32), []string{"bad magic"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for kind, r := range readers(tc.file) {
				got, err := ReadIDs(t.Context(), r)
				assert.Nil(t, got)
				requireFormatError(t, kind, err, tc.want...)
			}
		})
	}
}

// TestStreamCap: a source of unknown size is read up to the cap and no
// further; exactly at the cap it still loads. A sized source is not capped.
func TestStreamCap(t *testing.T) {
	rng := testkit.Rand(t)
	m := wideMatrix(rng, 50, 20)
	fvecs := fvecsBytes(20, m.Data)
	var npy bytes.Buffer
	require.NoError(t, writeNPY(&npy, m, "<f4"))
	size := int64(len(fvecs))

	got, err := readFvecsFrom(t.Context(), streamOnly{bytes.NewReader(fvecs)}, MaxStreamBytes(size))
	require.NoError(t, err, "a stream of exactly the cap")
	assertSameBits(t, m.Data, got.Data)

	_, err = readFvecsFrom(t.Context(), streamOnly{bytes.NewReader(fvecs)}, MaxStreamBytes(size-1))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.NotErrorIs(t, err, ErrFormat)
	assert.Contains(t, err.Error(), fmt.Sprintf("over the %d-byte cap", size-1))

	_, err = readFvecsFrom(t.Context(), bytes.NewReader(fvecs), MaxStreamBytes(10))
	require.NoError(t, err, "a sized reader is checked against its size, not capped")

	// An npy header's claim is judged before its payload is read.
	_, err = readNPYFrom(t.Context(), streamOnly{bytes.NewReader(npy.Bytes())}, MaxStreamBytes(int64(npy.Len()-1)))
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.Contains(t, err.Error(), "shape (50, 20) of float32 needs 4000 bytes")
	got, err = readNPYFrom(t.Context(), streamOnly{bytes.NewReader(npy.Bytes())}, MaxStreamBytes(int64(npy.Len())))
	require.NoError(t, err)
	assertSameBits(t, m.Data, got.Data)
}

// endless is /dev/urandom in a box: random bytes forever, counted.
type endless struct {
	rng  *rand.Rand
	read int64
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e.rng.Uint32())
	}
	e.read += int64(len(p))
	return len(p), nil
}

// TestEndlessStream: random bytes without end, under any reader, stop at the
// cap (or earlier, at the first inconsistency) with bounded memory.
func TestEndlessStream(t *testing.T) {
	rng := testkit.Rand(t)
	const limit = 32 << 20
	readers := map[string]struct {
		widen uint64 // bytes of result per byte read
		read  func(io.Reader) error
	}{
		"fvecs": {1, func(r io.Reader) error { _, err := readFvecsFrom(t.Context(), r, MaxStreamBytes(limit)); return err }},
		"bvecs": {4, func(r io.Reader) error { _, err := readBvecsFrom(t.Context(), r, MaxStreamBytes(limit)); return err }},
		"ivecs": {1, func(r io.Reader) error { _, err := readIvecsFrom(t.Context(), r, MaxStreamBytes(limit)); return err }},
	}
	for name, tc := range readers {
		// A small positive dim first, so that the reader has to keep going.
		src := &endless{rng: rng}
		var err error
		alloc := allocatedDuring(func() {
			err = tc.read(io.MultiReader(bytes.NewReader(appendI32(nil, 1<<30)), src))
		})
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ErrTooLarge, name)
		assert.LessOrEqual(t, src.read, int64(limit+(128<<10)), "%s read past the cap", name)
		assert.Less(t, alloc, tc.widen*limit+16<<20, "%s allocated %d bytes for a %d-byte cap", name, alloc, limit)
	}
}

// cancelAfter cancels its context once n bytes have been read through it.
type cancelAfter struct {
	r      io.Reader
	n      int64
	read   int64
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.read += int64(k)
	if c.read >= c.n {
		c.cancel()
	}
	return k, err
}

func TestReadCancellation(t *testing.T) {
	rng := testkit.Rand(t)
	m := wideMatrix(rng, 2000, 500) // 4 MB
	var npy bytes.Buffer
	require.NoError(t, writeNPY(&npy, m, "<f4"))
	fvecs := fvecsBytes(500, m.Data)

	for name, tc := range map[string]struct {
		file []byte
		read func(context.Context, io.Reader) error
	}{
		"npy":   {npy.Bytes(), func(ctx context.Context, r io.Reader) error { _, err := readNPYFrom(ctx, r); return err }},
		"fvecs": {fvecs, func(ctx context.Context, r io.Reader) error { _, err := readFvecsFrom(ctx, r); return err }},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		cr := &cancelAfter{r: streamOnly{bytes.NewReader(tc.file)}, n: 1 << 20, cancel: cancel}
		err := tc.read(ctx, cr)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, context.Canceled, name)
		assert.Contains(t, err.Error(), "stream", name)
		assert.Less(t, cr.read, int64(len(tc.file)), "%s read everything before stopping", name)
		assert.LessOrEqual(t, cr.read, int64(1<<20+pieceBytes+(64<<10)), "%s: one piece past the cancel, at most", name)
		cancel()
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	path := filepath.Join(t.TempDir(), "m.npy")
	require.NoError(t, os.WriteFile(path, npy.Bytes(), 0o644))
	_, err := ReadMatrixFile(ctx, path)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), path)
}

// TestHostileHeaderQuotedBriefly: a 256 KB garbage header is quoted, not
// echoed.
func TestHostileHeaderQuotedBriefly(t *testing.T) {
	junk := strings.Repeat("{'descr': <", 256<<10/11)
	long := "'" + strings.Repeat("x", 200<<10) + "'"
	for name, header := range map[string]string{
		"unparsable":   junk,
		"long dtype":   "{'descr': " + long + ", 'fortran_order': False, 'shape': (1, 1), }",
		"long key":     "{" + long + ": 1, 'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), }",
		"long shape":   "{'descr': '<f4', 'fortran_order': False, 'shape': (" + strings.Repeat("1, ", 60000) + "), }",
		"long integer": "{'descr': '<f4', 'fortran_order': False, 'shape': (" + strings.Repeat("9", 100000) + ", 1), }",
		"not a dict":   long,
	} {
		_, err := readNPYFrom(t.Context(), bytes.NewReader(buildNPY(2, 0, header, nil)))
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ErrFormat, name)
		assert.Less(t, len(err.Error()), 400, "%s: %d-byte message", name, len(err.Error()))
	}
}

// TestLeftoverTempIsNotOutput: what a writer killed mid-way leaves behind is
// recognisable and no reader takes it for a vector file.
func TestLeftoverTempIsNotOutput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "v.npy")
	var tmp string
	err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1)
		tmp = filepath.Join(dir, entries[0].Name())
		return errors.New("killed")
	})
	require.Error(t, err)
	assert.Regexp(t, `^\.v\.npy\.tmp-[0-9a-f]{16}$`, filepath.Base(tmp), "temporary name")

	// Play the killed process: the same name, with the whole payload in it.
	rng := testkit.Rand(t)
	m := wideMatrix(rng, 3, 4)
	f, err := os.Create(tmp)
	require.NoError(t, err)
	require.NoError(t, writeNPY(f, m, "<f4"))
	require.NoError(t, f.Close())
	_, err = ReadMatrixFile(t.Context(), tmp)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrFormat)
	assert.Contains(t, err.Error(), "unknown file extension")
	_, err = ReadIDsFile(t.Context(), tmp)
	assert.ErrorIs(t, err, ErrFormat)
}

// TestStreamFormats: ReadMatrix and WriteMatrix take the format a file of
// the stream would have, with or without its dot, and refuse one they do
// not read or write, naming it.
func TestStreamFormats(t *testing.T) {
	m := &Matrix{Rows: 2, Dim: 3, Data: []float32{1, 2, 3, 4, 5, 6}}
	for _, format := range []string{".npy", "NPY", "fvecs", ".FVECS"} {
		var buf bytes.Buffer
		require.NoError(t, WriteMatrix(&buf, m, format, ""), format)
		back, err := ReadMatrix(t.Context(), &buf, format)
		require.NoError(t, err, format)
		assert.Equal(t, m, back, format)
	}
	for _, format := range []string{"", ".txt", "ivecs"} {
		_, err := ReadMatrix(t.Context(), strings.NewReader("x"), format)
		assert.ErrorIs(t, err, ErrFormat, "%q", format)
	}
	var buf bytes.Buffer
	assert.ErrorContains(t, WriteMatrix(&buf, m, ".bvecs", ""), ".bvecs")
	assert.ErrorContains(t, WriteMatrix(&buf, m, ".fvecs", "<f2"), "float32 only")
	assert.ErrorContains(t, WriteMatrix(&buf, m, ".npy", "<f8"), "<f8")
	assert.Zero(t, buf.Len(), "a refused write writes nothing")
}
