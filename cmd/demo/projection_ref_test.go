package main

// cpuProjector is the float64 reference of the GPU passes.
type cpuProjector struct {
	set *memorySet
	pos []float64 // 2 per row
}

func newCPUProjector(m *memorySet) *cpuProjector {
	return &cpuProjector{set: m, pos: make([]float64, 2*m.rows)}
}

func (c *cpuProjector) project(basis [2][]float64, offset [2]float64) error {
	for i := 0; i < c.set.rows; i++ {
		var a, b float64
		for j, x := range c.set.row(i) {
			a += float64(x) * basis[0][j]
			b += float64(x) * basis[1][j]
		}
		c.pos[2*i], c.pos[2*i+1] = a-offset[0], b-offset[1]
	}
	return nil
}

func (c *cpuProjector) weightedSum(ones bool) ([2][]float64, error) {
	out := [2][]float64{make([]float64, c.set.dim), make([]float64, c.set.dim)}
	for i := 0; i < c.set.rows; i++ {
		w0, w1 := 1.0, 0.0
		if !ones {
			w0, w1 = c.pos[2*i], c.pos[2*i+1]
		}
		for j, x := range c.set.row(i) {
			out[0][j] += float64(x) * w0
			out[1][j] += float64(x) * w1
		}
	}
	return out, nil
}
