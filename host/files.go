package host

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/umbravec/umbra/internal/atomicfile"
)

// fileFormat is the file format chosen by extension.
type fileFormat int

const (
	formatNPY fileFormat = iota + 1
	formatFvecs
	formatBvecs
	formatIvecs
)

func formatOf(path string) (fileFormat, error) {
	switch ext := filepath.Ext(path); strings.ToLower(ext) {
	case ".npy":
		return formatNPY, nil
	case ".fvecs":
		return formatFvecs, nil
	case ".bvecs":
		return formatBvecs, nil
	case ".ivecs":
		return formatIvecs, nil
	case "":
		return 0, formatErrorf(fmt.Sprintf("%q", path), "no file extension: want .npy, .fvecs, .bvecs or .ivecs")
	default:
		return 0, formatErrorf(fmt.Sprintf("%q", path), "unknown file extension %q: want .npy, .fvecs, .bvecs or .ivecs", ext)
	}
}

// openSource opens path for one of the readers. A regular file is read no
// further than the size stat gives, which the readers check every header
// against before allocating; anything else (a FIFO, /dev/stdin, a device)
// is a stream under the cap.
func openSource(ctx context.Context, path string, opts []Option) (*source, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read %q: %w", path, err)
	}
	var r io.Reader = f
	size := remainingBytes(f)
	if size >= 0 {
		r = io.LimitReader(f, size)
	}
	return newSource(ctx, bufio.NewReaderSize(r, 64<<10), fmt.Sprintf("%q", path), size, opts), f.Close, nil
}

// ReadMatrixFile reads a whole .npy, .fvecs or .bvecs file as float32,
// choosing the format by extension (case-insensitive). A regular file's size
// is checked against its header before any large allocation, and bytes after
// an .npy payload are an error; a FIFO or other stream is read in bounded
// pieces up to the stream cap (see MaxStreamBytes). .ivecs holds integers
// that float32 cannot all represent, so it is refused here: read it with
// ReadIDsFile. An unknown extension wraps ErrFormat; every error
// names the path. ctx is checked between pieces of at most 1 MiB, so a
// cancelled load stops promptly and returns ctx's error, wrapped.
//
// It is OpenMatrixFile read to the end into one Matrix.
func ReadMatrixFile(ctx context.Context, path string, opts ...Option) (*Matrix, error) {
	r, err := OpenMatrixFile(ctx, path, opts...)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := readAll[float32](r.vals, r.known)
	if err != nil {
		return nil, err
	}
	return &Matrix{Rows: len(data) / r.dim, Dim: r.dim, Data: data}, nil
}

// ReadMatrix reads a whole .npy, .fvecs or .bvecs matrix from r, as float32:
// format is the extension a file of it would have (".npy", ".fvecs" or
// ".bvecs", case-insensitive, the dot optional). It accepts and refuses what
// ReadMatrixFile does for that format (the package doc lists both), with the
// same errors, named after r (a file's path, or the format). When r is an
// *os.File (regular), *bytes.Reader, *strings.Reader, *bytes.Buffer or
// *io.SectionReader, a header's claims are checked against the bytes left
// before anything is allocated for them; from any other reader memory grows
// only as bytes arrive, and past the stream cap (MaxStreamBytes) the read
// fails with ErrTooLarge. An .npy payload must end the stream. ctx is
// checked between pieces of at most 1 MiB.
func ReadMatrix(ctx context.Context, r io.Reader, format string, opts ...Option) (*Matrix, error) {
	f, err := formatNamed(format)
	if err != nil {
		return nil, err
	}
	switch f {
	case formatNPY:
		return readNPYFrom(ctx, r, opts...)
	case formatFvecs:
		return readFvecsFrom(ctx, r, opts...)
	case formatBvecs:
		return readBvecsFrom(ctx, r, opts...)
	}
	return nil, formatErrorf(format, ".ivecs holds int32 values, not vectors to search: read IDs with ReadIDsFile")
}

// formatNamed is the format a ReadMatrix or WriteMatrix caller names by
// its extension, with or without the dot.
func formatNamed(format string) (fileFormat, error) {
	if format == "" {
		return 0, formatErrorf("matrix", "no format: want .npy, .fvecs or .bvecs")
	}
	if !strings.HasPrefix(format, ".") {
		format = "." + format
	}
	return formatOf("matrix" + format)
}

