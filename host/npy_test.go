package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/float16"
	"github.com/umbravec/umbra/internal/testkit"
)

// buildNPY assembles an .npy file from a literal header, with no padding of
// its own, so that tests control every byte.
func buildNPY(major, minor byte, header string, payload []byte) []byte {
	out := []byte("\x93NUMPY")
	out = append(out, major, minor)
	if major == 1 {
		out = binary.LittleEndian.AppendUint16(out, uint16(len(header)))
	} else {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(header)))
	}
	out = append(out, header...)
	return append(out, payload...)
}

// readers gives the ways a test feeds bytes to a reader: one whose size is
// known, and opaque streams that force the chunked path.
func readers(b []byte) map[string]io.Reader {
	return map[string]io.Reader{
		"sized":   bytes.NewReader(b),
		"stream":  streamOnly{bytes.NewReader(b)},
		"onebyte": iotest.OneByteReader(bytes.NewReader(b)),
	}
}

func TestNPYRoundTrip(t *testing.T) {
	rng := testkit.Rand(t)
	cases := []struct {
		dtype     string
		rows, dim int
	}{
		{"<f4", 1, 1},
		{"<f4", 5, 7},
		{"<f4", 0, 3},
		{"<f4", 40, 768},
		{"<f4", 300, 1000}, // payload over one read chunk
		{"<f2", 1, 1},
		{"<f2", 17, 3},
		{"<f2", 600, 1000},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%dx%d", tc.dtype, tc.rows, tc.dim), func(t *testing.T) {
			m := wideMatrix(rng, tc.rows, tc.dim)
			var buf bytes.Buffer
			require.NoError(t, writeNPY(&buf, m, tc.dtype))
			hlen := int(binary.LittleEndian.Uint16(buf.Bytes()[8:10]))
			assert.Zero(t, (10+hlen)%64, "payload must start 64-byte aligned")
			assert.Equal(t, byte('\n'), buf.Bytes()[10+hlen-1])

			want := m.Data
			if tc.dtype == "<f2" {
				want = make([]float32, len(m.Data))
				for i, v := range m.Data {
					want[i] = float16.ToFloat32(float16.Bits(v))
				}
			}
			for kind, r := range readers(buf.Bytes()) {
				if kind == "onebyte" && tc.rows*tc.dim > 10000 {
					continue
				}
				got, err := readNPYFrom(context.Background(), r)
				require.NoError(t, err, kind)
				assert.Equal(t, tc.rows, got.Rows, kind)
				assert.Equal(t, tc.dim, got.Dim, kind)
				assertSameBits(t, want, got.Data)
			}
		})
	}
}

// TestNPYHeaderBytes pins the header numpy writes for a (2, 3) float32 array:
// "\x93NUMPY\x01\x00v\x00{'descr': ..." with 118 header bytes.
func TestNPYHeaderBytes(t *testing.T) {
	h := npyHeaderBytes("<f4", 2, 3)
	assert.True(t, strings.HasPrefix(h, "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"+strings.Repeat(" ", 20)+" "), "%q", h)
	assert.True(t, strings.HasSuffix(h, " \n"), "%q", h)
	assert.Len(t, h, 128)
	assert.Equal(t, string(numpyNPYBytes(1, "<f4", []int64{2, 3})), h)
	for _, rows := range []int{0, 9, 10, 123456789, math.MaxInt32} {
		assert.Equal(t, string(numpyNPYBytes(1, "<f2", []int64{int64(rows), 77})), npyHeaderBytes("<f2", rows, 77))
	}
}

// TestNPYSequential: ReadNPY stops at the end of its payload, so arrays can
// follow each other in one stream.
func TestNPYSequential(t *testing.T) {
	rng := testkit.Rand(t)
	a, b := wideMatrix(rng, 3, 4), wideMatrix(rng, 2, 9)
	var buf bytes.Buffer
	require.NoError(t, writeNPY(&buf, a, "<f4"))
	require.NoError(t, writeNPY(&buf, b, "<f2"))
	r := streamOnly{&buf}
	got, err := readNPYFrom(context.Background(), r)
	require.NoError(t, err)
	assertSameBits(t, a.Data, got.Data)
	got, err = readNPYFrom(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, 2, got.Rows)
	assert.Equal(t, 9, got.Dim)
	_, err = readNPYFrom(context.Background(), r)
	assert.ErrorIs(t, err, ErrFormat)
}

