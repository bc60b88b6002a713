package host

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"

	"github.com/umbravec/umbra/internal/float16"
)

// The .npy format (numpy/lib/format.py): the magic "\x93NUMPY", a major and
// minor version byte, the header length (uint16 LE in 1.0, uint32 LE in 2.0
// and 3.0), then a Python dict literal padded with spaces and ended by '\n',
// then the raw array bytes.
const (
	npyMagic     = "\x93NUMPY"
	npyFloat32   = "<f4"
	npyFloat16   = "<f2"
	npyInt64     = "<i8"
	npyUint64    = "<u8"
	npyAlign     = 64 // numpy aligns the payload start to 64 bytes
	npyGrowPad   = 21 // numpy's GROWTH_AXIS_MAX_DIGITS: room to rewrite the shape in place
	npyMaxHeader = 1 << 20
	npyMaxDepth  = 32
)

// readNPYFrom reads a 2-D, C-order, little-endian .npy array of dtype '<f4'
// (float32) or '<f2' (float16, widened to float32 exactly), in format version
// 1.0, 2.0 or 3.0. It consumes exactly the header and the payload, so several
// arrays may follow each other in one stream. Values are kept as stored, NaN
// and Inf included: validating them is the engine's job.
//
// Every malformed or unsupported input (magic, version, dtype, Fortran order,
// shape other than 2-D, a zero dim, a truncated payload, an unparsable header)
// returns an error wrapping ErrFormat. When r is an *os.File (regular),
// *bytes.Reader, *strings.Reader, *bytes.Buffer or *io.SectionReader, the
// header's size is checked against the bytes left before anything is
// allocated; from any other reader memory grows only as bytes arrive, and a
// claim beyond the stream cap fails with ErrTooLarge. ctx is checked between
// pieces of at most 1 MiB; its error is returned as it is, wrapped.
func readNPYFrom(ctx context.Context, r io.Reader, opts ...Option) (*Matrix, error) {
	s := newSource(ctx, r, sourceName(r, "npy stream"), remainingBytes(r), opts)
	return readNPY(s)
}

// ReadIDs reads a 1-D, little-endian .npy array of dtype '<i8' (int64) or
// '<u8' (uint64) as IDs, one per element. A negative int64 is an error
// naming its index. Sizes, errors and ctx are treated as by ReadMatrix for an .npy.
func ReadIDs(ctx context.Context, r io.Reader, opts ...Option) ([]uint64, error) {
	s := newSource(ctx, r, sourceName(r, "npy stream"), remainingBytes(r), opts)
	return readNPYIDs(s)
}

// npyHeader is the part of a .npy header that matters here.
type npyHeader struct {
	descr      string  // as stored, e.g. "<f4"; "" when not a string
	descrShown string  // descr as Python would print it, for messages
	shape      []int64 // every dimension non-negative
	repr       string  // the shape as Python would print it, for messages
	dtype      string  // readable name of descr, set by the caller's check
	elem       int     // bytes per element, set by the caller's check
}

// readNPY reads one float32 or float16 matrix from s.
func readNPY(s *source) (*Matrix, error) {
	v, err := openNPYMatrix(s)
	if err != nil {
		return nil, err
	}
	data, err := readAll(v, v.known())
	if err != nil {
		return nil, err
	}
	return &Matrix{Rows: v.rows, Dim: v.dim, Data: data}, nil
}

// openNPYMatrix reads and checks the header of a float32 or float16 matrix
// and returns the reader of its payload, whose size it has checked against
// what s holds (or its cap).
func openNPYMatrix(s *source) (*npyValues[float32], error) {
	h, err := readNPYHeader(s)
	if err != nil {
		return nil, err
	}
	switch h.descr {
	case npyFloat32:
		h.dtype, h.elem = "float32", 4
	case npyFloat16:
		h.dtype, h.elem = "float16", 2
	default:
		return nil, formatErrorf(s.name, "dtype %s is not supported: need little-endian float32 ('<f4') or float16 ('<f2')", h.descrShown)
	}
	if len(h.shape) != 2 {
		return nil, formatErrorf(s.name, "shape %s is %d-D: need a 2-D array (rows, dim)", h.repr, len(h.shape))
	}
	rows, dim := h.shape[0], h.shape[1]
	if dim == 0 {
		return nil, formatErrorf(s.name, "shape %s has zero dim", h.repr)
	}
	decode := rawFloat32s
	if h.elem == 2 {
		decode = func(dst []float32, b []byte) {
			for i := range dst {
				dst[i] = float16.ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
			}
		}
	}
	v, err := openNPYPayload(s, h, decode)
	if err != nil {
		return nil, err
	}
	v.rows, v.dim = int(rows), int(dim)
	return v, nil
}

