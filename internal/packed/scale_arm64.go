//go:build arm64 && !purego

package packed

import "golang.org/x/sys/cpu"

// scaleNEON is scaleGo eight values at a time (scale_arm64.s).
//
//go:noescape
func scaleNEON(dst, src *float32, n int, inv float64)

// sumLanesNEON is sumLanesGo over n values, n a multiple of lanes
// (norm_arm64.s).
//
//go:noescape
func sumLanesNEON(acc *[lanes]float64, v *float32, n int)

var haveAsm = cpu.ARM64.HasASIMD && cpu.ARM64.HasFP

// sumLanes adds the squares of v (a multiple of lanes long) into acc as
// sumLanesGo does, bit for bit.
func sumLanes(acc *[lanes]float64, v []float32) {
	if haveAsm && len(v) > 0 {
		sumLanesNEON(acc, &v[0], len(v)&^(lanes-1))
		return
	}
	sumLanesGo(acc, v)
}

// scaleValues writes float32(float64(v[j])*inv) to dst[j] (len(dst) ==
// len(v)), bit for bit as scaleGo does.
func scaleValues(dst, v []float32, inv float64) {
	if haveAsm && len(v) > 0 {
		_ = dst[len(v)-1]
		scaleNEON(&dst[0], &v[0], len(v), inv)
		return
	}
	scaleGo(dst, v, inv)
}