func TestNPYHeaderVariants(t *testing.T) {
	rng := testkit.Rand(t)
	m := wideMatrix(rng, 5, 7)
	payload := le32(m.Data)
	half := le16(m.Data)
	cases := []struct {
		name    string
		file    []byte
		float16 bool
	}{
		{"numpy v1", append(numpyNPYBytes(1, "<f4", []int64{5, 7}), payload...), false},
		{"numpy v2", append(numpyNPYBytes(2, "<f4", []int64{5, 7}), payload...), false},
		{"numpy v3", append(numpyNPYBytes(3, "<f4", []int64{5, 7}), payload...), false},
		{"numpy v1 f2", append(numpyNPYBytes(1, "<f2", []int64{5, 7}), half...), true},
		{"no padding, no newline", buildNPY(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 7)}", payload), false},
		{"old numpy 16-byte padding", buildNPY(1, 0,
			"{'descr': '<f4', 'fortran_order': False, 'shape': (5, 7), }          \n", payload), false},
		{"keys reordered, double quotes", buildNPY(2, 0,
			`{"shape": (5, 7), "fortran_order": False, "descr": "<f4"}`+"\n", payload), false},
		{"python 2 longs", buildNPY(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (5L, 7L), }\n", payload), false},
		{"tight shape", buildNPY(1, 0, "{'descr':'<f4','fortran_order':False,'shape':(5,7)}", payload), false},
		{"trailing comma in shape", buildNPY(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 7,), }", payload), false},
		{"tabs and CRLF", buildNPY(3, 0, "{\t'descr': '<f4',\r\n 'fortran_order': False, 'shape': ( 5 , 7 ) }\r\n", payload), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := m.Data
			if tc.float16 {
				want = make([]float32, len(m.Data))
				for i, v := range m.Data {
					want[i] = float16.ToFloat32(float16.Bits(v))
				}
			}
			for kind, r := range readers(tc.file) {
				got, err := readNPYFrom(context.Background(), r)
				require.NoError(t, err, kind)
				assert.Equal(t, 5, got.Rows, kind)
				assert.Equal(t, 7, got.Dim, kind)
				assertSameBits(t, want, got.Data)
			}
		})
	}
}

