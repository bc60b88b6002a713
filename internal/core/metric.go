package core

import "github.com/umbravec/umbra"

// Metric is umbra.Metric, named here for the layers below engine (the CPU
// kernels, the GPU backends and the shaders' templates) that rank by it.
type Metric = umbra.Metric

// The metrics, as umbra declares them.
const (
	Cosine = umbra.Cosine
	Dot    = umbra.Dot
	L2     = umbra.L2
)
