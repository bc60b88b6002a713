package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
)

// The .npy format (numpy/lib/format.py): the magic "\x93NUMPY", a major and
// minor version byte, the header length (uint16 LE in 1.0, uint32 LE in 2.0
// and 3.0), then a Python dict literal padded with spaces and ended by '\n',
// then the raw array bytes.
const (
	npyMagic     = "\x93NUMPY"
	npyFloat32   = "<f4"
	npyFloat16   = "<f2"
	npyAlign     = 64 // numpy aligns the payload start to 64 bytes
	npyGrowPad   = 21 // numpy's GROWTH_AXIS_MAX_DIGITS: room to rewrite the shape in place
	npyMaxHeader = 1 << 20
	npyMaxDepth  = 32
)

// ReadNPY reads a 2-D, C-order, little-endian .npy array of dtype '<f4'
// (float32) or '<f2' (float16, widened to float32 exactly), in format version
// 1.0, 2.0 or 3.0. It consumes exactly the header and the payload, so several
// arrays may follow each other in one stream. Values are kept as stored, NaN
// and Inf included: validating them is the engine's job.
//
// Every malformed or unsupported input (magic, version, dtype, Fortran order,
// shape other than 2-D, a zero dim, a truncated payload, an unparsable header)
// returns an error wrapping ErrFormat. When r is an *os.File, *bytes.Reader,
// *strings.Reader or *bytes.Buffer, the header's size is checked against the
// bytes left before anything is allocated; other readers are read in bounded
// chunks, so a header that lies about a huge shape fails with a truncation
// error instead of a huge allocation.
func ReadNPY(r io.Reader) (*Matrix, error) {
	return readNPY(r, sourceName(r, "npy stream"), remainingBytes(r))
}

// npyHeader is the part of a .npy header that matters here.
type npyHeader struct {
	dtype     string
	elemSize  int
	rows, dim int64
	shape     string // as Python would print it, for messages
}

// readNPY reads one array from r; name labels errors, and avail is how many
// bytes r holds (-1 when unknown).
func readNPY(r io.Reader, name string, avail int64) (*Matrix, error) {
	var pre [8]byte
	n, err := io.ReadFull(r, pre[:])
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, formatErrorf(name, "too short for an npy file: %d bytes, the magic and version need 8", n)
		}
		return nil, fmt.Errorf("host: read %s: %w", name, err)
	}
	if string(pre[:6]) != npyMagic {
		return nil, formatErrorf(name, "bad magic %q: not an npy file (want %q)", pre[:6], npyMagic)
	}
	major, minor := pre[6], pre[7]
	if minor != 0 || major < 1 || major > 3 {
		return nil, formatErrorf(name, "unsupported npy format version %d.%d: want 1.0, 2.0 or 3.0", major, minor)
	}
	lenSize := 4 // 2.0 and 3.0: uint32
	if major == 1 {
		lenSize = 2
	}
	var lenField [4]byte
	if _, err := io.ReadFull(r, lenField[:lenSize]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, formatErrorf(name, "npy header length field truncated")
		}
		return nil, fmt.Errorf("host: read %s: %w", name, err)
	}
	hlen := int64(binary.LittleEndian.Uint32(lenField[:])) // zero-padded when 2 bytes
	prefix := int64(8 + lenSize)
	if hlen > npyMaxHeader {
		return nil, formatErrorf(name, "npy header length %d exceeds the %d-byte limit", hlen, npyMaxHeader)
	}
	if avail >= 0 && prefix+hlen > avail {
		return nil, formatErrorf(name, "npy header truncated: header length %d needs %d bytes, only %d there",
			hlen, prefix+hlen, avail)
	}
	raw := make([]byte, hlen)
	if k, err := io.ReadFull(r, raw); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, formatErrorf(name, "npy header truncated: want %d bytes, got %d", hlen, k)
		}
		return nil, fmt.Errorf("host: read %s: %w", name, err)
	}
	h, err := parseNPYHeader(string(raw))
	if err != nil {
		return nil, formatErrorf(name, "%v", err)
	}

	elems, payload, ok := npyPayloadSize(h)
	if !ok {
		return nil, formatErrorf(name, "shape %s of %s is too large for memory", h.shape, h.dtype)
	}
	if avail >= 0 && avail-prefix-hlen < payload {
		return nil, formatErrorf(name, "payload truncated: shape %s of %s needs %d bytes, only %d there",
			h.shape, h.dtype, payload, avail-prefix-hlen)
	}
	capacity := elems
	if avail < 0 {
		capacity = min(elems, matrixReadChunk/int64(h.elemSize))
	}
	buf := make([]byte, min(payload, matrixReadChunk)+int64(h.elemSize))
	data, got, err := readFloat32s(r, make([]float32, 0, capacity), elems, h.elemSize, buf)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, formatErrorf(name, "payload truncated: shape %s of %s needs %d bytes, got %d",
				h.shape, h.dtype, payload, got)
		}
		return nil, fmt.Errorf("host: read %s: %w", name, err)
	}
	return &Matrix{Rows: int(h.rows), Dim: int(h.dim), Data: data}, nil
}