func TestNPYMalformed(t *testing.T) {
	rng := testkit.Rand(t)
	payload := le32(wideMatrix(rng, 5, 7).Data)
	hdr := func(descr, fortran, shape string) string {
		return "{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape + ", }\n"
	}
	good := hdr("'<f4'", "False", "(5, 7)")
	cases := []struct {
		name string
		file []byte
		want []string
	}{
		{"empty", nil, []string{"too short", "0 bytes"}},
		{"short magic", []byte("\x93NUM"), []string{"too short", "4 bytes"}},
		{"wrong magic", append([]byte("\x93NUMPZ"), buildNPY(1, 0, good, payload)[6:]...), []string{"bad magic", `"\x93NUMPZ"`}},
		{"fvecs data", []byte{7, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, []string{"bad magic"}},
		{"version 4.0", buildNPY(3, 0, good, payload)[:6:6], []string{"too short"}},
		{"version 4.0 full", append([]byte("\x93NUMPY\x04\x00"), buildNPY(2, 0, good, payload)[8:]...), []string{"version 4.0", "1.0, 2.0 or 3.0"}},
		{"version 1.1", append([]byte("\x93NUMPY\x01\x01"), buildNPY(1, 0, good, payload)[8:]...), []string{"version 1.1"}},
		{"length field cut", []byte("\x93NUMPY\x02\x00\x10\x00"), []string{"header length field truncated"}},
		{"header cut", buildNPY(1, 0, good, nil)[:30], []string{"npy header truncated"}},
		{"header too long", append([]byte("\x93NUMPY\x02\x00"), 0, 0, 0, 0x80), []string{"exceeds", "limit"}},
		{"dtype f8", buildNPY(1, 0, hdr("'<f8'", "False", "(5, 7)"), payload), []string{"dtype '<f8'", "float32 ('<f4')", "float16 ('<f2')"}},
		{"dtype big-endian", buildNPY(1, 0, hdr("'>f4'", "False", "(5, 7)"), payload), []string{"dtype '>f4'", "little-endian"}},
		{"dtype int", buildNPY(1, 0, hdr("'<i4'", "False", "(5, 7)"), payload), []string{"dtype '<i4'"}},
		{"dtype structured", buildNPY(1, 0, hdr("[('x', '<f4')]", "False", "(5, 7)"), payload), []string{"dtype [('x', '<f4')]"}},
		{"fortran order", buildNPY(1, 0, hdr("'<f4'", "True", "(5, 7)"), payload), []string{"fortran_order is True", "C-order"}},
		{"fortran order not bool", buildNPY(1, 0, hdr("'<f4'", "1", "(5, 7)"), payload), []string{"fortran_order is 1"}},
		{"1-D", buildNPY(1, 0, hdr("'<f4'", "False", "(3,)"), payload), []string{"shape (3,) is 1-D", "2-D"}},
		{"3-D", buildNPY(1, 0, hdr("'<f4'", "False", "(5, 7, 1)"), payload), []string{"shape (5, 7, 1) is 3-D"}},
		{"0-D", buildNPY(1, 0, hdr("'<f4'", "False", "()"), payload), []string{"shape () is 0-D"}},
		{"parenthesised int", buildNPY(1, 0, hdr("'<f4'", "False", "(35)"), payload), []string{"shape 35 is not a tuple"}},
		{"shape list", buildNPY(1, 0, hdr("'<f4'", "False", "[5, 7]"), payload), []string{"shape [5, 7] is not a tuple"}},
		{"zero dim", buildNPY(1, 0, hdr("'<f4'", "False", "(5, 0)"), payload), []string{"shape (5, 0) has zero dim"}},
		{"negative", buildNPY(1, 0, hdr("'<f4'", "False", "(-5, 7)"), payload), []string{"(-5, 7)", "non-negative"}},
		{"shape overflow", buildNPY(1, 0, hdr("'<f4'", "False", "(4611686018427387904, 4611686018427387904)"), payload),
			[]string{"too large"}},
		{"int out of range", buildNPY(1, 0, hdr("'<f4'", "False", "(99999999999999999999, 7)"), payload),
			[]string{"99999999999999999999 out of range"}},
		{"payload truncated", buildNPY(1, 0, good, payload[:100]), []string{"payload truncated", "(5, 7)", "float32", "140 bytes", "100"}},
		{"payload truncated mid-value", buildNPY(1, 0, good, payload[:139]), []string{"payload truncated", "139"}},
		{"payload missing", buildNPY(1, 0, good, nil), []string{"payload truncated", "140 bytes", " 0"}},
		{"f2 payload truncated", buildNPY(1, 0, hdr("'<f2'", "False", "(5, 7)"), payload[:60]), []string{"float16", "70 bytes", "60"}},
		{"missing key", buildNPY(1, 0, "{'descr': '<f4', 'shape': (5, 7)}", payload), []string{"lacks key fortran_order"}},
		{"extra key", buildNPY(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 7), 'order': 'C'}", payload),
			[]string{"unexpected key order"}},
		{"duplicate key", buildNPY(1, 0, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (5, 7)}", payload),
			[]string{"duplicate key 'descr'"}},
		{"not a dict", buildNPY(1, 0, "('<f4', False, (5, 7))", payload), []string{"not a dict"}},
		{"garbage", buildNPY(1, 0, "{'descr': <f4>}", payload), []string{"cannot parse npy header", "unexpected"}},
		{"unterminated", buildNPY(1, 0, "{'descr': '<f4, 'fortran_order': False, 'shape': (5, 7)}", payload),
			[]string{"cannot parse"}},
		{"missing comma", buildNPY(1, 0, "{'descr': '<f4' 'fortran_order': False 'shape': (5, 7)}", payload), []string{"expected ','"}},
		{"unclosed", buildNPY(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 7)", payload), []string{"unexpected end"}},
		{"trailing junk", buildNPY(1, 0, good+"x", payload), []string{"after the literal"}},
		{"deep nesting", buildNPY(1, 0, strings.Repeat("(", 100), payload), []string{"nested deeper"}},
		{"empty header", buildNPY(1, 0, "", payload), []string{"unexpected end"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for kind, r := range readers(tc.file) {
				got, err := readNPYFrom(context.Background(), r)
				assert.Nil(t, got)
				requireFormatError(t, kind, err, append([]string{"npy stream"}, tc.want...)...)
			}
		})
	}
}

