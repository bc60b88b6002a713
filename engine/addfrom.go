package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/packed"
)

// streamPieceBytes is how many bytes of rows each packing goroutine of
// a streamed Add is given per piece: read, then packed while they are still in
// cache.
const streamPieceBytes = packWorkerBytes

// streamHeadroom bounds the spare rows a streamed Add allocates past what has
// arrived when its source cannot say how many rows it holds, as the
// slab's own growth does: a quarter of the rows so far, at most this many
// bytes.
const streamHeadroom = 64 << 20

// sourceFits refuses a source Add cannot read: nil, rows of another
// dimension, a negative row count other than -1 (unknown).
func (ix *Index) sourceFits(src umbra.RowSource) error {
	if src == nil {
		return fmt.Errorf("%w: a nil RowSource", umbra.ErrSource)
	}
	if d := src.Dim(); d != ix.cfg.Dim {
		return fmt.Errorf("%w: source rows have %d components, index dimension is %d", umbra.ErrDimMismatch, d, ix.cfg.Dim)
	}
	if n := src.Rows(); n < -1 {
		return fmt.Errorf("%w: source says it holds %d rows", umbra.ErrSource, n)
	}
	return nil
}

// addFrom is a streamed Add under ids (nil: assigned) and keys (nil: none;
// "" among them: a row without one). The IDs and keys are judged once
// every row is read and checked, as for rows in memory: a bad row fails
// the call whatever is wrong with the names, so a source is read to its
// end (or to its first bad row) before a stored or repeated name is
// refused. Nothing is stored either way.
func (ix *Index) addFrom(ctx context.Context, start time.Time, src umbra.RowSource, ids []uint64, keys []string, a *callAttrs) ([]uint64, error) {
	if err := ix.sourceFits(src); err != nil {
		return nil, err
	}
	if err := ix.lockWriter(); err != nil {
		return nil, err
	}
	defer ix.wmu.Unlock()
	n := src.Rows()
	return ix.addLocked(ctx, start, ids, false, keys, a, n, func(s *packed.Slab) error {
		st := &stream{ix: ix, ctx: ctx, src: src, s: s, n: n}
		return st.run()
	})
}

// stream is one streamed Add's pack step: it reads pieces of src into the
// spare storage of s (a staged copy of the published slab, see
// stageAppend), packs each, and commits them all at the end.
type stream struct {
	ix  *Index
	ctx context.Context
	src umbra.RowSource
	s   *packed.Slab
	n   int // rows src announced, -1 unknown

	got    int // rows read into the spare storage
	packed int // rows of them packed
	// pending is the piece being packed on another goroutine, if any.
	pending *piece
	bufs    [2][]float32 // where pieces are read when rows need padding
}

type piece struct {
	lo, rows int
	done     chan error
}

