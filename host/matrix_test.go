package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/float16"
	"github.com/umbravec/umbra/internal/testkit"
)

var (
	updateMatrixFixtures = flag.Bool("update-matrix-fixtures", false, "rewrite host/testdata matrix fixtures from their generators")
)

// wideMatrix fills a rows×dim matrix with normal values whose scale changes
// per row (1e-6 .. 1e3), so float16 sees subnormals, normals and rounding; no
// value is zero.
func wideMatrix(rng *rand.Rand, rows, dim int) *Matrix {
	scales := []float64{1e-6, 1e-3, 1, 30, 1e3}
	m := &Matrix{Rows: rows, Dim: dim, Data: make([]float32, rows*dim)}
	for i := range rows {
		s := scales[rng.IntN(len(scales))]
		for j := range dim {
			v := float32(rng.NormFloat64() * s)
			for v == 0 {
				v = float32(rng.NormFloat64() * s)
			}
			m.Data[i*dim+j] = v
		}
	}
	return m
}

// assertSameBits compares float32 slices bit for bit (NaN equals NaN, -0 is
// not 0), reporting the first difference.
func assertSameBits(t *testing.T, want, got []float32) bool {
	t.Helper()
	if !assert.Len(t, got, len(want)) {
		return false
	}
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			return assert.Failf(t, "values differ", "index %d: want %v (%#08x), got %v (%#08x)",
				i, want[i], math.Float32bits(want[i]), got[i], math.Float32bits(got[i]))
		}
	}
	return true
}

// streamOnly hides every method but Read, so readers cannot learn the size in
// advance and must take the bounded, chunked path.
type streamOnly struct{ r io.Reader }

func (s streamOnly) Read(p []byte) (int, error) { return s.r.Read(p) }

// allocatedDuring reports the bytes the heap handed out while f ran.
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestMatrixRow(t *testing.T) {
	rng := testkit.Rand(t)
	m := wideMatrix(rng, 4, 3)
	for i := range m.Rows {
		row := m.Row(i)
		assertSameBits(t, m.Data[i*3:(i+1)*3], row)
		assert.Equal(t, 3, cap(row), "row %d must be capped so append cannot clobber row %d", i, i+1)
	}
	next := m.Data[3]
	_ = append(m.Row(0), 42)
	assert.Equal(t, next, m.Data[3], "append to Row(0) overwrote row 1")
	assert.Panics(t, func() { m.Row(-1) })
	assert.Panics(t, func() { m.Row(4) })
}

func TestMatrixFileRoundTrip(t *testing.T) {
	rng := testkit.Rand(t)
	cases := []struct {
		file       string
		dtype      string
		rows, dim  int
		float16    bool
		wantHeader string // leading bytes of the written file
	}{
		{"a.npy", "", 7, 5, false, "\x93NUMPY\x01\x00"},
		{"a.npy", "<f4", 1, 1, false, "\x93NUMPY\x01\x00"},
		{"a.npy", "<f4", 0, 9, false, "\x93NUMPY\x01\x00"},
		{"a.npy", "<f2", 13, 24, true, "\x93NUMPY\x01\x00"},
		{"UPPER.NPY", "<f4", 3, 768, false, "\x93NUMPY\x01\x00"},
		{"a.fvecs", "", 9, 17, false, "\x11\x00\x00\x00"},
		{"a.fvecs", "<f4", 1, 1, false, "\x01\x00\x00\x00"},
		{"b.FVECS", "", 300, 128, false, "\x80\x00\x00\x00"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%q/%dx%d", tc.file, tc.dtype, tc.rows, tc.dim), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			m := wideMatrix(rng, tc.rows, tc.dim)
			require.NoError(t, WriteMatrixFile(path, m, tc.dtype))
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(string(raw), tc.wantHeader), "file starts %q", raw[:min(len(raw), 10)])

			got, err := ReadMatrixFile(context.Background(), path)
			require.NoError(t, err)
			assert.Equal(t, tc.rows, got.Rows)
			assert.Equal(t, tc.dim, got.Dim)
			want := m.Data
			if tc.float16 {
				want = make([]float32, len(m.Data))
				for i, v := range m.Data {
					want[i] = float16.ToFloat32(float16.Bits(v))
				}
			}
			assertSameBits(t, want, got.Data)

			entries, err := os.ReadDir(filepath.Dir(path))
			require.NoError(t, err)
			assert.Len(t, entries, 1, "a temporary file was left behind")
		})
	}
}

