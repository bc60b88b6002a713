// Package diag holds what umbra measures about itself, for benchmarks,
// tuning and bug reports rather than for answering searches: a Trace of
// where a call's time and bytes went, the Floor (one timed read of the
// stored vectors), the Routing model Auto measured, the Limits a device
// side was planned against, and whether this binary has a GPU backend.
//
// Nothing here changes what an index answers. An engine.Index reports its
// Limits and Routing in engine.Info, times its Floor with
// engine.Index.ReadFloor, and records into a Trace that WithTrace attaches
// to the context of its calls.
package diag

import "github.com/umbravec/umbra/internal/gpu"

// GPUSupport reports whether this binary contains the wgpu backend (built
// with cgo and not with the nogpu tag). Without it every index runs on the
// CPU and Device GPU fails with engine.ErrNoGPUSupport.
func GPUSupport() bool { return gpu.Built }
