//go:build cgo && !nogpu

package main

// gpuSupport mirrors the engine's build constraint for its wgpu backend
// (engine/gpu_device.go), which the engine does not export yet.
const gpuSupport = true
