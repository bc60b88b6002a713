package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/packed"
)

// packMode is how the index packs and checks a caller's rows; raw rows
// (replayed from a log) are stored as they are, already normalised.
func (ix *Index) packMode(raw bool) packed.Mode {
	cos := ix.cfg.Metric == umbra.Cosine
	return packed.Mode{Normalize: cos && !raw, Check: true, RejectZero: cos}
}

// packer returns the pack step of an add of n rows, row(i) the i-th: in
// one pass per row it checks the row (length, finiteness, a zero norm under
// Cosine), takes its norm and writes it packed, normalised and padded into
// the slab's spare rows, progressRows at a time between which it reports
// "validate" progress and honours ctx. Only when every row is packed are
// they committed: on any error the slab is as it was.
func (ix *Index) packer(ctx context.Context, n int, raw bool, row func(i int) []float32) func(*packed.Slab) error {
	return func(s *packed.Slab) error {
		if err := ix.packPieces(ctx, s, s.Spare(n), n, raw, row); err != nil {
			return err
		}
		s.Commit(n)
		return nil
	}
}

// packPieces packs n rows into dst with s's layout, progressRows at a
// time, reporting "validate" progress and honouring ctx between pieces.
// Each piece is split between Config.Workers goroutines (packParallel).
func (ix *Index) packPieces(ctx context.Context, s *packed.Slab, dst []float32, n int, raw bool, row func(i int) []float32) error {
	report := progressFrom(ctx)
	mode := ix.packMode(raw)
	workers := ix.packWorkers()
	for lo := 0; lo < n; lo += progressRows {
		hi := min(lo+progressRows, n)
		err := packParallel(s, dst[lo*s.Stride:], hi-lo, func(i int) []float32 { return row(lo + i) }, mode, workers)
		if err != nil {
			return ix.badRow(err, lo, input{"vector", 0})
		}
		report("validate", hi, n)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// packWorkerBytes is the least a packing goroutine is given: below it,
// starting one costs more than it saves.
const packWorkerBytes = 1 << 20

// packWorkers is how many goroutines pack and check rows:
// Config.Workers, or every core.
func (ix *Index) packWorkers() int {
	if ix.cfg.Workers > 0 {
		return ix.cfg.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// packParallel is s.PackRows split into consecutive parts (splitRows).
func packParallel(s *packed.Slab, dst []float32, n int, row func(i int) []float32, m packed.Mode, workers int) error {
	return splitRows(n, s.Stride, workers, func(a, b int) error {
		return s.PackRows(dst[a*s.Stride:], b-a, func(j int) []float32 { return row(a + j) }, m)
	})
}

// splitRows runs part over consecutive parts [a, b) of n rows of stride
// values, one part per worker, as many workers as there are
// packWorkerBytes of rows (the calling goroutine alone below that), and
// returns the first failed part's error, a *packed.BadRow counting from
// the call's first row. A row's work depends on that row alone, so the
// parts' results are what one pass would give. The workers take the
// caller's debug.SetPanicOnFault (a mapped slab's rows may fault), and a
// panic in one becomes an error wrapping its value, so a fault keeps its
// address for the caller's recoverInto.
func splitRows(n, stride, workers int, part func(a, b int) error) error {
	w := min(workers, n*stride*4/packWorkerBytes)
	if w <= 1 {
		return part(0, n)
	}
	onFault := debug.SetPanicOnFault(false)
	debug.SetPanicOnFault(onFault)
	per := (n + w - 1) / w
	errs := make([]error, w)
	var wg sync.WaitGroup
	for i := range w {
		a, b := i*per, min((i+1)*per, n)
		if a >= b {
			break
		}
		wg.Go(func() {
			if onFault {
				debug.SetPanicOnFault(true)
			}
			defer func() {
				if r := recover(); r != nil {
					if e, ok := r.(error); ok {
						errs[i] = fmt.Errorf("%w: rows %d to %d: %w", ErrGPU, a, b, e)
					} else {
						errs[i] = fmt.Errorf("%w: rows %d to %d: %v", ErrGPU, a, b, r)
					}
				}
			}()
			err := part(a, b)
			var bad *packed.BadRow
			if errors.As(err, &bad) {
				bad.Row += a
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// badRow words a row the packer refused, as checkVector does; lo is the
// index of the packed piece's first row in the call.
func (ix *Index) badRow(err error, lo int, what input) error {
	var b *packed.BadRow
	if !errors.As(err, &b) {
		return err
	}
	what.index = lo + b.Row
	switch {
	case b.WrongLen:
		return fmt.Errorf("%w: %s has %d components, index dimension is %d", umbra.ErrDimMismatch, what, b.Len, ix.cfg.Dim)
	case b.Zero:
		return fmt.Errorf("%w: %s has norm 0, which has no direction", umbra.ErrZeroVector, what)
	}
	return fmt.Errorf("%w: %s, component %d is %v", umbra.ErrNonFinite, what, b.Col, b.Value)
}

// input names one vector of a call's input in an error: "vector 3",
// "query 2", or "query" for a single search (index -1). It is formatted only
// when an error is returned, so validating a million rows allocates nothing.
type input struct {
	kind  string
	index int
}

func (in input) String() string {
	if in.index < 0 {
		return in.kind
	}
	return in.kind + " " + strconv.Itoa(in.index)
}

// checkVector validates one vector of input: its length, finiteness and,
// under Cosine, a non-zero norm. what names it in the error.
func (ix *Index) checkVector(v []float32, what input) error {
	if len(v) != ix.cfg.Dim {
		return fmt.Errorf("%w: %s has %d components, index dimension is %d", umbra.ErrDimMismatch, what, len(v), ix.cfg.Dim)
	}
	zero := true
	for j, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w: %s, component %d is %v", umbra.ErrNonFinite, what, j, x)
		}
		if x != 0 {
			zero = false
		}
	}
	// Any other finite vector normalises: the norm is taken in float64, where
	// neither float32's largest nor its smallest values overflow or vanish.
	if zero && ix.cfg.Metric == umbra.Cosine {
		return fmt.Errorf("%w: %s has norm 0, which has no direction", umbra.ErrZeroVector, what)
	}
	return nil
}
