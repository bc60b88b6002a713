// Package gpu is umbra's host-side GPU driver, written once for every GPU
// API: the device and its probe (self-tests, tuning, the variant chosen
// and why), the resident chunks of a slab and its device-memory budget,
// the scoring and selection passes, the scaling that keeps a device that
// flushes subnormals exact, masks and tombstones, how a batch is cut
// into submissions, the decoding of what comes back, and the timing. It
// runs on the ~10 calls an API gives (gpuplan.API: buffers, writes,
// pipelines, one submission and its read back, error scopes):
// wgpu-native through cgo (internal/gpu/native, this package's wgpu.go)
// and a browser's WebGPU (internal/webgpu). It speaks in neutral types —
// its own Limits and Report, and internal/core's AdapterInfo, Stages,
// Metric, Precision and Hit — and selects on the host with internal/topk;
// package engine decides policy — which adapter, when to fall back, how
// to route — and converts at its boundary.
//
// The driver builds everywhere. wgpu-native exists in builds with cgo and
// without the nogpu tag; in other builds Adapters and Probe report
// ErrNotBuilt, the standard library's _generic.go pattern, so engine has
// no build tags.
//
// Files by concept: device.go (the driver's device), wgpu.go (adapters,
// the probe's verdict cache, a device the caller owns, its buffers as
// wgpu's), selftest.go, flushcheck.go and tune.go (what the probe proves
// and measures), pipelines.go (which pipelines, built by the API),
// index.go (resident chunks and uploads), budget.go (device memory),
// search.go (one search: buffers, submission, readback, selection),
// gather.go (a filter's admitted rows scored alone, and its costs),
// flush.go (subnormals), timing.go (the read floor), calibrate.go (Auto's
// routing measurements), share.go (a device owner's use of an index's
// rows and scores), qselect.go (a compressed index's candidates selected
// on the device), recover.go (Renew).
package gpu
