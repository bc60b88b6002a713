package umbra

import (
	"fmt"
	"io"
)

// RowSource gives rows a piece at a time, as a vector file being read
// does (host.MatrixReader is one): Add stores them as they come, without
// a copy of them all first. Vectors and Flat are RowSources over memory,
// which an implementation may read in place.
type RowSource interface {
	// Dim is every row's number of components.
	Dim() int
	// Rows is how many rows the source holds, or -1 when it cannot tell
	// before its end (a pipe).
	Rows() int
	// ReadRows fills dst with the next whole rows, len(dst)/Dim of them
	// (at least one), and returns how many it read: fewer only at the end.
	// After the last row it returns 0 and io.EOF. Given an empty dst it
	// reads no row: 0 and io.EOF at the end, 0 and nil when rows remain.
	ReadRows(dst []float32) (int, error)
}

// Vectors is a RowSource of vectors in memory, one slice each. An
// engine.Index reads them in place, without a copy; a vector of the wrong
// length is refused by name ("vector 3: dimension 5, index dimension 4").
func Vectors(vs [][]float32) RowSource { return &vectorRows{vs: vs} }

// Flat is a RowSource of rows laid one after another in data, dim values
// each, as a .npy or .fvecs file holds them: no slice per row is built.
// len(data) must be a whole number of rows.
func Flat(data []float32, dim int) RowSource { return &flatRows{data: data, dim: dim} }

// The in-memory sources also give their memory to an implementation that
// asks (an engine.Index type-asserts these methods): Vectors their
// slices, Flat its data and dimension.

type vectorRows struct {
	vs   [][]float32
	next int
}

func (r *vectorRows) Dim() int {
	if len(r.vs) == 0 {
		return 0
	}
	return len(r.vs[0])
}

func (r *vectorRows) Rows() int { return len(r.vs) }

func (r *vectorRows) ReadRows(dst []float32) (int, error) {
	return readRowsFrom(dst, r.Dim(), &r.next, len(r.vs), func(i int) []float32 { return r.vs[i] })
}

// InMemory returns the source's vectors, read in place.
func (r *vectorRows) InMemory() [][]float32 { return r.vs }

type flatRows struct {
	data []float32
	dim  int
	next int
}

func (r *flatRows) Dim() int { return r.dim }

func (r *flatRows) Rows() int {
	if r.dim <= 0 {
		return 0
	}
	return len(r.data) / r.dim
}

func (r *flatRows) row(i int) []float32 { return r.data[i*r.dim : (i+1)*r.dim : (i+1)*r.dim] }

func (r *flatRows) ReadRows(dst []float32) (int, error) {
	return readRowsFrom(dst, r.dim, &r.next, r.Rows(), r.row)
}

// InMemoryFlat returns the source's data and dimension, read in place.
func (r *flatRows) InMemoryFlat() ([]float32, int) { return r.data, r.dim }

// readRowsFrom is ReadRows over n rows that row gives, from *next on.
func readRowsFrom(dst []float32, dim int, next *int, n int, row func(i int) []float32) (int, error) {
	if *next >= n {
		return 0, io.EOF
	}
	if dim <= 0 {
		return 0, fmt.Errorf("rows of dimension %d", dim)
	}
	got := 0
	for ; got < len(dst)/dim && *next < n; got++ {
		v := row(*next)
		if len(v) != dim {
			return got, fmt.Errorf("%w: vector %d has dimension %d, the first %d", ErrDimMismatch, *next, len(v), dim)
		}
		copy(dst[got*dim:], v)
		*next++
	}
	return got, nil
}
