// Package host reads and writes the vector files users bring to umbra:
// .npy (float32 and float16, C order, 2-D) and .fvecs, as one row-major
// Matrix ready for engine.Index.AddFlat, and converts float16 values.
package host
