package main

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// The 2-D layout is the top two principal components of the (unit) rows,
// found by subspace iteration: V ← orthonormalise(Xcᵀ Xc V), with Xc the
// rows minus their mean. The two passes over the data (Xc V and Xcᵀ u) run
// on the GPU (project.wgsl); the 2×dim orthonormalisation between them runs
// here. A test's cpuProjector runs the same passes in float64 to check the
// GPU against it.

// projector runs the data passes of the projection on some device.
type projector interface {
	// project sets position i to (x_i·b₀ − offset₀, x_i·b₁ − offset₁).
	project(basis [2][]float64, offset [2]float64) error
	// weightedSum returns Σᵢ xᵢ·wᵢ₀ and Σᵢ xᵢ·wᵢ₁, where wᵢ is (1, 0) when
	// ones is set and position i otherwise.
	weightedSum(ones bool) ([2][]float64, error)
}

// projection is a fitted 2-D layout: position = (x·basis₀, x·basis₁) − offset.
type projection struct {
	basis  [2][]float64
	offset [2]float64
}

// fitProjection runs up to iters steps of subspace iteration from a seeded
// random start, stopping early once the axes settle, and leaves the final
// positions in p. With iters 0 the layout is a
// random projection of the centred rows.
func fitProjection(p projector, rows, dim, iters int, seed int64) (projection, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x70726f6a))
	sum, err := p.weightedSum(true)
	if err != nil {
		return projection{}, fmt.Errorf("mean pass: %w", err)
	}
	mean := sum[0]
	for j := range mean {
		mean[j] /= float64(rows)
	}
	var pr projection
	for b := range pr.basis {
		pr.basis[b] = make([]float64, dim)
		for j := range pr.basis[b] {
			pr.basis[b][j] = rng.NormFloat64()
		}
	}
	orthonormalize(&pr.basis, rng)
	for it := 0; it < iters; it++ {
		pr.offset = [2]float64{dot64(mean, pr.basis[0]), dot64(mean, pr.basis[1])}
		if err := p.project(pr.basis, pr.offset); err != nil {
			return projection{}, fmt.Errorf("projection pass %d: %w", it, err)
		}
		w, err := p.weightedSum(false)
		if err != nil {
			return projection{}, fmt.Errorf("covariance pass %d: %w", it, err)
		}
		prev := pr.basis
		pr.basis = w
		orthonormalize(&pr.basis, rng)
		if converged(prev, pr.basis) {
			break
		}
	}
	// A fixed orientation: the largest component of each axis is positive,
	// so the picture does not flip between runs or devices.
	for b := range pr.basis {
		big := 0
		for j, x := range pr.basis[b] {
			if math.Abs(x) > math.Abs(pr.basis[b][big]) {
				big = j
			}
		}
		if pr.basis[b][big] < 0 {
			for j := range pr.basis[b] {
				pr.basis[b][j] = -pr.basis[b][j]
			}
		}
	}
	pr.offset = [2]float64{dot64(mean, pr.basis[0]), dot64(mean, pr.basis[1])}
	if err := p.project(pr.basis, pr.offset); err != nil {
		return projection{}, fmt.Errorf("final projection pass: %w", err)
	}
	return pr, nil
}

// converged reports whether an iteration step turned neither axis by more
// than about 0.03° (1 − |cos| below 1e-7), past which no pixel moves.
func converged(prev, next [2][]float64) bool {
	for b := range prev {
		if 1-math.Abs(dot64(prev[b], next[b])) > 1e-7 {
			return false
		}
	}
	return true
}

// orthonormalize makes the two vectors orthonormal (Gram–Schmidt, twice for
// accuracy). A vector that vanishes (the data has rank below 2) is replaced
// by a random one.
func orthonormalize(v *[2][]float64, rng *rand.Rand) {
	for b := 0; b < 2; b++ {
		for attempt := 0; ; attempt++ {
			for pass := 0; pass < 2; pass++ {
				for a := 0; a < b; a++ {
					d := dot64(v[b], v[a])
					for j := range v[b] {
						v[b][j] -= d * v[a][j]
					}
				}
			}
			n := math.Sqrt(dot64(v[b], v[b]))
			if n > 1e-12 && !math.IsNaN(n) && !math.IsInf(n, 0) {
				for j := range v[b] {
					v[b][j] /= n
				}
				break
			}
			if attempt > 8 {
				panic("orthonormalize: cannot find a direction") // dim < 2, ruled out by flag checks
			}
			for j := range v[b] {
				v[b][j] = rng.NormFloat64()
			}
		}
	}
}

func dot64(a, b []float64) float64 {
	var s float64
	for j := range a {
		s += a[j] * b[j]
	}
	return s
}
