package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

func TestFvecsRoundTrip(t *testing.T) {
	rng := testkit.Rand(t)
	cases := []struct{ rows, dim int }{
		{1, 1},
		{10, 3},
		{100, 128},
		{3, 300000}, // one record spans several read chunks
		{5000, 96},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.dim), func(t *testing.T) {
			m := wideMatrix(rng, tc.rows, tc.dim)
			var buf bytes.Buffer
			require.NoError(t, writeFvecs(&buf, m))
			require.Equal(t, tc.rows*(4+4*tc.dim), buf.Len())
			assert.Equal(t, fvecsBytes(tc.dim, m.Data), buf.Bytes(), "layout: int32 dim, then dim float32, per vector")
			for kind, r := range readers(buf.Bytes()) {
				if kind == "onebyte" && tc.rows*tc.dim > 10000 {
					continue
				}
				got, err := readFvecsFrom(context.Background(), r)
				require.NoError(t, err, kind)
				assert.Equal(t, tc.rows, got.Rows, kind)
				assert.Equal(t, tc.dim, got.Dim, kind)
				assertSameBits(t, m.Data, got.Data)
			}
		})
	}
}

// TestFvecsKeepsSpecialValues: reading never judges values; NaN, Inf and
// signed zeros come back bit for bit.
func TestFvecsKeepsSpecialValues(t *testing.T) {
	vals := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.Copysign(0, -1)), math.MaxFloat32, math.SmallestNonzeroFloat32}
	m := &Matrix{Rows: 2, Dim: 3, Data: vals}
	var buf bytes.Buffer
	require.NoError(t, writeFvecs(&buf, m))
	got, err := readFvecsFrom(context.Background(), &buf)
	require.NoError(t, err)
	assertSameBits(t, vals, got.Data)

	buf.Reset()
	require.NoError(t, writeNPY(&buf, m, "<f4"))
	got, err = readNPYFrom(context.Background(), &buf)
	require.NoError(t, err)
	assertSameBits(t, vals, got.Data)
}

func TestFvecsMalformed(t *testing.T) {
	rng := testkit.Rand(t)
	vals := wideMatrix(rng, 4, 3).Data
	good := fvecsBytes(3, vals)
	dimField := func(d int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(d)) }
	concat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name string
		file []byte
		want []string
	}{
		{"empty", nil, []string{"no vectors"}},
		{"dim field cut", []byte{3, 0}, []string{"vector 0 truncated", "2 of 4 bytes"}},
		{"dim zero", concat(dimField(0), good), []string{"vector 0: dim 0 must be positive"}},
		{"dim negative", concat(dimField(-3), good), []string{"vector 0: dim -3 must be positive"}},
		{"values cut", good[:len(good)-5], []string{"vector 3 truncated", "dim 3 needs 12 bytes", "got 7"}},
		{"only a dim", good[:4], []string{"vector 0 truncated", "got 0"}},
		{"second dim cut", good[:16+3], []string{"vector 1 truncated", "3 of 4 bytes"}},
		{"dims differ", concat(good[:32], fvecsBytes(4, vals[:4]), good[32:]), []string{"vector 2 has dim 4, but vector 0 has dim 3"}},
		{"later dim zero", concat(good[:16], dimField(0)), []string{"vector 1: dim 0 must be positive"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for kind, r := range readers(tc.file) {
				got, err := readFvecsFrom(context.Background(), r)
				assert.Nil(t, got)
				requireFormatError(t, kind, err, append([]string{"fvecs stream"}, tc.want...)...)
			}
		})
	}
}

// TestFvecsLyingDim: a dim field of 2^31-1 (8 GiB of values) over a short
// payload fails without allocating for the claim: as truncated where the
// size is known, as over the stream cap, before reading on, where it is not.
func TestFvecsLyingDim(t *testing.T) {
	file := append(binary.LittleEndian.AppendUint32(nil, math.MaxInt32), make([]byte, 4096)...)
	for kind, r := range readers(file) {
		var err error
		alloc := allocatedDuring(func() { _, err = readFvecsFrom(context.Background(), r) })
		require.Error(t, err, kind)
		if kind == "sized" {
			assert.ErrorIs(t, err, ErrFormat)
			assert.Contains(t, err.Error(), "vector 0 truncated")
			assert.Contains(t, err.Error(), "got 4096")
		} else {
			assert.ErrorIs(t, err, ErrTooLarge, kind)
			assert.Contains(t, err.Error(), "vector 0: dim 2147483647 claims 8589934588 bytes", kind)
		}
		assert.Less(t, alloc, uint64(8<<20), "%s: allocated %d bytes", kind, alloc)
	}
}

func TestFvecsReaderErrors(t *testing.T) {
	rng := testkit.Rand(t)
	good := fvecsBytes(5, wideMatrix(rng, 3, 5).Data)
	for _, cut := range []int{0, 2, 4, 10, 24, len(good) - 1, len(good)} {
		r := io.MultiReader(bytes.NewReader(good[:cut]), iotest.ErrReader(iotest.ErrTimeout))
		_, err := readFvecsFrom(context.Background(), r)
		require.Error(t, err, "cut %d", cut)
		assert.ErrorIs(t, err, iotest.ErrTimeout, "cut %d", cut)
		assert.NotErrorIs(t, err, ErrFormat, "cut %d", cut)
	}
}

func TestWriteFvecsErrors(t *testing.T) {
	rng := testkit.Rand(t)
	cases := []struct {
		name string
		m    *Matrix
		want string
	}{
		{"nil", nil, "matrix is nil"},
		{"no rows", &Matrix{Rows: 0, Dim: 4}, "no rows"},
		{"zero dim", &Matrix{Rows: 3, Dim: 0}, "dim 0 must be positive"},
		{"data mismatch", &Matrix{Rows: 3, Dim: 2, Data: wideMatrix(rng, 1, 5).Data}, "5 values"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := writeFvecs(&buf, tc.m)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Zero(t, buf.Len())
		})
	}
	err := writeFvecs(&failingWriter{after: 1000}, wideMatrix(rng, 200, 100))
	assert.ErrorIs(t, err, errWriteFailed)
}

func ExampleReadMatrix() {
	var buf bytes.Buffer
	m := &Matrix{Rows: 2, Dim: 2, Data: []float32{1, -1, 0.5, 2}}
	if err := WriteMatrix(&buf, m, ".fvecs", ""); err != nil {
		panic(err)
	}
	back, err := ReadMatrix(context.Background(), &buf, ".fvecs")
	if err != nil {
		panic(err)
	}
	fmt.Println(back.Rows, back.Dim, back.Row(0), back.Row(1))
	// Output: 2 2 [1 -1] [0.5 2]
}

func ExampleWriteMatrix() {
	var buf bytes.Buffer
	m := &Matrix{Rows: 1, Dim: 3, Data: []float32{0.1, 1, 65519}}
	if err := WriteMatrix(&buf, m, "npy", "<f2"); err != nil {
		panic(err)
	}
	back, err := ReadMatrix(context.Background(), &buf, "npy")
	if err != nil {
		panic(err)
	}
	fmt.Println(back.Row(0))
	// Output: [0.099975586 1 65504]
}
