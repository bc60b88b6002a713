// Package exact is the exact search of compressed rows, the one room both
// paths of a compressed index go through: the CPU's (ExactSearchBatch,
// ExactRange, which scan the codes with this package's own kernels) and
// the GPU's (ExactSearchSums, ExactRangeSums, which take the raw sums a
// device computed over the same codes, DeviceQuery and DeviceSums).
//
// It owns the compressed copy of a slab (Compressed: float16 or int8
// codes, with every row's error bound), the certified interval each raw
// sum gives a row's float32 score (quant_bounds.go derives it), the scan
// that keeps only the rows whose interval can reach the k-th best, and the
// float32 rescore of those rows. The rescore scores with the CPU backend's
// own kernel (fallback.ScoreRun), so its scores are the bits
// fallback.Search returns, and selects with internal/topk, so its order is
// theirs: a compressed search returns exactly what a float32 one does.
//
// The int8 and float16 kernels (portable Go; on amd64 AVX-512 with VNNI,
// AVX-VNNI, and AVX2 with F16C and FMA assembly, the best the CPU runs
// chosen at init; QuantKernel names them, internal/kernelset lets tests and
// cmd/bench force another) live here, beside the bounds they feed. internal/gpu does not import this package:
// the engine hands a device's sums to it.
//
// On arm64 the kernels are NEON (quant_arm64.go): int8 with the Armv8.2
// dot-product instructions where the CPU has them ("neon+dotprod") and
// widening multiply-adds where not ("neon"), float16 widened by FCVTL.
package exact
