package host

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// The TEXMEX formats (the SIFT/GIST/BIGANN benchmark sets): each vector is
// an int32 little-endian dim d followed by d components, float32 in .fvecs,
// uint8 in .bvecs, int32 in .ivecs, all little-endian. There is no file
// header, so a file with no vectors carries no dim either.

// readFvecsFrom reads .fvecs records from r until EOF. All vectors must share one
// dim, which must be positive; an empty stream is an error ("no vectors")
// because it has no dim to report. Values are kept as stored.
//
// Every malformed input (truncated record, dim <= 0, a dim differing from
// vector 0's, empty stream) returns an error wrapping ErrFormat that names
// the vector index and its byte offset. Memory grows only as records
// actually arrive (or, for a regular *os.File or in-memory reader, is bounded
// by the bytes left), so a lying dim field cannot force a huge allocation; a
// source of unknown size that needs more than the stream cap fails with
// ErrTooLarge. ctx is checked between pieces of at most 1 MiB.
func readFvecsFrom(ctx context.Context, r io.Reader, opts ...Option) (*Matrix, error) {
	return readFvecs(vecsSource(ctx, r, "fvecs", opts))
}

func readFvecs(s *source) (*Matrix, error) {
	rows, dim, data, err := readVecs(s, "fvecs", 4, rawFloat32s)
	if err != nil {
		return nil, err
	}
	return &Matrix{Rows: rows, Dim: dim, Data: data}, nil
}

// readBvecsFrom reads .bvecs records (uint8 components) from r until EOF, each
// component widened to float32 exactly (0 to 255). Errors, sizes and ctx are
// treated as by readFvecsFrom.
func readBvecsFrom(ctx context.Context, r io.Reader, opts ...Option) (*Matrix, error) {
	return readBvecs(vecsSource(ctx, r, "bvecs", opts))
}

func readBvecs(s *source) (*Matrix, error) {
	rows, dim, data, err := readVecs(s, "bvecs", 1, func(dst []float32, b []byte) {
		for i := range dst {
			dst[i] = float32(b[i])
		}
	})
	if err != nil {
		return nil, err
	}
	return &Matrix{Rows: rows, Dim: dim, Data: data}, nil
}

// readIvecsFrom reads .ivecs records (int32 components) from r until EOF: most
// often ground-truth lists, one row of neighbour IDs per query. Errors, sizes
// and ctx are treated as by readFvecsFrom.
func readIvecsFrom(ctx context.Context, r io.Reader, opts ...Option) (*intMatrix, error) {
	return readIvecs(vecsSource(ctx, r, "ivecs", opts))
}

func readIvecs(s *source) (*intMatrix, error) {
	rows, dim, data, err := readVecs(s, "ivecs", 4, decodeInt32s)
	if err != nil {
		return nil, err
	}
	return &intMatrix{Rows: rows, Dim: dim, Data: data}, nil
}

func vecsSource(ctx context.Context, r io.Reader, kind string, opts []Option) *source {
	name := sourceName(r, kind+" stream")
	size := remainingBytes(r)
	if _, ok := r.(io.ByteReader); !ok {
		r = bufio.NewReaderSize(r, 64<<10) // records are small: avoid a read call per field
	}
	return newSource(ctx, r, name, size, opts)
}

// rawFloat32s is decodeFloat32s where the file's bytes can be the
// values' own: nil (read in place, see readValues) on a little-endian host.
var rawFloat32s = func() func([]float32, []byte) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		return nil
	}
	return decodeFloat32s
}()