// TestNPYLyingHeader: a header promising 4 TB with a few bytes behind it
// must fail without allocating for the promise, on every kind of reader: as

// requireFormatError asserts err is a format error, as read through reader
// kind, whose message holds every one of want.
func requireFormatError(t *testing.T, kind string, err error, want ...string) {
	t.Helper()
	require.Error(t, err, kind)
	assert.True(t, errorIsFormat(err), "%s: %v does not wrap ErrFormat", kind, err)
	for _, w := range want {
		assert.Contains(t, err.Error(), w, kind)
	}
}

// truncated where the size is known, as over the stream cap where it is not.
func TestNPYLyingHeader(t *testing.T) {
	file := append(numpyNPYBytes(2, "<f4", []int64{1 << 30, 1 << 10}), make([]byte, 4000)...)
	for kind, r := range readers(file) {
		var err error
		alloc := allocatedDuring(func() { _, err = readNPYFrom(context.Background(), r) })
		require.Error(t, err, kind)
		assert.Contains(t, err.Error(), "4398046511104 bytes", kind)
		if kind == "sized" {
			assert.ErrorIs(t, err, ErrFormat)
			assert.Contains(t, err.Error(), "payload truncated")
		} else {
			assert.ErrorIs(t, err, ErrTooLarge, kind)
			assert.Contains(t, err.Error(), "4294967296-byte cap", kind)
		}
		assert.Less(t, alloc, uint64(8<<20), "%s: allocated %d bytes", kind, alloc)
	}
}

// TestNPYReaderErrors: failures of the underlying reader pass through as
// they are and are not reported as malformed data.
func TestNPYReaderErrors(t *testing.T) {
	rng := testkit.Rand(t)
	var buf bytes.Buffer
	require.NoError(t, writeNPY(&buf, wideMatrix(rng, 4, 4), "<f4"))
	for _, cut := range []int{0, 4, 9, 50, buf.Len() - 1} {
		r := io.MultiReader(bytes.NewReader(buf.Bytes()[:cut]), iotest.ErrReader(iotest.ErrTimeout))
		_, err := readNPYFrom(context.Background(), r)
		require.Error(t, err, "cut %d", cut)
		assert.ErrorIs(t, err, iotest.ErrTimeout, "cut %d", cut)
		assert.NotErrorIs(t, err, ErrFormat, "cut %d", cut)
	}
}

func TestWriteNPYErrors(t *testing.T) {
	rng := testkit.Rand(t)
	good := wideMatrix(rng, 2, 3)
	cases := []struct {
		name  string
		m     *Matrix
		dtype string
		want  string
	}{
		{"f8", good, "<f8", `unsupported dtype "<f8"`},
		{"empty dtype", good, "", `unsupported dtype ""`},
		{"nil", nil, "<f4", "matrix is nil"},
		{"zero dim", &Matrix{Rows: 2}, "<f4", "dim 0 must be positive"},
		{"long data", &Matrix{Rows: 1, Dim: 3, Data: good.Data}, "<f2", "6 values"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := writeNPY(&buf, tc.m, tc.dtype)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Zero(t, buf.Len(), "nothing may be written for a bad matrix")
		})
	}
	w := &failingWriter{after: 200}
	err := writeNPY(w, wideMatrix(rng, 100, 10), "<f4")
	assert.ErrorIs(t, err, errWriteFailed)
}

var errWriteFailed = fmt.Errorf("test writer: disk full")

type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.after {
		n := w.after
		w.after = 0
		return n, errWriteFailed
	}
	w.after -= len(p)
	return len(p), nil
}