// MatrixReader reads the rows of a .npy, .fvecs or .bvecs file a piece at
// a time, as float32, for a caller that stores them as they come instead of
// holding the whole file first (it is an umbra.RowSource for Index.Add).
// It checks what ReadMatrixFile checks, with the same errors: the header
// when it is opened, every row as it is read, and, at the end, that
// nothing follows the data. It is not safe for concurrent use.
type MatrixReader struct {
	name  string
	dim   int
	rows  int   // -1 when unknown
	known int64 // values to allocate for at once, -1 when unknown
	vals  valueReader[float32]
	close func() error
	err   error // the first error ReadRows returned, returned again
}

// OpenMatrixFile opens path (.npy of float32 or float16, .fvecs or .bvecs,
// by extension as ReadMatrixFile) and reads its header: for .npy the
// dtype, shape and, on a regular file, that the file holds the payload the
// shape claims; for .fvecs and .bvecs vector 0's dim field. Any problem is
// an error naming the path, as from ReadMatrixFile. ctx is checked between
// pieces of at most 1 MiB for as long as the reader is used. Close it when
// done.
func OpenMatrixFile(ctx context.Context, path string, opts ...Option) (*MatrixReader, error) {
	format, err := formatOf(path)
	if err != nil {
		return nil, err
	}
	if format == formatIvecs {
		return nil, formatErrorf(fmt.Sprintf("%q", path),
			".ivecs holds int32 values, not vectors to search: read IDs with ReadIDsFile")
	}
	s, closeFile, err := openSource(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	r := &MatrixReader{name: s.name, rows: -1, known: -1, close: closeFile}
	switch format {
	case formatNPY:
		var v *npyValues[float32]
		if v, err = openNPYMatrix(s); err == nil {
			v.trailing = true
			r.vals, r.dim, r.known = v, v.dim, v.known()
			if r.known >= 0 {
				r.rows = v.rows
			}
		}
	case formatFvecs, formatBvecs:
		var v *vecsValues[float32]
		if format == formatFvecs {
			v, err = openVecs(s, "fvecs", 4, rawFloat32s)
		} else {
			v, err = openVecs(s, "bvecs", 1, func(dst []float32, b []byte) {
				for i := range dst {
					dst[i] = float32(b[i])
				}
			})
		}
		if err == nil {
			r.vals, r.dim, r.known = v, int(v.dim), v.known()
			r.rows = int(v.rows())
		}
	}
	if err != nil {
		closeFile()
		return nil, err
	}
	return r, nil
}

// Dim is the dimension of every row.
func (r *MatrixReader) Dim() int { return r.dim }

// Rows is how many rows the file holds when its size is known (a regular
// file: the shape of an .npy, checked against the size; for .fvecs and
// .bvecs what the size allows, a short last record being an error when it
// is read), and -1 when it is not (a FIFO, a pipe): then the rows are
// known only once ReadRows returns io.EOF.
func (r *MatrixReader) Rows() int { return r.rows }

// ReadRows reads the next rows into dst, as many whole rows as fit
// (len(dst)/Dim, which must be at least one), and returns how many it
// read: fewer only at the end of the file. Once every row is read, and
// nothing is found after them, it returns 0 and io.EOF. Any other error
// names the file (and the vector, for .fvecs and .bvecs) and is returned
// again by every later call; dst's contents are then undefined.
//
// An empty dst reads no row but asks whether one remains: 0 and io.EOF at
// the end (after the checks there), 0 and nil when more follows.
func (r *MatrixReader) ReadRows(dst []float32) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.vals == nil {
		return 0, fmt.Errorf("read %s: reader is closed", r.name)
	}
	k := len(dst) / r.dim
	if k == 0 && len(dst) > 0 {
		return 0, fmt.Errorf("read %s: ReadRows needs room for one row of %d values, has %d", r.name, r.dim, len(dst))
	}
	n, err := r.vals.read(dst[:k*r.dim])
	if err != nil && (!errors.Is(err, io.EOF) || n == 0) {
		r.err = err
		return 0, err
	}
	return n / r.dim, nil
}

// Close closes the file. Reading after Close is an error.
func (r *MatrixReader) Close() error {
	if r.vals == nil {
		return nil
	}
	r.vals = nil
	return r.close()
}

