// Package fallback is umbra's pure-Go CPU backend: exact dot-product and
// squared-L2 scoring of one or many queries against a packed [Slab] of rows,
// and the bounded top-k selection (internal/topk) that turns scores into
// ranked [Hit]s.
//
// It owns the float32 CPU kernels (portable Go everywhere, AVX2+FMA and
// AVX-512 assembly on amd64 and NEON on arm64, chosen once at init by CPU
// feature detection;
// the purego build tag forces the portable ones), the split of a slab's
// blocks across goroutines (internal/parallel), and the query/row tiling of batch search that lets each row be
// read from memory once per block of queries ([QueryBlock] queries). Results
// are ordered best first, equal float32 scores broken by the lower ID
// ([Slab].IDs; the lower row when a slab names none, which is the same
// order when IDs increase with the row): internal/topk's rule, the one
// every path of the engine returns its hits in.
//
// [ReadPass] reads a slab once with the same loads and goroutines as Search
// and nothing else: the memory-bandwidth floor that benchmarks compare
// Search with.
//
// [ScoreRun] scores a run of rows with the kernel Search uses, so that the
// exact search of compressed rows (internal/exact), which rescores its
// candidates in float32 on the CPU whether a CPU or a GPU scanned the
// codes, reports the very scores Search would.
//
// The package compiles with CGO_ENABLED=0 and imports nothing from umbra
// but internal/core (the Metric and Hit every layer shares), internal/topk
// (the ordering rule and the selection), internal/parallel and
// internal/kernelset (where umbra's tests and cmd/bench may force another
// kernel set).
// Callers (the engine) validate user input; this package only refuses
// shapes that would otherwise make it index out of range.
package fallback
