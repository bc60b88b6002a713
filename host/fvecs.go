package host

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// The .fvecs format (from the TEXMEX/SIFT benchmark sets): each vector is an
// int32 little-endian dim d followed by d float32 little-endian values. There
// is no file header, so a file with no vectors carries no dim either.

// ReadFvecs reads .fvecs records from r until EOF. All vectors must share one
// dim, which must be positive; an empty stream is an error ("no vectors")
// because it has no dim to report. Values are kept as stored.
//
// Every malformed input (truncated record, dim <= 0, a dim differing from
// vector 0's, empty stream) returns an error wrapping ErrFormat that names
// the vector index. Memory grows only as records actually arrive (or, for an
// *os.File or in-memory reader, is bounded by the bytes left), so a lying dim
// field cannot force a huge allocation.
func ReadFvecs(r io.Reader) (*Matrix, error) {
	name := sourceName(r, "fvecs stream")
	avail := remainingBytes(r)
	if _, ok := r.(io.ByteReader); !ok {
		r = bufio.NewReaderSize(r, 64<<10) // records are small: avoid a read call per field
	}
	return readFvecs(r, name, avail)
}

// readFvecs reads records from r until EOF; name labels errors, and avail is
// how many bytes r holds (-1 when unknown).
func readFvecs(r io.Reader, name string, avail int64) (*Matrix, error) {
	var field [4]byte
	// readDim returns the dim field of vector i, or ok false at a clean EOF.
	readDim := func(i int) (d int64, ok bool, err error) {
		n, err := io.ReadFull(r, field[:])
		switch {
		case err == nil:
			return int64(int32(binary.LittleEndian.Uint32(field[:]))), true, nil
		case errors.Is(err, io.EOF) && n == 0:
			return 0, false, nil
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return 0, false, formatErrorf(name, "vector %d truncated: dim field has %d of 4 bytes", i, n)
		}
		return 0, false, fmt.Errorf("host: read %s: %w", name, err)
	}

	dim, ok, err := readDim(0)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, formatErrorf(name, "no vectors: the fvecs data is empty")
	}
	if dim <= 0 {
		return nil, formatErrorf(name, "vector 0: dim %d must be positive", dim)
	}
	record := 4 + 4*dim // no overflow: dim < 2^31
	capacity := min(dim, matrixReadChunk/4)
	if avail >= 0 {
		capacity = avail / record * dim // what the bytes there can fill, no more
	}
	data := make([]float32, 0, capacity)
	buf := make([]byte, min(4*dim, matrixReadChunk)+4)

	for i := 0; ; i++ {
		if i > 0 {
			d, ok, err := readDim(i)
			if err != nil {
				return nil, err
			}
			if !ok {
				return &Matrix{Rows: i, Dim: int(dim), Data: data}, nil
			}
			if d <= 0 {
				return nil, formatErrorf(name, "vector %d: dim %d must be positive", i, d)
			}
			if d != dim {
				return nil, formatErrorf(name, "vector %d has dim %d, but vector 0 has dim %d", i, d, dim)
			}
		}
		var got int64
		data, got, err = readFloat32s(r, data, dim, 4, buf)
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, formatErrorf(name, "vector %d truncated: dim %d needs %d bytes of values, got %d",
					i, dim, 4*dim, got)
			}
			return nil, fmt.Errorf("host: read %s: %w", name, err)
		}
	}
}

// WriteFvecs writes every row of m as one .fvecs record. It refuses a matrix
// with no rows, since the result could not be read back (no dim to report),
// and a dim that does not fit the format's int32 field.
func WriteFvecs(w io.Writer, m *Matrix) error {
	if err := m.validate(); err != nil {
		return fmt.Errorf("host: write fvecs: %w", err)
	}
	if m.Rows == 0 {
		return errors.New("host: write fvecs: matrix has no rows, and an empty fvecs file cannot say its dim")
	}
	if m.Dim > math.MaxInt32 {
		return fmt.Errorf("host: write fvecs: dim %d does not fit the int32 dim field", m.Dim)
	}
	const chunk = 64 << 10 // bytes per write, give or take a row
	buf := make([]byte, 0, min(chunk, m.Rows*(4+4*m.Dim))+4)
	for i := 0; i < m.Rows; i++ {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(m.Dim))
		for _, f := range m.Row(i) {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
			if len(buf) >= chunk {
				if _, err := w.Write(buf); err != nil {
					return fmt.Errorf("host: write fvecs: %w", err)
				}
				buf = buf[:0]
			}
		}
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("host: write fvecs: %w", err)
	}
	return nil
}
