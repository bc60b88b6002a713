// Package shaders holds umbra's WGSL compute shaders, embedded at build time,
// and the small helpers that fill in their compile-time constants (vector
// width, threads per row, rows per workgroup) for one index's dimension and
// metric. It compiles without cgo: it only produces source text.
package shaders
