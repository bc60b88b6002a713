package host

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Matrix is a dense row-major float32 matrix as read from a data file: row i
// is Data[i*Dim:(i+1)*Dim]. It owns nothing but its slice; a reader returns a
// fresh one, and a writer only reads it.
type Matrix struct {
	Rows, Dim int
	Data      []float32
}

// Row returns row i as a slice into m.Data, capped at the row's end so that
// appending to it cannot overwrite row i+1. It panics if i is out of range,
// like a slice index would.
func (m *Matrix) Row(i int) []float32 {
	if i < 0 || i >= m.Rows {
		panic(fmt.Sprintf("host: Matrix.Row(%d) out of range [0, %d)", i, m.Rows))
	}
	lo, hi := i*m.Dim, (i+1)*m.Dim
	return m.Data[lo:hi:hi]
}

// validate says why m cannot be written; writers call it before emitting a
// single byte so that a bad matrix never leaves a half-written file behind.
func (m *Matrix) validate() error {
	switch {
	case m == nil:
		return errors.New("matrix is nil")
	case m.Rows < 0:
		return fmt.Errorf("matrix has %d rows", m.Rows)
	case m.Dim <= 0:
		return fmt.Errorf("matrix dim %d must be positive", m.Dim)
	case m.Rows > math.MaxInt/m.Dim:
		return fmt.Errorf("matrix shape %d×%d overflows int", m.Rows, m.Dim)
	case len(m.Data) != m.Rows*m.Dim:
		return fmt.Errorf("matrix holds %d values but %d rows × %d dim need %d",
			len(m.Data), m.Rows, m.Dim, m.Rows*m.Dim)
	}
	return nil
}

// ErrFormat is wrapped by every error that reports a malformed or unsupported
// data file (bad magic, unsupported dtype or shape, truncated payload, unknown
// extension, ...). Check it with errors.Is; the message names the file and the
// problem. I/O failures of the underlying reader are passed through instead.
var ErrFormat = errors.New("host: malformed data file")

// dataFileError is a parse failure in one named data file; it unwraps to
// ErrFormat.
type dataFileError struct {
	file    string // path, or a description such as "npy stream"
	problem string
}

func (e *dataFileError) Error() string {
	return fmt.Sprintf("host: malformed data file %s: %s", e.file, e.problem)
}

func (e *dataFileError) Unwrap() error { return ErrFormat }

func formatErrorf(file, format string, args ...any) error {
	return &dataFileError{file: file, problem: fmt.Sprintf(format, args...)}
}

// sourceName names r in error messages: a path for an *os.File (or anything
// with Name), otherwise what the stream is meant to hold.
func sourceName(r io.Reader, fallback string) string {
	if n, ok := r.(interface{ Name() string }); ok && n.Name() != "" {
		return fmt.Sprintf("%q", n.Name())
	}
	return fallback
}

// remainingBytes reports how many bytes r still holds when that is knowable
// without consuming it (a regular *os.File, *bytes.Reader, *strings.Reader,
// *bytes.Buffer), and -1 otherwise. Readers use it to reject a header that
// promises more data than exists before allocating for it.
func remainingBytes(r io.Reader) int64 {
	switch v := r.(type) {
	case *bytes.Reader:
		return int64(v.Len())
	case *strings.Reader:
		return int64(v.Len())
	case *bytes.Buffer:
		return int64(v.Len())
	case *os.File:
		fi, err := v.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return -1
		}
		pos, err := v.Seek(0, io.SeekCurrent)
		if err != nil || pos > fi.Size() {
			return -1
		}
		return fi.Size() - pos
	}
	return -1
}

// matrixReadChunk bounds how many bytes a reader decodes per step; with an
// unknown stream length, memory then grows only as fast as data arrives.
const matrixReadChunk = 1 << 20