func (st *stream) run() (err error) {
	ix, s := st.ix, st.s
	dim, stride := s.Dim, s.Stride
	workers := ix.cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// With more than one worker, one reads the next piece while the others
	// pack the last.
	packers := max(1, workers-1)
	async := workers > 1
	pieceRows := max(1, packers*streamPieceBytes/(stride*4))
	if st.n >= 0 {
		s.Reserve(st.n) // once, to exactly what is needed past the rows
		pieceRows = max(1, min(pieceRows, st.n))
	}
	report := progressFrom(st.ctx)
	mode := ix.packMode(false)
	defer func() {
		// Never return while a packer still writes, whatever happened.
		if st.pending != nil {
			<-st.pending.done
			st.pending = nil
		}
	}()
	wait := func() error {
		p := st.pending
		if p == nil {
			return nil
		}
		st.pending = nil
		if err := <-p.done; err != nil {
			return ix.badRow(err, p.lo, input{"vector", 0})
		}
		st.packed += p.rows
		report("validate", st.packed, st.n)
		return nil
	}
	for k := 0; ; k++ {
		if err := st.ctx.Err(); err != nil {
			return err
		}
		want := pieceRows
		if st.n >= 0 {
			want = min(pieceRows, st.n-st.got)
			if want == 0 {
				break
			}
		} else if err := st.grow(want, wait); err != nil {
			return err
		}
		base := len(s.Data) + st.got*stride
		region := s.Data[base : base+want*stride : base+want*stride]
		into := region
		if stride != dim {
			b := &st.bufs[k%2]
			if *b == nil {
				*b = make([]float32, pieceRows*dim)
			}
			into = (*b)[:want*dim]
		}
		rows, rerr := readRows(st.src, into, dim)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			// A bad row before the failure is the earlier problem.
			if err := wait(); err != nil {
				return err
			}
			return fmt.Errorf("%w: after %d rows: %w", umbra.ErrSource, st.got+rows, rerr)
		}
		if err := wait(); err != nil {
			return err
		}
		if rows > 0 {
			if st.n < 0 {
				if err := ix.checkAppend(st.got + rows); err != nil {
					return err
				}
			}
			p := &piece{lo: st.got, rows: rows, done: make(chan error, 1)}
			from := into
			row := func(i int) []float32 { return from[i*dim : (i+1)*dim : (i+1)*dim] }
			pack := func() {
				defer func() {
					if r := recover(); r != nil {
						p.done <- fmt.Errorf("%w: packing rows %d to %d: %v", ErrGPU, p.lo, p.lo+rows, r)
					}
				}()
				p.done <- packParallel(s, region, rows, row, mode, packers)
			}
			st.pending = p
			st.got += rows
			if async {
				go pack()
			} else {
				pack()
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
	}
	if err := wait(); err != nil {
		return err
	}
	if st.n >= 0 {
		if st.got < st.n {
			return fmt.Errorf("%w: the source ended after %d of the %d rows it announced", umbra.ErrSource, st.got, st.n)
		}
		// Every announced row is in: the source must now be at its end
		// (which is where a file's trailing bytes are found). Room for a
		// row is asked for only when rows came (a dim no row backs could
		// be anything); with none, an empty dst asks whether one remains.
		var probe []float32
		if st.n > 0 {
			probe = make([]float32, dim)
		}
		k, err := st.src.ReadRows(probe)
		switch {
		case k > 0:
			return fmt.Errorf("%w: the source holds more than the %d rows it announced", umbra.ErrSource, st.n)
		case err == nil:
			return fmt.Errorf("%w: the source gave no row and no error after its %d rows", umbra.ErrSource, st.n)
		case !errors.Is(err, io.EOF):
			return fmt.Errorf("%w: after %d rows: %w", umbra.ErrSource, st.got, err)
		}
	}
	if err := st.ctx.Err(); err != nil {
		return err
	}
	s.Commit(st.got)
	return nil
}

// grow makes room for want more rows past the got ones read (not yet
// committed) when the source did not say how many it holds: once the
// packer is done with the old storage, the rows so far move to storage
// with headroom, as Slab.Reserve grows, keeping the uncommitted ones.
func (st *stream) grow(want int, wait func() error) error {
	s := st.s
	used := len(s.Data) + st.got*s.Stride
	need := used + want*s.Stride
	if need <= cap(s.Data) {
		return nil
	}
	// The limits are checked as each piece arrives (the last may hold
	// fewer rows than want).
	if err := wait(); err != nil {
		return err
	}
	extra := min(used/4, streamHeadroom/4)
	extra -= extra % s.Stride
	s.Realloc(used, need+extra)
	return nil
}

// readRows fills dst with whole rows of dim from src, calling ReadRows
// until dst is full or src ends, and returns the rows read: io.EOF with
// them when src ended.
func readRows(src umbra.RowSource, dst []float32, dim int) (int, error) {
	rows := 0
	for rows*dim < len(dst) {
		room := (len(dst) - rows*dim) / dim
		k, err := src.ReadRows(dst[rows*dim:])
		if k < 0 || k > room {
			return rows, fmt.Errorf("ReadRows of room for %d rows returned %d", room, k)
		}
		rows += k
		if err != nil {
			return rows, err
		}
		if k == 0 {
			return rows, errors.New("ReadRows returned no row and no error")
		}
	}
	return rows, nil
}
