package host

import (
	"errors"
	"fmt"
	"math"
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
var ErrFormat = errors.New("malformed data file")

// dataFileError is a problem with one named data file; it unwraps to kind,
// ErrFormat when kind is nil.
type dataFileError struct {
	file    string // path, or a description such as "npy stream"
	kind    error  // ErrTooLarge, or nil for ErrFormat
	problem string
}

func (e *dataFileError) Error() string {
	if e.kind != nil {
		return fmt.Sprintf("data file %s too large: %s", e.file, e.problem)
	}
	return fmt.Sprintf("malformed data file %s: %s", e.file, e.problem)
}

func (e *dataFileError) Unwrap() error {
	if e.kind != nil {
		return e.kind
	}
	return ErrFormat
}

func formatErrorf(file, format string, args ...any) error {
	return &dataFileError{file: file, problem: fmt.Sprintf(format, args...)}
}

// intMatrix is a dense row-major int32 matrix as read from an .ivecs file:
// ground-truth lists (row i holds the IDs of query i's nearest neighbours,
// best first) or any other integer vectors. Row i is Data[i*Dim:(i+1)*Dim].
type intMatrix struct {
	Rows, Dim int
	Data      []int32
}

// Row returns row i as a slice into m.Data, capped at the row's end. It
// panics if i is out of range, like a slice index would.
func (m *intMatrix) Row(i int) []int32 {
	if i < 0 || i >= m.Rows {
		panic(fmt.Sprintf("host: intMatrix.Row(%d) out of range [0, %d)", i, m.Rows))
	}
	lo, hi := i*m.Dim, (i+1)*m.Dim
	return m.Data[lo:hi:hi]
}