func TestWriteMatrixFileReplacesAtomically(t *testing.T) {
	rng := testkit.Rand(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "v.npy")
	first := wideMatrix(rng, 4, 4)
	require.NoError(t, WriteMatrixFile(path, first, ""))

	// A failed write leaves the old file intact and no temporary behind.
	bad := &Matrix{Rows: 2, Dim: 4, Data: make([]float32, 7)}
	err := WriteMatrixFile(path, bad, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "7 values")
	got, err := ReadMatrixFile(context.Background(), path)
	require.NoError(t, err)
	assertSameBits(t, first.Data, got.Data)

	second := wideMatrix(rng, 2, 8)
	require.NoError(t, WriteMatrixFile(path, second, "<f4"))
	got, err = ReadMatrixFile(context.Background(), path)
	require.NoError(t, err)
	assertSameBits(t, second.Data, got.Data)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
}

func TestWriteMatrixFileErrors(t *testing.T) {
	rng := testkit.Rand(t)
	good := wideMatrix(rng, 2, 3)
	cases := []struct {
		name  string
		file  string
		m     *Matrix
		dtype string
		want  []string
	}{
		{"unknown extension", "x.bin", good, "", []string{`".bin"`, ".npy, .fvecs"}},
		{"bvecs", "x.bvecs", good, "", []string{".bvecs is not supported"}},
		{"no extension", "matrix", good, "", []string{"no file extension"}},
		{"npy f8", "x.npy", good, "<f8", []string{`"<f8"`, `"<f4"`, `"<f2"`}},
		{"fvecs f2", "x.fvecs", good, "<f2", []string{"float32 only", `"<f2"`}},
		{"nil matrix", "x.npy", nil, "", []string{"nil"}},
		{"zero dim", "x.npy", &Matrix{Rows: 0, Dim: 0}, "", []string{"dim 0"}},
		{"negative rows", "x.fvecs", &Matrix{Rows: -1, Dim: 3}, "", []string{"-1 rows"}},
		{"short data", "x.fvecs", &Matrix{Rows: 2, Dim: 3, Data: good.Data[:5]}, "", []string{"5 values", "need 6"}},
		{"fvecs no rows", "x.fvecs", &Matrix{Rows: 0, Dim: 3}, "", []string{"no rows"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tc.file)
			err := WriteMatrixFile(path, tc.m, tc.dtype)
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, entries, "a failed write must leave nothing behind")
		})
	}
}

