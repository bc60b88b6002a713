// Package packed owns the engine's host-side layout: the one contiguous
// Slab every backend reads (rows padded to a vec4 stride with zeros that
// never change a score), normalisation for cosine, and the planning of a
// slab into chunks that fit a device's real limits.
//
// Turning scattered vectors into one contiguous block on every call is what
// made a GPU search slow in the engine umbra grew out of (84% of its time),
// so here packing happens once, when vectors are added, and the packed Slab
// is what both the GPU upload and the CPU fallback read. It is internal:
// users hand the engine [][]float32 or a flat []float32 and never see it.
package packed
