package bench

import (
	"math/rand/v2"
	"sync"
)

// Workload is the data a run searches, in the two layouts the tiers start
// from: one contiguous row-major slice, and one allocation per row.
type Workload struct {
	Dim     int
	Data    []float32 // N×Dim values, row-major
	Queries [][]float32
	// Batch holds the queries of the batch comparison (--peers); when it
	// is shorter than the batch asked for, BatchQueries repeats Queries.
	Batch [][]float32
	// BatchFrom says where Batch came from, for the report.
	BatchFrom string

	seed     uint64
	rowsOnce sync.Once
	rows     [][]float32
}

// N returns the number of stored vectors.
func (w *Workload) N() int { return len(w.Data) / w.Dim }

// NewWorkload builds a workload over data (n×dim, row-major; it is kept,
// not copied). seed orders the per-row allocations Rows makes.
func NewWorkload(data []float32, dim int, queries [][]float32, seed uint64) *Workload {
	return &Workload{Dim: dim, Data: data, Queries: queries, seed: seed}
}

// Rows returns the same values as Data with each row in its own heap
// allocation, made in shuffled order so that neighbours in the list are not
// neighbours in memory: the layout a store of records ends up with, and the
// one an application that gathers vectors from its records hands to a
// library (the list tier starts from it). The copy is made on first use
// (only the list tier needs it) and kept.
func (w *Workload) Rows() [][]float32 {
	w.rowsOnce.Do(func() {
		n, dim := w.N(), w.Dim
		w.rows = make([][]float32, n)
		for _, i := range rand.New(rand.NewPCG(w.seed, 0x5ca77e7ed)).Perm(n) {
			w.rows[i] = append([]float32(nil), w.Data[i*dim:(i+1)*dim]...)
		}
	})
	return w.rows
}

// BatchQueries returns n queries for one batch call: Batch when it holds
// n, else Queries repeated in turn.
func (w *Workload) BatchQueries(n int) [][]float32 {
	if len(w.Batch) >= n {
		return w.Batch[:n:n]
	}
	qs := make([][]float32, n)
	for i := range qs {
		qs[i] = w.Queries[i%len(w.Queries)]
	}
	return qs
}

// RandomMatrix returns rows×dim values drawn uniformly from [−1, 1) by a
// PCG generator seeded with seed, so a run can be repeated exactly.
func RandomMatrix(rows, dim int, seed, stream uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, stream))
	out := make([]float32, rows*dim)
	for i := range out {
		out[i] = 2*r.Float32() - 1
	}
	return out
}

// RandomRows is RandomMatrix as one slice per row (views of one
// allocation, each capped at its end).
func RandomRows(rows, dim int, seed, stream uint64) [][]float32 {
	flat := RandomMatrix(rows, dim, seed, stream)
	out := make([][]float32, rows)
	for i := range out {
		out[i] = flat[i*dim : (i+1)*dim : (i+1)*dim]
	}
	return out
}
