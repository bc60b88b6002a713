//go:build (!amd64 && !arm64) || purego

package packed

// haveAsm is false without an assembly kernel.
const haveAsm = false

// scaleValues writes float32(float64(v[j])*inv) to dst[j].
func scaleValues(dst, v []float32, inv float64) { scaleGo(dst, v, inv) }

// sumLanes adds the squares of v into acc (sumLanesGo).
func sumLanes(acc *[lanes]float64, v []float32) { sumLanesGo(acc, v) }
