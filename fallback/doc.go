// Package fallback is umbra's pure-Go CPU backend: exact dot-product and
// squared-L2 scoring of one or many queries against a packed [Slab] of rows,
// and the bounded top-k selection (internal/topk) that turns scores into
// ranked [Hit]s.
//
// It owns the CPU kernels (portable Go everywhere, AVX2+FMA and AVX-512
// assembly on amd64 chosen once at init by CPU feature detection; the purego
// build tag forces the portable ones), the parallel split of a slab across
// goroutines, and the query/row tiling of batch search that lets each row be
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
// The package compiles with CGO_ENABLED=0 and imports nothing from umbra
// but internal/core (the Metric, Precision and Hit every layer shares) and
// internal/topk (the ordering rule and the selection).
// Callers (the engine) validate user input; this package only refuses
// shapes that would otherwise make it index out of range.
package fallback
