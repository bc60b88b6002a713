package host

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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
		return nil, nil, fmt.Errorf("host: read %q: %w", path, err)
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
// ReadIvecs or ReadIDsFile. An unknown extension wraps ErrFormat; every error
// names the path. ctx is checked between pieces of at most 1 MiB, so a
// cancelled load stops promptly and returns ctx's error, wrapped.
func ReadMatrixFile(ctx context.Context, path string, opts ...Option) (*Matrix, error) {
	format, err := formatOf(path)
	if err != nil {
		return nil, err
	}
	if format == formatIvecs {
		return nil, formatErrorf(fmt.Sprintf("%q", path),
			".ivecs holds int32 values, not vectors to search: read it with ReadIvecs (ground truth) or ReadIDsFile (IDs)")
	}
	s, closeFile, err := openSource(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	defer closeFile()
	var m *Matrix
	switch format {
	case formatNPY:
		if m, err = readNPY(s); err == nil {
			err = noTrailingData(s, "npy payload")
		}
	case formatFvecs:
		m, err = readFvecs(s)
	case formatBvecs:
		m, err = readBvecs(s)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
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

// WriteMatrixFile writes m to path in the format its extension names (.npy or
// .fvecs). dtype applies to .npy only ("<f4", "<f2", or "" for "<f4"); .fvecs
// always stores float32 and accepts only "" or "<f4". The file is written
// with WriteFileAtomic: a failed write never leaves a truncated file at path,
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
		return fmt.Errorf("host: write %q: %s is not supported for writing: write .npy or .fvecs", path, filepath.Ext(path))
	case format == formatNPY && dtype != npyFloat32 && dtype != npyFloat16:
		return fmt.Errorf("host: write %q: unsupported npy dtype %q: want %q or %q", path, dtype, npyFloat32, npyFloat16)
	case format == formatFvecs && dtype != npyFloat32:
		return fmt.Errorf("host: write %q: fvecs stores float32 only, cannot write dtype %q", path, dtype)
	}
	if err := m.validate(); err != nil {
		return fmt.Errorf("host: write %q: %w", path, err)
	}
	err = WriteFileAtomic(path, 0o644, func(w io.Writer) error {
		if format == formatNPY {
			return WriteNPY(w, m, dtype)
		}
		return WriteFvecs(w, m)
	})
	if err != nil {
		return fmt.Errorf("host: write %q: %w", path, err)
	}
	return nil
}
