//go:build !amd64 || purego

package exact

// i8Pass is scanI8Dot's skip of the rows its first test rejects; the
// scalar test does it in these builds.
func i8Pass(scale []float32, raw []int32, from int, off int32, theta float64) int { return from }

// i8PassRuns says whether i8Pass skips anything here: not in these builds.
func i8PassRuns() bool { return false }
