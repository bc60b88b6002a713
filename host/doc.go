// Package host owns umbra's host-side data layout: the contiguous Slab that
// every backend reads (rows padded to a vec4 stride), normalisation for
// cosine, chunk planning against a device's real limits, and readers and
// writers for the .npy and .fvecs files users bring.
//
// The seed's lesson is that the GPU was never the bottleneck: turning
// scattered vectors into one contiguous block on every call was. Here that
// packing happens once, when vectors are added, and the packed Slab is what
// both the GPU upload and the CPU fallback read.
package host
