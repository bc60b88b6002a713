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
// Scans hand each worker a contiguous share of the slab's blocks, walked in
// order (internal/parallel's RunShares, stealing from the back of the
// largest share when a worker is done), so every core reads one stream;
// short rows are scored one at a time (memory read strictly in order),
// long rows eight in step with a software prefetch ahead of each. Every
// grouping sums a (row, query) pair in the one order, so the bits do not
// depend on it.
//
// [ReadPass] reads a slab's bytes once as a plain stream with the widest
// loads and the same workers, and nothing else: the memory-bandwidth floor
// that benchmarks compare Search with (cmd/bench --cfloor holds it to an
// independent C read loop).
//
// [SearchRows], [SearchRowsBatch] and [RangeRows] score only a list of
// rows — a filter's admitted rows when they are few — with gather kernels
// that run the one-row kernel's loop on each listed row (prefetching the
// rows ahead), so their answers are Search's with those rows in Allow, bit
// for bit.
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