// readNPYIDs reads one int64 or uint64 vector of IDs from s.
func readNPYIDs(s *source) ([]uint64, error) {
	h, err := readNPYHeader(s)
	if err != nil {
		return nil, err
	}
	switch h.descr {
	case npyInt64:
		h.dtype, h.elem = "int64", 8
	case npyUint64:
		h.dtype, h.elem = "uint64", 8
	default:
		return nil, formatErrorf(s.name, "dtype %s is not supported for IDs: need little-endian int64 ('<i8') or uint64 ('<u8')", h.descrShown)
	}
	if len(h.shape) != 1 {
		return nil, formatErrorf(s.name, "shape %s is %d-D: IDs need a 1-D array (n,)", h.repr, len(h.shape))
	}
	ids, err := readNPYPayload(s, h, func(dst []uint64, b []byte) {
		for i := range dst {
			dst[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	})
	if err != nil {
		return nil, err
	}
	if h.descr == npyInt64 {
		for i, id := range ids {
			if int64(id) < 0 {
				return nil, formatErrorf(s.name, "ID %d is %d: IDs must be non-negative", i, int64(id))
			}
		}
	}
	return ids, nil
}

// readNPYPayload reads the n elements h describes, after checking their size
// against what s holds (or its cap) and before allocating for them.
func readNPYPayload[T any](s *source, h npyHeader, decode func([]T, []byte)) ([]T, error) {
	v, err := openNPYPayload(s, h, decode)
	if err != nil {
		return nil, err
	}
	return readAll(v, v.known())
}

// npyValues reads an npy payload a piece at a time.
type npyValues[T any] struct {
	s         *source
	elem      int
	decode    func([]T, []byte)
	what      string // "shape (5, 7) of float32", for messages
	total     int64  // values in the payload
	done      int64  // values read
	got       int64  // payload bytes read
	rows, dim int    // of a matrix; unset for IDs
	// trailing makes the end of the payload also the end of the file:
	// bytes after it are an error (files, not streams of arrays).
	trailing bool
	ended    bool
}

// openNPYPayload checks that the payload h describes fits what s holds (or
// its cap), before anything is allocated for it.
func openNPYPayload[T any](s *source, h npyHeader, decode func([]T, []byte)) (*npyValues[T], error) {
	payload, ok := npyPayloadSize(h)
	if !ok {
		return nil, formatErrorf(s.name, "shape %s of %s is too large for memory", h.repr, h.dtype)
	}
	what := fmt.Sprintf("shape %s of %s", h.repr, h.dtype)
	if err := s.claim(payload, what, func(have int64) error {
		return formatErrorf(s.name, "payload truncated: %s needs %d bytes, only %d there", what, payload, have)
	}); err != nil {
		return nil, err
	}
	return &npyValues[T]{s: s, elem: h.elem, decode: decode, what: what, total: payload / int64(h.elem)}, nil
}

// known is how many values to allocate for at once: all of them when the
// source's size vouches for them, else -1 (memory follows the bytes).
func (v *npyValues[T]) known() int64 {
	if v.s.size >= 0 {
		return v.total
	}
	return -1
}

func (v *npyValues[T]) read(dst []T) (int, error) {
	if v.done == v.total {
		if !v.ended && v.trailing {
			if err := noTrailingData(v.s, "npy payload"); err != nil {
				return 0, err
			}
		}
		v.ended = true
		return 0, io.EOF
	}
	k := int(min(int64(len(dst)), v.total-v.done))
	got, err := readSlice(v.s, dst[:k], v.elem, v.decode)
	v.got += got
	v.done += got / int64(v.elem)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, formatErrorf(v.s.name, "payload truncated: %s needs %d bytes, got %d", v.what, v.total*int64(v.elem), v.got)
		}
		return 0, v.s.ioError(err)
	}
	return k, nil
}

