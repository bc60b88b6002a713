package testkit

import "math/rand/v2"

// Matrix returns rows vectors of dim components drawn uniformly from
// [-1, 1), row-major in one slice. No row is all zeros: one that is (a
// chance of 2⁻²⁴ per component) is drawn again, so every row has a cosine.
func Matrix(r *rand.Rand, rows, dim int) []float32 {
	out := make([]float32, rows*dim)
	for i := range rows {
		row := out[i*dim : (i+1)*dim]
		for zero := true; zero && dim > 0; {
			for j := range row {
				row[j] = r.Float32()*2 - 1
				zero = zero && row[j] == 0
			}
		}
	}
	return out
}

// Vectors is Matrix as one slice per vector (each with its own capacity, so
// an append to one never writes into the next).
func Vectors(r *rand.Rand, n, dim int) [][]float32 {
	flat := Matrix(r, n, dim)
	out := make([][]float32, n)
	for i := range out {
		out[i] = flat[i*dim : (i+1)*dim : (i+1)*dim]
	}
	return out
}