func TestReadMatrixFileErrors(t *testing.T) {
	rng := testkit.Rand(t)
	m := wideMatrix(rng, 5, 7)
	var npy, fvecs bytes.Buffer
	require.NoError(t, writeNPY(&npy, m, "<f4"))
	require.NoError(t, writeFvecs(&fvecs, m))
	cases := []struct {
		name     string
		file     string
		content  []byte
		isFormat bool
		want     []string
	}{
		{"unknown extension", "x.bin", npy.Bytes(), true, []string{`".bin"`}},
		{"npy holding fvecs", "x.npy", fvecs.Bytes(), true, []string{"bad magic"}},
		{"fvecs holding npy", "x.fvecs", npy.Bytes(), true, []string{"vector 0"}},
		{"npy truncated", "x.npy", npy.Bytes()[:npy.Len()-3], true,
			[]string{"payload truncated", "(5, 7)", "140 bytes", "only 137 there"}},
		{"npy trailing bytes", "x.npy", append(bytes.Clone(npy.Bytes()), 1, 2, 3), true, []string{"3 bytes of trailing data"}},
		{"fvecs truncated", "x.fvecs", fvecs.Bytes()[:fvecs.Len()-1], true, []string{"vector 4 truncated", "got 27"}},
		{"empty fvecs", "x.fvecs", nil, true, []string{"no vectors"}},
		{"empty npy", "x.npy", nil, true, []string{"too short", "0 bytes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			require.NoError(t, os.WriteFile(path, tc.content, 0o644))
			got, err := ReadMatrixFile(context.Background(), path)
			require.Error(t, err)
			assert.Nil(t, got)
			assert.Equal(t, tc.isFormat, errorIsFormat(err), "errors.Is(err, ErrFormat) for %v", err)
			assert.Contains(t, err.Error(), path)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	t.Run("missing file", func(t *testing.T) {
		_, err := ReadMatrixFile(context.Background(), filepath.Join(t.TempDir(), "none.npy"))
		require.Error(t, err)
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.NotErrorIs(t, err, ErrFormat)
	})
}

// TestReadMatrixFileSizeCheck: a file whose header promises far more than the
// file holds fails before the reader allocates for the promise.
func TestReadMatrixFileSizeCheck(t *testing.T) {
	dir := t.TempDir()
	npyPath := filepath.Join(dir, "lie.npy")
	require.NoError(t, os.WriteFile(npyPath,
		append(numpyNPYBytes(1, "<f4", []int64{1 << 30, 1 << 10}), make([]byte, 64)...), 0o644))
	fvecsPath := filepath.Join(dir, "lie.fvecs")
	require.NoError(t, os.WriteFile(fvecsPath, binary.LittleEndian.AppendUint32(nil, math.MaxInt32), 0o644))

	for _, path := range []string{npyPath, fvecsPath} {
		var err error
		alloc := allocatedDuring(func() { _, err = ReadMatrixFile(context.Background(), path) })
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrFormat)
		assert.Contains(t, err.Error(), "truncated")
		assert.Less(t, alloc, uint64(8<<20), "reading %s allocated %d bytes", path, alloc)
	}
}

// errorIsFormat also checks that the sentinel arrives through the package's
// own error type, not by accident.
func errorIsFormat(err error) bool {
	var e *dataFileError
	return errors.Is(err, ErrFormat) && errors.As(err, &e)
}

// Fixtures: tiny files under testdata, written by the generators below (a Go
// port of numpy.lib.format's writer for .npy), checked byte for byte so that a
// change in the writers or a stray edit of a fixture shows up. Regenerate with
// go test ./host -run TestMatrixFixtures -update-matrix-fixtures.

// numpyNPYBytes is the header numpy's _write_array_header and _wrap_header
// produce for a C-order array, for any shape and format version.
func numpyNPYBytes(major byte, descr string, shape []int64) []byte {
	parts := make([]string, len(shape))
	for i, n := range shape {
		parts[i] = strconv.FormatInt(n, 10)
	}
	shapeRepr := "(" + strings.Join(parts, ", ") + ")"
	if len(shape) == 1 {
		shapeRepr = "(" + parts[0] + ",)"
	}
	header := "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shapeRepr + ", }"
	if len(shape) > 0 {
		header += strings.Repeat(" ", 21-len(parts[0]))
	}
	lenSize := 4
	if major == 1 {
		lenSize = 2
	}
	hlen := len(header) + 1
	padlen := 64 - (8+lenSize+hlen)%64
	out := []byte("\x93NUMPY")
	out = append(out, major, 0)
	if major == 1 {
		out = binary.LittleEndian.AppendUint16(out, uint16(hlen+padlen))
	} else {
		out = binary.LittleEndian.AppendUint32(out, uint32(hlen+padlen))
	}
	out = append(out, header...)
	out = append(out, strings.Repeat(" ", padlen)...)
	return append(out, '\n')
}

// fixtureValues are exact in float16 as well as float32, and none is zero.
func fixtureValues(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i+1) * 0.375
		if i%2 == 1 {
			v[i] = -v[i]
		}
	}
	return v
}

func le32(vals []float32) []byte {
	var b []byte
	for _, f := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

func le16(vals []float32) []byte {
	var b []byte
	for _, f := range vals {
		b = binary.LittleEndian.AppendUint16(b, float16.Bits(f))
	}
	return b
}

func fvecsBytes(dim int, vals []float32) []byte {
	var b []byte
	for i := 0; i < len(vals); i += dim {
		b = binary.LittleEndian.AppendUint32(b, uint32(dim))
		b = append(b, le32(vals[i:i+dim])...)
	}
	return b
}

type matrixFixture struct {
	file      string
	build     func() []byte
	want      *Matrix // nil: reading must fail
	wantErr   string
	numpyLike bool // WriteMatrix must reproduce the file exactly
	dtype     string
}

func matrixFixtures() []matrixFixture {
	return []matrixFixture{
		{file: "f4_3x4_v1.npy", build: func() []byte {
			return append(numpyNPYBytes(1, "<f4", []int64{3, 4}), le32(fixtureValues(12))...)
		}, want: &Matrix{Rows: 3, Dim: 4, Data: fixtureValues(12)}, numpyLike: true, dtype: "<f4"},
		{file: "f2_2x5_v1.npy", build: func() []byte {
			return append(numpyNPYBytes(1, "<f2", []int64{2, 5}), le16(fixtureValues(10))...)
		}, want: &Matrix{Rows: 2, Dim: 5, Data: fixtureValues(10)}, numpyLike: true, dtype: "<f2"},
		{file: "f4_2x3_v2.npy", build: func() []byte {
			return append(numpyNPYBytes(2, "<f4", []int64{2, 3}), le32(fixtureValues(6))...)
		}, want: &Matrix{Rows: 2, Dim: 3, Data: fixtureValues(6)}},
		{file: "f4_2x3_v3.npy", build: func() []byte {
			return append(numpyNPYBytes(3, "<f4", []int64{2, 3}), le32(fixtureValues(6))...)
		}, want: &Matrix{Rows: 2, Dim: 3, Data: fixtureValues(6)}},
		{file: "vec_4x3.fvecs", build: func() []byte {
			return fvecsBytes(3, fixtureValues(12))
		}, want: &Matrix{Rows: 4, Dim: 3, Data: fixtureValues(12)}},
		{file: "bad_f8_2x2.npy", build: func() []byte {
			var b []byte
			for _, f := range fixtureValues(4) {
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(f)))
			}
			return append(numpyNPYBytes(1, "<f8", []int64{2, 2}), b...)
		}, wantErr: "dtype '<f8' is not supported"},
		{file: "bad_1d_3.npy", build: func() []byte {
			return append(numpyNPYBytes(1, "<f4", []int64{3}), le32(fixtureValues(3))...)
		}, wantErr: "shape (3,) is 1-D"},
		{file: "bad_truncated.fvecs", build: func() []byte {
			b := fvecsBytes(3, fixtureValues(6))
			return b[:len(b)-2]
		}, wantErr: "vector 1 truncated"},
	}
}

