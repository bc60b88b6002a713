// Package growbuf holds the large buffers an index grows (the packed
// rows, their compressed copy): in a region of reserved address space
// where it can (region.go), so that they grow in place, and otherwise on
// the heap, reallocated without stalling the rest of the process.
//
// The copy of a buffer of hundreds of megabytes is, written as copy, one
// call of the runtime's memmove, which cannot be preempted: a garbage
// collection that starts meanwhile waits for it, spinning and signalling
// on another core for as long as the copy takes — and a copy into new
// memory takes as long as faulting in every page of it (on the 2-core
// virtual machine this was measured on, about 3 ms a megabyte). Grow and
// Copy copy a chunk at a time, so the goroutine can be preempted between
// chunks: in the Chroma server's add benchmark (internal/chroma
// BenchmarkAdd) the process's CPU time fell from 5.8 s to 3.5 s and the
// rows added a second rose from about 7,400 to 9,000–9,700.
package growbuf

import "unsafe"

// chunkBytes is how much Grow copies between preemption points.
const chunkBytes = 1 << 20

// Grow returns a new slice of length length and capacity capacity
// holding a copy of s (len(s) <= length <= capacity); the elements past
// len(s) are zero.
func Grow[T any](s []T, length, capacity int) []T {
	g := make([]T, length, capacity)
	Copy(g, s)
	return g
}

// Copy is copy(dst, src), a chunk at a time so that the goroutine can be
// preempted between chunks (see the package doc).
func Copy[T any](dst, src []T) int {
	var zero T
	step := len(src)
	if size := int(unsafe.Sizeof(zero)); size > 0 {
		step = max(1, chunkBytes/size)
	}
	n := 0
	for len(src) > 0 && len(dst) > 0 {
		c := copy(dst[:min(step, len(dst))], src[:min(step, len(src))])
		n += c
		dst, src = dst[c:], src[c:]
	}
	return n
}