// readNPYHeader reads the magic, version and header dict, checks the dict
// the way numpy does, and returns what it says; the dtype and shape are left
// to the caller to judge.
func readNPYHeader(s *source) (npyHeader, error) {
	name := s.name
	if err := s.checkpoint(); err != nil {
		return npyHeader{}, s.ioError(err)
	}
	var pre [8]byte
	n, err := s.readFull(pre[:])
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return npyHeader{}, formatErrorf(name, "too short for an npy file: %d bytes, the magic and version need 8", n)
		}
		return npyHeader{}, s.ioError(err)
	}
	if string(pre[:6]) != npyMagic {
		return npyHeader{}, formatErrorf(name, "bad magic %q: not an npy file (want %q)", pre[:6], npyMagic)
	}
	major, minor := pre[6], pre[7]
	if minor != 0 || major < 1 || major > 3 {
		return npyHeader{}, formatErrorf(name, "unsupported npy format version %d.%d: want 1.0, 2.0 or 3.0", major, minor)
	}
	lenSize := 4 // 2.0 and 3.0: uint32
	if major == 1 {
		lenSize = 2
	}
	var lenField [4]byte
	if _, err := s.readFull(lenField[:lenSize]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return npyHeader{}, formatErrorf(name, "npy header length field truncated")
		}
		return npyHeader{}, s.ioError(err)
	}
	hlen := int64(binary.LittleEndian.Uint32(lenField[:])) // zero-padded when 2 bytes
	if hlen > npyMaxHeader {
		return npyHeader{}, formatErrorf(name, "npy header length %d exceeds the %d-byte limit", hlen, npyMaxHeader)
	}
	if err := s.claim(hlen, "the npy header", func(have int64) error {
		return formatErrorf(name, "npy header truncated: header length %d needs %d bytes, only %d there",
			hlen, s.off+hlen, s.off+have)
	}); err != nil {
		return npyHeader{}, err
	}
	exact := int64(0)
	if s.size >= 0 {
		exact = hlen
	}
	g := newGrowing[byte](exact)
	k, err := readValues(s, g, hlen, 1, func(dst, b []byte) { copy(dst, b) })
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return npyHeader{}, formatErrorf(name, "npy header truncated: want %d bytes, got %d", hlen, k)
		}
		return npyHeader{}, s.ioError(err)
	}
	h, err := parseNPYHeader(string(g.result()))
	if err != nil {
		return npyHeader{}, formatErrorf(name, "%v", err)
	}
	return h, nil
}

// npyPayloadSize returns the byte count of h's payload, with ok false when
// it or the element count overflows (int on this platform, or int64).
func npyPayloadSize(h npyHeader) (payload int64, ok bool) {
	elems := uint64(1)
	for _, d := range h.shape {
		hi, lo := bits.Mul64(elems, uint64(d))
		if hi != 0 {
			return 0, false
		}
		elems = lo
	}
	if elems > math.MaxInt64/uint64(h.elem) || elems > uint64(math.MaxInt) {
		return 0, false
	}
	return int64(elems) * int64(h.elem), true
}