// npyPayloadSize returns the element and byte counts of h's payload, with
// ok false when either overflows (int on this platform, or int64).
func npyPayloadSize(h npyHeader) (elems, payload int64, ok bool) {
	hi, lo := bits.Mul64(uint64(h.rows), uint64(h.dim))
	if hi != 0 || lo > math.MaxInt64/uint64(h.elemSize) || lo > uint64(math.MaxInt) {
		return 0, 0, false
	}
	return int64(lo), int64(lo) * int64(h.elemSize), true
}

// parseNPYHeader checks the header dict the way numpy does (exactly the keys
// descr, fortran_order and shape) and accepts only what a Matrix can hold.
func parseNPYHeader(s string) (npyHeader, error) {
	p := &pyParser{s: s}
	v, err := p.parse()
	if err != nil {
		return npyHeader{}, fmt.Errorf("cannot parse npy header %q: %v", strings.TrimRight(s, " \n"), err)
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
		return npyHeader{}, fmt.Errorf("npy header has unexpected key %s (want only descr, fortran_order, shape)", strings.Join(extra, ", "))
	}

	var h npyHeader
	switch descr, _ := d["descr"].(string); descr {
	case npyFloat32:
		h.dtype, h.elemSize = "float32", 4
	case npyFloat16:
		h.dtype, h.elemSize = "float16", 2
	default:
		return npyHeader{}, fmt.Errorf("dtype %s is not supported: need little-endian float32 ('<f4') or float16 ('<f2')", pyRepr(d["descr"]))
	}
	switch fo := d["fortran_order"]; fo {
	case false:
	case true:
		return npyHeader{}, errors.New("fortran_order is True: only C-order (row-major) arrays are supported")
	default:
		return npyHeader{}, fmt.Errorf("fortran_order is %s, not True or False", pyRepr(fo))
	}
	shape, ok := d["shape"].(pyTuple)
	h.shape = pyRepr(d["shape"])
	if !ok {
		return npyHeader{}, fmt.Errorf("shape %s is not a tuple", h.shape)
	}
	for _, x := range shape {
		if n, ok := x.(int64); !ok || n < 0 {
			return npyHeader{}, fmt.Errorf("shape %s: every dimension must be a non-negative integer", h.shape)
		}
	}
	if len(shape) != 2 {
		return npyHeader{}, fmt.Errorf("shape %s is %d-D: need a 2-D array (rows, dim)", h.shape, len(shape))
	}
	h.rows, h.dim = shape[0].(int64), shape[1].(int64)
	if h.dim == 0 {
		return npyHeader{}, fmt.Errorf("shape %s has zero dim", h.shape)
	}
	return h, nil
}

// WriteNPY writes m as a version 1.0 .npy array of dtype "<f4" (float32) or
// "<f2" (float16, rounded to nearest even with overflow to ±Inf, as
// Float16Bits does). The header is byte-for-byte what numpy.save writes for
// the same array, so numpy.load reads it back with no surprise.
func WriteNPY(w io.Writer, m *Matrix, dtype string) error {
	var elemSize int
	switch dtype {
	case npyFloat32:
		elemSize = 4
	case npyFloat16:
		elemSize = 2
	default:
		return fmt.Errorf("host: write npy: unsupported dtype %q: want %q or %q", dtype, npyFloat32, npyFloat16)
	}
	if err := m.validate(); err != nil {
		return fmt.Errorf("host: write npy: %w", err)
	}
	if _, err := io.WriteString(w, npyHeaderBytes(dtype, m.Rows, m.Dim)); err != nil {
		return fmt.Errorf("host: write npy: %w", err)
	}
	const chunk = 16 << 10 // values per write
	buf := make([]byte, 0, min(len(m.Data), chunk)*elemSize)
	for lo := 0; lo < len(m.Data); lo += chunk {
		buf = buf[:0]
		for _, f := range m.Data[lo:min(lo+chunk, len(m.Data))] {
			if elemSize == 2 {
				buf = binary.LittleEndian.AppendUint16(buf, Float16Bits(f))
			} else {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
			}
		}
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("host: write npy: %w", err)
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
