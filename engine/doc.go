// Package engine is umbra's public library: an exact similarity index over
// embedding vectors, searched by WGSL compute shaders through wgpu on any
// Vulkan, Metal, DX12 or GL adapter, or by a pure-Go fallback that returns
// the same answers.
//
// An Index owns one contiguous slab of vectors. On the GPU path the slab is
// uploaded once, at Add, and stays resident on the device: a search moves
// only the query in and its top k out, selected on the device. Vectors are
// stored under the caller's IDs (or string keys), replaced with Upsert,
// removed with Delete, and searched within a subset (Allow, AllowFunc) or
// a score threshold (SearchRange), exactly, on both paths. Open keeps an
// index in a store file whose log makes every acknowledged write survive a
// crash.
//
// Writes are two verbs over one kind of input: Add stores new rows, Upsert
// stores or replaces them, and both take a RowSource — Vectors (a slice
// per vector), Flat (one row-major slice) or a source read a piece at a
// time, such as host.MatrixReader over a vector file — with WithIDs or
// WithKeys naming the rows; Delete takes the same names. Every write is
// atomic: on an error nothing is stored. Options a call cannot honour are
// ErrInvalidOption, never ignored. Package diag holds what umbra measures
// about itself: traces (diag.WithTrace), read floors, the routing model,
// device limits and the probe's reports.
//
// Importing this package starts nothing; the GPU is touched only by New
// or Open with Device Auto or GPU, and Auto probes each adapter at most
// once per process, proving it works by compiling and running the real
// search shaders before trusting it. Every search returns the exact answer
// or an error: a GPU failure becomes an error value or, under Auto, a
// fallback to the CPU path with the reason in Info, and a panic from the GPU
// binding never crosses this package's API.
//
// Many goroutines may call an Index at once: single searches that arrive
// while one runs are answered together in one pass (Config.Coalesce),
// a write waits for searches only for the swap that publishes it, and
// under Auto a failed GPU is retried in the background until it passes its
// self-test again (Info.Recoveries).
//
// Several Config.Adapters spread the slab over several adapters, each
// holding a contiguous segment of the rows; a search runs on all of them at
// once and merges their answers exactly, and a failing shard fails the call
// whole.
//
// Config.Isolate runs the GPU work in a child process, so that a failure
// wgpu-native treats as fatal ends the child, not the caller. The child is
// the running program started again with UMBRA_GPU_CHILD=1 in its
// environment, so a program that uses Isolate must call
// ServeGPUChildIfRequested at the top of its main (a test binary: in
// TestMain): in the child it serves the device on file descriptors 3 and 4
// and exits; anywhere else it returns at once. A child whose program
// never calls it fails the index's start with an error naming the
// function. The program's init functions do run in the child, so they
// should not have side effects a second process must not repeat. Importing
// this package has no side effects of its own.
//
// The API is the same in every build. Builds without cgo, or with the
// nogpu tag, contain only the fallback: Auto resolves to it and Device GPU
// returns ErrNoGPUSupport.
package engine