// ReadIDsFile reads IDs from path: a 1-D .npy of int64 or uint64 (see
// ReadIDs), or an .ivecs file of one component per row. A negative ID is an
// error naming its index; so is an .ivecs row of any other dim. Sizes, the
// stream cap and ctx are treated as by ReadMatrixFile.
func ReadIDsFile(ctx context.Context, path string, opts ...Option) ([]uint64, error) {
	format, err := formatOf(path)
	if err != nil {
		return nil, err
	}
	if format != formatNPY && format != formatIvecs {
		return nil, formatErrorf(fmt.Sprintf("%q", path), "IDs come in .npy (int64, uint64) or .ivecs files, not %s", filepath.Ext(path))
	}
	s, closeFile, err := openSource(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	defer closeFile()
	if format == formatNPY {
		ids, err := readNPYIDs(s)
		if err == nil {
			err = noTrailingData(s, "npy payload")
		}
		if err != nil {
			return nil, err
		}
		return ids, nil
	}
	m, err := readIvecs(s)
	if err != nil {
		return nil, err
	}
	if m.Dim != 1 {
		return nil, formatErrorf(s.name, "ivecs rows have dim %d: an ID file holds one ID per row", m.Dim)
	}
	ids := make([]uint64, len(m.Data))
	for i, id := range m.Data {
		if id < 0 {
			return nil, formatErrorf(s.name, "vector %d holds ID %d: IDs must be non-negative", i, id)
		}
		ids[i] = uint64(id)
	}
	return ids, nil
}

// noTrailingData refuses bytes after a payload that should end the file.
func noTrailingData(s *source, after string) error {
	if left := s.left(); left >= 0 {
		if left > 0 {
			return formatErrorf(s.name, "%d bytes of trailing data after the %s", left, after)
		}
		return nil
	}
	n, err := io.Copy(io.Discard, io.LimitReader(s.r, 1<<20))
	if n > 0 {
		return formatErrorf(s.name, "%s bytes of trailing data after the %s", atLeast(n, 1<<20), after)
	}
	if err != nil {
		return s.ioError(err)
	}
	return nil
}

func atLeast(n, limit int64) string {
	if n >= limit {
		return fmt.Sprintf("at least %d", n)
	}
	return fmt.Sprint(n)
}

// WriteMatrix writes m to w in format (".npy" or ".fvecs", the dot
// optional): an .npy of dtype "<f4" (float32, also for "") or "<f2"
// (float16, rounded to nearest even with overflow to ±Inf, as numpy does),
// its header byte for byte what numpy.save writes; or .fvecs records,
// float32 only ("" or "<f4"), refused for a matrix with no rows (an empty
// .fvecs file has no dim to report) or a dim past the format's int32 field.
func WriteMatrix(w io.Writer, m *Matrix, format, dtype string) error {
	f, err := formatNamed(format)
	if err != nil {
		return err
	}
	if dtype == "" {
		dtype = npyFloat32
	}
	switch {
	case f == formatNPY:
		return writeNPY(w, m, dtype)
	case f != formatFvecs:
		return fmt.Errorf("write: %s is not supported for writing: write .npy or .fvecs", format)
	case dtype != npyFloat32:
		return fmt.Errorf("write fvecs: fvecs stores float32 only, cannot write dtype %q", dtype)
	}
	return writeFvecs(w, m)
}

// WriteMatrixFile writes m to path in the format its extension names (.npy or
// .fvecs). dtype applies to .npy only ("<f4", "<f2", or "" for "<f4"); .fvecs
// always stores float32 and accepts only "" or "<f4". The file is written
// atomically (a temporary file renamed over path): a failed write never leaves a truncated file at path,
// an existing file keeps its permissions, and a symlink at path is written
// through.
func WriteMatrixFile(path string, m *Matrix, dtype string) error {
	format, err := formatOf(path)
	if err != nil {
		return err
	}
	if dtype == "" {
		dtype = npyFloat32
	}
	switch {
	case format == formatBvecs || format == formatIvecs:
		return fmt.Errorf("write %q: %s is not supported for writing: write .npy or .fvecs", path, filepath.Ext(path))
	case format == formatNPY && dtype != npyFloat32 && dtype != npyFloat16:
		return fmt.Errorf("write %q: unsupported npy dtype %q: want %q or %q", path, dtype, npyFloat32, npyFloat16)
	case format == formatFvecs && dtype != npyFloat32:
		return fmt.Errorf("write %q: fvecs stores float32 only, cannot write dtype %q", path, dtype)
	}
	if err := m.validate(); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	err = atomicfile.Write(path, 0o644, func(w io.Writer) error {
		if format == formatNPY {
			return writeNPY(w, m, dtype)
		}
		return writeFvecs(w, m)
	})
	if err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}
