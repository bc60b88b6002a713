//go:build amd64 && !purego

package packed

import "golang.org/x/sys/cpu"

// scaleAVX2 is scaleGo eight values at a time (scale_amd64.s).
//
//go:noescape
func scaleAVX2(dst, src *float32, n int, inv float64)

// sumLanesAVX2 is sumLanesGo over n values, n a multiple of lanes
// (norm_amd64.s).
//
//go:noescape
func sumLanesAVX2(acc *[lanes]float64, v *float32, n int)

var haveAsm = cpu.X86.HasAVX2

// sumLanes adds the squares of v (a multiple of lanes long) into acc as
// sumLanesGo does, bit for bit.
func sumLanes(acc *[lanes]float64, v []float32) {
	if haveAsm && len(v) > 0 {
		sumLanesAVX2(acc, &v[0], len(v)&^(lanes-1))
		return
	}
	sumLanesGo(acc, v)
}

// scaleValues writes float32(float64(v[j])*inv) to dst[j] (len(dst) ==
// len(v)), bit for bit as scaleGo does.
func scaleValues(dst, v []float32, inv float64) {
	if haveAsm && len(v) > 0 {
		_ = dst[len(v)-1]
		scaleAVX2(&dst[0], &v[0], len(v), inv)
		return
	}
	scaleGo(dst, v, inv)
}