func decodeFloat32s(dst []float32, b []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

func decodeInt32s(dst []int32, b []byte) {
	for i := range dst {
		dst[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// readVecs reads records of elem-byte components from s until EOF; kind
// ("fvecs", ...) labels messages.
func readVecs[T any](s *source, kind string, elem int, decode func([]T, []byte)) (rows, dim int, data []T, err error) {
	v, err := openVecs(s, kind, elem, decode)
	if err != nil {
		return 0, 0, nil, err
	}
	if data, err = readAll(v, v.known()); err != nil {
		return 0, 0, nil, err
	}
	return v.row, int(v.dim), data, nil
}

// vecsValues reads the records of a .fvecs, .bvecs or .ivecs source a
// piece at a time, checking each record's dim field against vector 0's.
type vecsValues[T any] struct {
	s      *source
	kind   string
	elem   int
	decode func([]T, []byte)
	dim    int64 // vector 0's
	record int64 // bytes of one record, dim field included
	row    int   // the vector being read, or the next one
	inRow  bool  // row's dim field is read
	col    int64 // values of row read
	at     int64 // byte offset of row's dim field
	ended  bool
	field  [4]byte
}

// openVecs reads and checks vector 0's dim field: an empty source, a dim
// that is not positive, or (on a stream) one whose values would pass the
// cap is an error before any value is read.
func openVecs[T any](s *source, kind string, elem int, decode func([]T, []byte)) (*vecsValues[T], error) {
	v := &vecsValues[T]{s: s, kind: kind, elem: elem, decode: decode}
	d0, ok, err := v.readDim()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, formatErrorf(s.name, "no vectors: the %s data is empty", kind)
	}
	if d0 <= 0 {
		return nil, formatErrorf(s.name, "vector 0: dim %d must be positive", d0)
	}
	v.dim, v.record, v.inRow = d0, 4+int64(elem)*d0, true // no overflow: d0 < 2^31
	if s.size < 0 && v.record-4 > s.limit-s.off {
		// Refused before a byte of it is read: a stream can only say it is
		// truncated at its end, and getting there could cost the whole cap.
		return nil, s.tooLarge(fmt.Sprintf("vector 0: dim %d claims %d bytes of values (is this %s data?)",
			d0, v.record-4, kind))
	}
	if s.size >= 0 && v.record > s.size {
		// Not one whole record: say so now, before a caller sizes
		// anything by a dim the file cannot hold.
		return nil, formatErrorf(s.name, "vector 0 truncated: dim %d needs %d bytes of values, got %d; at byte 0",
			d0, v.record-4, s.size-4)
	}
	return v, nil
}

// rows is how many whole records the source's size allows (bytes past
// them are an error when they are read), or -1 when the size is unknown.
func (v *vecsValues[T]) rows() int64 {
	if v.s.size < 0 {
		return -1
	}
	return v.s.size / v.record
}

// known is how many values to allocate for at once: what the bytes there
// can fill, or -1 when the size is unknown.
func (v *vecsValues[T]) known() int64 {
	if r := v.rows(); r >= 0 {
		return r * v.dim
	}
	return -1
}

// readDim reads the dim field of vector v.row, with ok false at a clean EOF.
func (v *vecsValues[T]) readDim() (d int64, ok bool, err error) {
	s := v.s
	v.at = s.off
	n, err := s.readFull(v.field[:])
	switch {
	case err == nil:
		return int64(int32(binary.LittleEndian.Uint32(v.field[:]))), true, nil
	case errors.Is(err, io.EOF) && n == 0:
		return 0, false, nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return 0, false, formatErrorf(s.name, "vector %d truncated: dim field has %d of 4 bytes, at byte %d", v.row, n, v.at)
	}
	return 0, false, s.ioError(err)
}

func (v *vecsValues[T]) read(dst []T) (int, error) {
	s := v.s
	n := 0
	for {
		if v.ended {
			return n, io.EOF
		}
		if !v.inRow {
			if n == len(dst) && n > 0 {
				return n, nil
			}
			if err := s.checkpoint(); err != nil {
				return n, s.ioError(err)
			}
			d, ok, err := v.readDim()
			if err != nil {
				return n, err
			}
			if !ok {
				v.ended = true
				continue
			}
			if d <= 0 {
				return n, formatErrorf(s.name, "vector %d: dim %d must be positive, at byte %d", v.row, d, v.at)
			}
			if d != v.dim {
				return n, formatErrorf(s.name, "vector %d has dim %d, but vector 0 has dim %d; at byte %d", v.row, d, v.dim, v.at)
			}
			v.inRow, v.col = true, 0
		}
		if n == len(dst) {
			return n, nil
		}
		k := int(min(int64(len(dst)-n), v.dim-v.col))
		got, err := readSlice(s, dst[n:n+k], v.elem, v.decode)
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return n, formatErrorf(s.name, "vector %d truncated: dim %d needs %d bytes of values, got %d; at byte %d",
					v.row, v.dim, v.record-4, v.col*int64(v.elem)+got, v.at)
			}
			return n, s.ioError(err)
		}
		n += k
		if v.col += int64(k); v.col == v.dim {
			v.inRow = false
			v.row++
		}
	}
}

// writeFvecs writes every row of m as one .fvecs record. It refuses a matrix
// with no rows, since the result could not be read back (no dim to report),
// and a dim that does not fit the format's int32 field.
func writeFvecs(w io.Writer, m *Matrix) error {
	if err := m.validate(); err != nil {
		return fmt.Errorf("write fvecs: %w", err)
	}
	if m.Rows == 0 {
		return errors.New("write fvecs: matrix has no rows, and an empty fvecs file cannot say its dim")
	}
	if m.Dim > math.MaxInt32 {
		return fmt.Errorf("write fvecs: dim %d does not fit the int32 dim field", m.Dim)
	}
	const chunk = 64 << 10 // bytes per write, give or take a row
	buf := make([]byte, 0, min(chunk, m.Rows*(4+4*m.Dim))+4)
	for i := 0; i < m.Rows; i++ {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(m.Dim))
		for _, f := range m.Row(i) {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
			if len(buf) >= chunk {
				if _, err := w.Write(buf); err != nil {
					return fmt.Errorf("write fvecs: %w", err)
				}
				buf = buf[:0]
			}
		}
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("write fvecs: %w", err)
	}
	return nil
}
