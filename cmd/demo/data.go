package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/umbravec/umbra/host"
)

// memorySet is what the demo draws and searches: rows unit vectors of
// dimension dim, row-major in data. The index stores them normalised (as
// it does any row under cosine) and the demo's shaders read them there;
// queries are rows of the set, and the tests' float64 references use the
// set as it is.
type memorySet struct {
	rows, dim int
	data      []float32
	// cluster is the synthetic cluster of each row (nil for a data file).
	cluster []int
	source  string
}

func (m *memorySet) row(i int) []float32 { return m.data[i*m.dim : (i+1)*m.dim] }

// synthClusters is the number of clusters in the synthetic set.
const synthClusters = 12

// syntheticSet draws n unit vectors of dimension dim in synthClusters
// clusters. Like topics in an embedding space, clusters are related to their
// neighbours: each row has a hidden position l on a 2-D map, and its vector
// is
//
//	x = normalise(e₀ + A·l + 0.35·r_c + ε)
//
// with e₀ and the two columns of A orthonormal directions shared by all
// rows, r_c a random unit direction of cluster c, and ε isotropic noise of
// norm about 0.3. The cosine of two rows then falls smoothly with the
// distance of their map positions (the map is a cap of a sphere around e₀),
// is higher inside a cluster, and is noisy the way real similarities are;
// the top two principal components recover the map. The same seed gives the
// same set on every platform.
func syntheticSet(n, dim int, seed int64) *memorySet {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x756d627261))
	gauss := func() []float64 {
		v := make([]float64, dim)
		for j := range v {
			v[j] = rng.NormFloat64()
		}
		return v
	}
	// e₀, A₀, A₁: orthonormal.
	axes := [3][]float64{gauss(), gauss(), gauss()}
	for a := range axes {
		for b := 0; b < a; b++ {
			d := dot64(axes[a], axes[b])
			for j := range axes[a] {
				axes[a][j] -= d * axes[b][j]
			}
		}
		normalize64(axes[a])
	}
	type cluster struct {
		at     [2]float64    // map position of the centre
		shape  [2][2]float64 // map spread: l = at + shape·z, z standard normal
		ident  []float64     // r_c
		weight float64       // share of the rows
	}
	cs := make([]cluster, synthClusters)
	var total float64
	for c := range cs {
		// Centres in a disc of radius 1.1, kept apart (best of a few tries).
		var best [2]float64
		bestGap := -1.0
		for try := 0; try < 24; try++ {
			r, th := 1.1*math.Sqrt(rng.Float64()), 2*math.Pi*rng.Float64()
			p := [2]float64{r * math.Cos(th), r * math.Sin(th)}
			gap := math.Inf(1)
			for _, o := range cs[:c] {
				gap = min(gap, math.Hypot(p[0]-o.at[0], p[1]-o.at[1]))
			}
			if gap > bestGap {
				best, bestGap = p, gap
			}
		}
		// An elongated, rotated spread of 0.06–0.16 along its long axis.
		long := 0.06 + 0.10*rng.Float64()
		short := long * (0.35 + 0.5*rng.Float64())
		th := math.Pi * rng.Float64()
		co, si := math.Cos(th), math.Sin(th)
		cs[c] = cluster{at: best, shape: [2][2]float64{{long * co, -short * si}, {long * si, short * co}}, weight: 0.5 + rng.Float64()}
		cs[c].ident = gauss()
		normalize64(cs[c].ident)
		total += cs[c].weight
	}
	m := &memorySet{rows: n, dim: dim, data: make([]float32, n*dim), cluster: make([]int, n),
		source: fmt.Sprintf("synthetic: %d related clusters, seed %d", synthClusters, seed)}
	// Rows go to clusters by weight, shuffled so draw order does not
	// follow the clusters.
	row := 0
	for c := range cs {
		count := int(math.Round(float64(n) * cs[c].weight / total))
		if c == len(cs)-1 {
			count = n - row
		}
		for ; count > 0 && row < n; count-- {
			m.cluster[row] = c
			row++
		}
	}
	rng.Shuffle(n, func(i, j int) { m.cluster[i], m.cluster[j] = m.cluster[j], m.cluster[i] })
	const identity, noise = 0.35, 0.3
	v := make([]float64, dim)
	scale := noise / math.Sqrt(float64(dim))
	for i := 0; i < n; i++ {
		c := &cs[m.cluster[i]]
		z0, z1 := rng.NormFloat64(), rng.NormFloat64()
		l0 := c.at[0] + c.shape[0][0]*z0 + c.shape[0][1]*z1
		l1 := c.at[1] + c.shape[1][0]*z0 + c.shape[1][1]*z1
		for j := range v {
			v[j] = axes[0][j] + l0*axes[1][j] + l1*axes[2][j] + identity*c.ident[j] + scale*rng.NormFloat64()
		}
		normalize64(v)
		out := m.row(i)
		for j, x := range v {
			out[j] = float32(x)
		}
	}
	return m
}

// loadSet reads a .npy or .fvecs file, keeps its first n rows (n 0: all)
// and normalises them. A zero or non-finite row is an error naming it.
func loadSet(path string, n int) (*memorySet, error) {
	mat, err := host.ReadMatrixFile(context.Background(), path)
	if err != nil {
		return nil, err
	}
	rows := mat.Rows
	if n > 0 && n < rows {
		rows = n
	}
	if rows == 0 {
		return nil, fmt.Errorf("%s holds no vectors", path)
	}
	if mat.Dim < 2 {
		return nil, fmt.Errorf("%s has dimension %d; a 2-D layout needs at least 2", path, mat.Dim)
	}
	m := &memorySet{rows: rows, dim: mat.Dim, data: mat.Data[: rows*mat.Dim : rows*mat.Dim],
		source: fmt.Sprintf("%s (%d of %d rows)", path, rows, mat.Rows)}
	for i := 0; i < rows; i++ {
		r := m.row(i)
		var ss float64
		for j, x := range r {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("%s: row %d, component %d is %v", path, i, j, x)
			}
			ss += float64(x) * float64(x)
		}
		if ss == 0 || math.IsInf(ss, 0) {
			return nil, fmt.Errorf("%s: row %d has norm %g; cosine similarity needs a finite non-zero norm", path, i, math.Sqrt(ss))
		}
		inv := 1 / math.Sqrt(ss)
		for j := range r {
			r[j] = float32(float64(r[j]) * inv)
		}
	}
	return m, nil
}

func normalize64(v []float64) {
	var ss float64
	for _, x := range v {
		ss += x * x
	}
	if ss == 0 {
		return
	}
	inv := 1 / math.Sqrt(ss)
	for j := range v {
		v[j] *= inv
	}
}