// readFloat32s appends n little-endian float32 values (elemSize 4) or float16
// values (elemSize 2, widened exactly) from r to dst, reading at most
// matrixReadChunk bytes at a time. On a short stream it returns the number of
// payload bytes it did get together with io.ErrUnexpectedEOF.
func readFloat32s(r io.Reader, dst []float32, n int64, elemSize int, buf []byte) ([]float32, int64, error) {
	var got int64
	for n > 0 {
		step := min(n, int64(len(buf)/elemSize))
		b := buf[:step*int64(elemSize)]
		k, err := io.ReadFull(r, b)
		got += int64(k)
		whole := k / elemSize
		dst = decodeFloats(dst, b[:whole*elemSize], elemSize)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return dst, got, err
		}
		n -= step
	}
	return dst, got, nil
}

func decodeFloats(dst []float32, b []byte, elemSize int) []float32 {
	start := len(dst)
	dst = slices.Grow(dst, len(b)/elemSize)[:start+len(b)/elemSize]
	out := dst[start:]
	if elemSize == 2 {
		for i := range out {
			out[i] = Float16ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		}
		return dst
	}
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return dst
}

// matrixFormat is the file format chosen by extension.
type matrixFormat int

const (
	formatNPY matrixFormat = iota + 1
	formatFvecs
)

func formatOf(path string) (matrixFormat, error) {
	switch ext := filepath.Ext(path); strings.ToLower(ext) {
	case ".npy":
		return formatNPY, nil
	case ".fvecs":
		return formatFvecs, nil
	case "":
		return 0, formatErrorf(fmt.Sprintf("%q", path), "no file extension: want .npy or .fvecs")
	default:
		return 0, formatErrorf(fmt.Sprintf("%q", path), "unknown file extension %q: want .npy or .fvecs", ext)
	}
}

// ReadMatrixFile reads a whole .npy or .fvecs file, choosing the format by
// extension (case-insensitive). The file size is checked against the header
// before any large allocation, and bytes after the payload are an error. An
// unknown extension wraps ErrFormat; every error names the path.
func ReadMatrixFile(path string) (*Matrix, error) {
	format, err := formatOf(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("host: read matrix: %w", err)
	}
	defer f.Close()
	name := fmt.Sprintf("%q", path)
	avail := remainingBytes(f)
	br := bufio.NewReaderSize(f, 64<<10)
	var m *Matrix
	switch format {
	case formatNPY:
		m, err = readNPY(br, name, avail)
	case formatFvecs:
		m, err = readFvecs(br, name, avail)
	}
	if err != nil {
		return nil, err
	}
	if format == formatNPY {
		if n, _ := io.Copy(io.Discard, io.LimitReader(br, 1<<20)); n > 0 {
			return nil, formatErrorf(name, "%s bytes of trailing data after the npy payload", atLeast(n, 1<<20))
		}
	}
	return m, nil
}

func atLeast(n, limit int64) string {
	if n >= limit {
		return fmt.Sprintf("at least %d", n)
	}
	return fmt.Sprint(n)
}

// WriteMatrixFile writes m to path in the format its extension names (.npy or
// .fvecs). dtype applies to .npy only ("<f4", "<f2", or "" for "<f4"); .fvecs
// always stores float32 and accepts only "" or "<f4". The file is written
// beside path under a temporary name and renamed into place, so a failed write
// never leaves a truncated file at path.
func WriteMatrixFile(path string, m *Matrix, dtype string) error {
	format, err := formatOf(path)
	if err != nil {
		return err
	}
	if dtype == "" {
		dtype = npyFloat32
	}
	switch {
	case format == formatNPY && dtype != npyFloat32 && dtype != npyFloat16:
		return fmt.Errorf("host: write %q: unsupported npy dtype %q: want %q or %q", path, dtype, npyFloat32, npyFloat16)
	case format == formatFvecs && dtype != npyFloat32:
		return fmt.Errorf("host: write %q: fvecs stores float32 only, cannot write dtype %q", path, dtype)
	}
	if err := m.validate(); err != nil {
		return fmt.Errorf("host: write %q: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("host: write %q: %w", path, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 64<<10)
	switch format {
	case formatNPY:
		err = WriteNPY(bw, m, dtype)
	case formatFvecs:
		err = WriteFvecs(bw, m)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Close()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("host: write %q: %w", path, err)
	}
	done = true
	return nil
}
