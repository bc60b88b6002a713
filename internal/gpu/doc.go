// Package gpu is umbra's wgpu backend: the device and its probe, the
// resident chunks of a slab, the scoring and selection passes, and their
// timing. It speaks in neutral types — its own Limits and Report, and
// internal/core's AdapterInfo, Stages, Metric, Precision and Hit — and
// selects on the host with internal/topk, never through the CPU backend
// (package fallback); package engine decides policy — which
// adapter, when to fall back, how to route — and converts at its boundary.
//
// The backend exists in builds with cgo and without the nogpu tag; in other
// builds the same names exist and every entry point reports ErrNotBuilt,
// the standard library's _generic.go pattern, so engine has no build tags.
//
// Files by concept: device.go (instance, adapters, device creation, the
// probe's verdict cache), selftest.go and tune.go (what the probe proves
// and measures), pipelines.go (shader compilation), scope.go (wgpu-native
// error scopes and timestamps the binding lacks), index.go (resident
// chunks and uploads), search.go (one search: buffers, submission,
// readback, selection), timing.go (GPU timestamps and the read floor), calibrate.go (Auto's
// routing measurements), adopt.go (a device the caller owns), share.go
// (that caller's use of an index's rows and scores: cgo builds only, as
// its only user, engine/ondevice, is).
package gpu