// parseNPYHeader checks the header dict the way numpy does (exactly the keys
// descr, fortran_order and shape, C order, a tuple of non-negative integers
// for shape) and returns it.
func parseNPYHeader(s string) (npyHeader, error) {
	p := &pyParser{s: s}
	v, err := p.parse()
	if err != nil {
		return npyHeader{}, fmt.Errorf("cannot parse npy header %s: %v", clip(strings.TrimRight(s, " \n")), err)
	}
	d, ok := v.(pyDict)
	if !ok {
		return npyHeader{}, fmt.Errorf("npy header is %s, not a dict", pyRepr(v))
	}
	var missing, extra []string
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if _, ok := d[k]; !ok {
			missing = append(missing, k)
		}
	}
	for k := range d {
		if k != "descr" && k != "fortran_order" && k != "shape" {
			extra = append(extra, k)
		}
	}
	if len(missing) > 0 {
		return npyHeader{}, fmt.Errorf("npy header lacks key %s (want descr, fortran_order, shape)", strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return npyHeader{}, fmt.Errorf("npy header has unexpected key %s (want only descr, fortran_order, shape)",
			clipList(extra))
	}

	var h npyHeader
	h.descr, _ = d["descr"].(string) // "" when not a string: never supported
	h.descrShown = pyRepr(d["descr"])
	switch fo := d["fortran_order"]; fo {
	case false:
	case true:
		return npyHeader{}, errors.New("fortran_order is True: only C-order (row-major) arrays are supported")
	default:
		return npyHeader{}, fmt.Errorf("fortran_order is %s, not True or False", pyRepr(fo))
	}
	shape, ok := d["shape"].(pyTuple)
	h.repr = pyRepr(d["shape"])
	if !ok {
		return npyHeader{}, fmt.Errorf("shape %s is not a tuple", h.repr)
	}
	for _, x := range shape {
		n, ok := x.(int64)
		if !ok || n < 0 {
			return npyHeader{}, fmt.Errorf("shape %s: every dimension must be a non-negative integer", h.repr)
		}
		h.shape = append(h.shape, n)
	}
	return h, nil
}

// clipList joins names for a message, at most clipBytes of them.
func clipList(names []string) string {
	s := strings.Join(names, ", ")
	if len(s) > clipBytes {
		return fmt.Sprintf("%s... (%d keys)", s[:clipBytes], len(names))
	}
	return s
}

// writeNPY writes m as a version 1.0 .npy array of dtype "<f4" (float32) or
// "<f2" (float16, rounded to nearest even with overflow to ±Inf, as
// numpy does). The header is byte-for-byte what numpy.save writes for
// the same array, so numpy.load reads it back with no surprise.
func writeNPY(w io.Writer, m *Matrix, dtype string) error {
	var elemSize int
	switch dtype {
	case npyFloat32:
		elemSize = 4
	case npyFloat16:
		elemSize = 2
	default:
		return fmt.Errorf("write npy: unsupported dtype %q: want %q or %q", dtype, npyFloat32, npyFloat16)
	}
	if err := m.validate(); err != nil {
		return fmt.Errorf("write npy: %w", err)
	}
	if _, err := io.WriteString(w, npyHeaderBytes(dtype, m.Rows, m.Dim)); err != nil {
		return fmt.Errorf("write npy: %w", err)
	}
	const chunk = 16 << 10 // values per write
	buf := make([]byte, 0, min(len(m.Data), chunk)*elemSize)
	for lo := 0; lo < len(m.Data); lo += chunk {
		buf = buf[:0]
		for _, f := range m.Data[lo:min(lo+chunk, len(m.Data))] {
			if elemSize == 2 {
				buf = binary.LittleEndian.AppendUint16(buf, float16.Bits(f))
			} else {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
			}
		}
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("write npy: %w", err)
		}
	}
	return nil
}

// npyHeaderBytes mirrors numpy's _write_array_header and _wrap_header: sorted
// keys, spare spaces for the row count to grow, then padding so that the
// payload starts on a 64-byte boundary (a full 64 spaces when already
// aligned), ended by '\n'.
func npyHeaderBytes(dtype string, rows, dim int) string {
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d), }", dtype, rows, dim)
	if grow := npyGrowPad - len(strconv.Itoa(rows)); grow > 0 {
		dict += strings.Repeat(" ", grow)
	}
	hlen := len(dict) + 1
	pad := npyAlign - (len(npyMagic)+2+2+hlen)%npyAlign
	var b strings.Builder
	b.WriteString(npyMagic)
	b.WriteString("\x01\x00")
	b.Write(binary.LittleEndian.AppendUint16(nil, uint16(hlen+pad)))
	b.WriteString(dict)
	b.WriteString(strings.Repeat(" ", pad))
	b.WriteByte('\n')
	return b.String()
}
