package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unsafe"
)

// ErrTooLarge is wrapped by the error a reader returns when a source whose
// size cannot be learned in advance (a pipe, a FIFO, stdin, a socket) would
// need more than the stream cap (DefaultMaxStreamBytes, or MaxStreamBytes).
// The message names the source, what it claimed and the cap. A regular file
// or an in-memory reader is checked against its real size instead and is
// never capped.
var ErrTooLarge = errors.New("stream exceeds the read cap")

// DefaultMaxStreamBytes is the most a reader takes from a source of unknown
// size unless MaxStreamBytes says otherwise: enough for a million
// 1024-dimensional float32 vectors, and an upper bound on what garbage (say
// /dev/urandom under a vector file's name) can cost before it is refused.
const DefaultMaxStreamBytes int64 = 4 << 30

// Option changes how a reader treats its input.
type Option func(*readOptions)

type readOptions struct {
	maxStream int64
}

// MaxStreamBytes caps how many bytes a reader takes from a source whose size
// it cannot learn in advance before it fails with ErrTooLarge; n <= 0 keeps
// DefaultMaxStreamBytes. The result takes about as many bytes as were read,
// four times as many for .bvecs (each byte becomes a float32). Regular files
// and in-memory readers are checked against their real size and not capped.
func MaxStreamBytes(n int64) Option {
	return func(o *readOptions) {
		if n > 0 {
			o.maxStream = n
		}
	}
}

// pieceBytes bounds how many bytes a reader decodes per step: memory then
// grows only as fast as data arrives, and cancellation is checked between
// pieces.
const pieceBytes = 1 << 20

// source is one input being read: the bytes, what to call them in errors,
// how many there are when that is knowable, and the cap when it is not.
type source struct {
	ctx       context.Context
	r         io.Reader
	name      string // quoted path, or a description such as "npy stream"
	size      int64  // bytes r holds from where reading began; -1 unknown
	limit     int64  // the most bytes taken when size is unknown
	off       int64  // bytes consumed so far
	checkedAt int64  // off when ctx was last checked
	buf       []byte // one piece, grown on demand
}

func newSource(ctx context.Context, r io.Reader, name string, size int64, opts []Option) *source {
	o := readOptions{maxStream: DefaultMaxStreamBytes}
	for _, opt := range opts {
		opt(&o)
	}
	return &source{ctx: ctx, r: r, name: name, size: size, limit: o.maxStream}
}

// left is how many bytes remain, or -1 when the size is unknown.
func (s *source) left() int64 {
	if s.size < 0 {
		return -1
	}
	return s.size - s.off
}

// piece returns a scratch buffer of n <= pieceBytes bytes.
func (s *source) piece(n int) []byte {
	if cap(s.buf) < n {
		s.buf = make([]byte, n)
	}
	return s.buf[:n]
}

// checkpoint returns the context's error once per piece's worth of bytes,
// so that loops over small records stay cheap and still stop promptly.
func (s *source) checkpoint() error {
	if s.off-s.checkedAt < pieceBytes && s.off != 0 {
		return nil
	}
	s.checkedAt = s.off
	return s.ctx.Err()
}

// readFull is io.ReadFull that counts bytes and, on a source of unknown
// size, refuses to go past the cap: it reads up to the cap, then one more
// byte to tell a stream that ends there (io.EOF or io.ErrUnexpectedEOF, as
// usual) from one that goes on (an ErrTooLarge error).
func (s *source) readFull(b []byte) (int, error) {
	if s.size >= 0 || s.off+int64(len(b)) <= s.limit {
		k, err := io.ReadFull(s.r, b)
		s.off += int64(k)
		return k, err
	}
	allowed := max(0, s.limit-s.off)
	k, err := io.ReadFull(s.r, b[:allowed])
	s.off += int64(k)
	if err != nil {
		return k, err
	}
	var one [1]byte
	n, err := io.ReadFull(s.r, one[:])
	switch {
	case n == 0 && errors.Is(err, io.EOF) && k == 0:
		return 0, io.EOF
	case n == 0 && errors.Is(err, io.EOF):
		return k, io.ErrUnexpectedEOF
	case n == 0:
		return k, err
	}
	return k, s.tooLarge(fmt.Sprintf("more than %d bytes arrived", s.limit))
}

// claim checks, before anything is allocated for it, that a header's claim
// of n more bytes can be met: against the bytes there when the size is
// known (returning a truncation error built by short), against the cap
// otherwise.
func (s *source) claim(n int64, what string, short func(have int64) error) error {
	if left := s.left(); left >= 0 {
		if n > left {
			return short(left)
		}
		return nil
	}
	if n > s.limit-s.off {
		return s.tooLarge(fmt.Sprintf("%s needs %d bytes", what, n))
	}
	return nil
}

func (s *source) tooLarge(why string) error {
	return &dataFileError{file: s.name, kind: ErrTooLarge, problem: fmt.Sprintf(
		"%s, over the %d-byte cap on a source of unknown size: read a regular file, or raise the cap with host.MaxStreamBytes",
		why, s.limit)}
}

// ioError wraps a failure of the underlying reader (or the context) with the
// source's name; errors the source made itself pass through.
func (s *source) ioError(err error) error {
	var dfe *dataFileError
	if errors.As(err, &dfe) {
		return err
	}
	return fmt.Errorf("read %s: %w", s.name, err)
}

// growing collects values in chunks: one chunk of the exact size when the
// count is known from a checked size, otherwise chunks that start small and
// double up to chunkMax values, so memory follows the bytes that actually
// arrived and never runs ahead of them by more than one chunk.
type growing[T any] struct {
	done  [][]T
	cur   []T
	total int
	next  int // size of the next chunk
}