func TestMatrixFixtures(t *testing.T) {
	for _, fx := range matrixFixtures() {
		t.Run(fx.file, func(t *testing.T) {
			path := filepath.Join("testdata", fx.file)
			if *updateMatrixFixtures {
				require.NoError(t, os.MkdirAll("testdata", 0o755))
				require.NoError(t, os.WriteFile(path, fx.build(), 0o644))
			}
			raw, err := os.ReadFile(path)
			require.NoError(t, err, "regenerate with -update-matrix-fixtures")
			assert.Equal(t, fx.build(), raw, "fixture differs from its generator")

			got, err := ReadMatrixFile(context.Background(), path)
			if fx.want == nil {
				require.Error(t, err)
				assert.ErrorIs(t, err, ErrFormat)
				assert.Contains(t, err.Error(), fx.wantErr)
				assert.Contains(t, err.Error(), path)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, fx.want.Rows, got.Rows)
			assert.Equal(t, fx.want.Dim, got.Dim)
			assertSameBits(t, fx.want.Data, got.Data)

			if fx.numpyLike {
				var buf bytes.Buffer
				require.NoError(t, writeNPY(&buf, fx.want, fx.dtype))
				assert.Equal(t, raw, buf.Bytes(), "WriteMatrix differs from numpy's layout")
			}
		})
	}
}

func ExampleWriteMatrixFile() {
	dir, err := os.MkdirTemp("", "umbra-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "vectors.npy")

	m := &Matrix{Rows: 2, Dim: 3, Data: []float32{1, 2, 3, 0.5, 0.25, 0.125}}
	if err := WriteMatrixFile(path, m, "<f2"); err != nil {
		panic(err)
	}
	back, err := ReadMatrixFile(context.Background(), path)
	if err != nil {
		panic(err)
	}
	fmt.Println(back.Rows, back.Dim, back.Row(1))
	// Output: 2 3 [0.5 0.25 0.125]
}

func ExampleReadMatrixFile() {
	_, err := ReadMatrixFile(context.Background(), "testdata/bad_1d_3.npy")
	fmt.Println(err)
	fmt.Println(errors.Is(err, ErrFormat))
	// Output:
	// malformed data file "testdata/bad_1d_3.npy": shape (3,) is 1-D: need a 2-D array (rows, dim)
	// true
}

// TestReadersNameOpenFiles: given an *os.File, ReadMatrix names it
// in their errors and check its size before allocating.
func TestReadersNameOpenFiles(t *testing.T) {
	for _, tc := range []struct {
		file   string
		format string
		want   string
	}{
		{"bad_1d_3.npy", ".npy", "shape (3,) is 1-D"},
		{"bad_truncated.fvecs", ".fvecs", "vector 1 truncated"},
		{"bad_f8_2x2.npy", ".npy", "dtype '<f8'"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			_, err = ReadMatrix(context.Background(), f, tc.format)
			require.Error(t, err)
			assert.True(t, errorIsFormat(err), "%v", err)
			assert.Contains(t, err.Error(), strconv.Quote(path))
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	f, err := os.Open(filepath.Join("testdata", "f4_3x4_v1.npy"))
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Seek(64, io.SeekStart) // mid-header: the size check must count from here
	require.NoError(t, err)
	assert.Equal(t, int64(176-64), remainingBytes(f))
}
