package testkit

import (
	"math"
	"math/rand/v2"
)

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

// Vector is one vector of Matrix.
func Vector(r *rand.Rand, dim int) []float32 { return Matrix(r, 1, dim) }

// Unit is a Vector scaled to length 1 (in float64, then rounded), like the
// rows of a cosine index.
func Unit(r *rand.Rand, dim int) []float32 {
	v := Vector(r, dim)
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	inv := 1 / math.Sqrt(s)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
	return v
}

// Grid fills a vector with multiples of 1/64 in [-1/2, 1/2]: every product
// and every partial sum over up to 4096 dimensions is exact in float32, so
// any summation order gives the float64 answer and ties are real ties.
func Grid(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.IntN(65)-32) / 64
	}
	return v
}