const (
	chunkMin = 4 << 10
	chunkMax = 1 << 20
)

func newGrowing[T any](exact int64) *growing[T] {
	g := &growing[T]{next: chunkMin}
	if exact > 0 {
		g.cur = make([]T, 0, exact)
	}
	return g
}

// space returns room for up to n more values, to be filled and committed.
func (g *growing[T]) space(n int) []T {
	if len(g.cur) == cap(g.cur) {
		if g.cur != nil {
			g.done = append(g.done, g.cur)
		}
		g.cur = make([]T, 0, g.next)
		g.next = min(2*g.next, chunkMax)
	}
	room := cap(g.cur) - len(g.cur)
	return g.cur[len(g.cur) : len(g.cur)+min(n, room)]
}

func (g *growing[T]) commit(k int) {
	g.cur = g.cur[:len(g.cur)+k]
	g.total += k
}

// result returns every committed value in one slice.
func (g *growing[T]) result() []T {
	if g.cur == nil {
		return []T{}
	}
	if len(g.done) == 0 {
		if cap(g.cur) > 2*len(g.cur)+chunkMin {
			return slices.Clone(g.cur)
		}
		return g.cur
	}
	out := make([]T, 0, g.total)
	for i, c := range g.done {
		out = append(out, c...)
		g.done[i] = nil
	}
	return append(out, g.cur...)
}

// readValues decodes n values of elem bytes each from s into g, a piece at
// a time, checking the context between pieces. On a short source it returns
// the bytes it did get with io.ErrUnexpectedEOF.
func readValues[T any](s *source, g *growing[T], n int64, elem int, decode func(dst []T, b []byte)) (int64, error) {
	var got int64
	for n > 0 {
		dst := g.space(int(min(n, int64(pieceBytes/elem))))
		k, err := readSlice(s, dst, elem, decode)
		g.commit(int(k / int64(elem)))
		got += k
		if err != nil {
			return got, err
		}
		n -= int64(len(dst))
	}
	return got, nil
}

// readSlice fills dst with values of elem bytes each from s, a piece of at
// most pieceBytes at a time, checking the context between pieces. It
// returns the bytes read; on a short source, with io.ErrUnexpectedEOF.
//
// decode nil means the file's bytes are the values' own in memory (little-
// endian float32 on a little-endian host): they are read straight into dst,
// with no piece buffer between.
func readSlice[T any](s *source, dst []T, elem int, decode func(dst []T, b []byte)) (int64, error) {
	var got int64
	per := max(pieceBytes/elem, 1)
	for len(dst) > 0 {
		if err := s.checkpoint(); err != nil {
			return got, err
		}
		part := dst[:min(len(dst), per)]
		var b []byte
		if decode == nil {
			b = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(part))), len(part)*elem)
		} else {
			b = s.piece(len(part) * elem)
		}
		k, err := s.readFull(b)
		whole := k / elem
		if decode != nil {
			decode(part[:whole], b[:whole*elem])
		}
		got += int64(k)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return got, err
		}
		dst = dst[len(part):]
	}
	return got, nil
}

// valueReader yields a matrix's values in file order, as many as dst holds
// per call (crossing rows), until it returns io.EOF at the clean end of the
// data: with some values when the end came within the call, or none.
type valueReader[T any] interface {
	read(dst []T) (int, error)
}

// readAll reads every value of r: into one allocation of exactly known
// values when the count is known from a checked size (known >= 0), or in
// chunks that follow the bytes that arrive when it is not.
func readAll[T any](r valueReader[T], known int64) ([]T, error) {
	if known >= 0 {
		data := make([]T, known)
		got, extra := 0, 0
		var spill []T
		for {
			dst, full := data[got:], got == len(data)
			if full {
				// Full: what follows must be the end, or its error (a
				// short last record, trailing bytes), which may come
				// only after the values of a short record are read.
				if spill == nil {
					spill = make([]T, 4<<10)
				}
				dst = spill
			}
			k, err := r.read(dst)
			if full {
				extra += k
			} else {
				got += k
			}
			if errors.Is(err, io.EOF) {
				if extra > 0 {
					// Impossible for a source whose size was checked,
					// but never a silent truncation.
					return nil, errors.New("reader holds more values than its size allows")
				}
				return data[:got], nil
			}
			if err != nil {
				return nil, err
			}
		}
	}
	g := newGrowing[T](0)
	for {
		dst := g.space(chunkMax)
		k, err := r.read(dst)
		g.commit(k)
		if errors.Is(err, io.EOF) {
			return g.result(), nil
		}
		if err != nil {
			return nil, err
		}
	}
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
// *bytes.Buffer, *io.SectionReader), and -1 otherwise. Readers use it to
// reject a header that promises more data than exists before allocating for
// it.
func remainingBytes(r io.Reader) int64 {
	switch v := r.(type) {
	case *bytes.Reader:
		return int64(v.Len())
	case *strings.Reader:
		return int64(v.Len())
	case *bytes.Buffer:
		return int64(v.Len())
	case *io.SectionReader:
		pos, err := v.Seek(0, io.SeekCurrent)
		if err != nil || pos > v.Size() {
			return -1
		}
		return v.Size() - pos
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

// clip quotes s for an error message, at most clipBytes of it: a hostile
// header must not become a megabyte of log.
func clip(s string) string {
	if len(s) <= clipBytes {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes in all)", s[:clipBytes], len(s))
}

const clipBytes = 100
