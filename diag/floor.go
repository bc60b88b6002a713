package diag

import "time"

// Floor is one timed plain read of an index's stored vectors on the path
// that serves it: the memory-bandwidth floor any exact scan of them must
// pay. Benchmarks report search times as multiples of it.
type Floor struct {
	Device string // "gpu" or "cpu"
	Bytes  int64
	Time   time.Duration
	// Clock says how Time was taken, as Trace.KernelClock does: "gpu"
	// (device timestamps around the dispatches), "wall" or "cpu".
	Clock string
}

// BytesPerSecond is the achieved read bandwidth.
func (f Floor) BytesPerSecond() float64 {
	if f.Time <= 0 {
		return 0
	}
	return float64(f.Bytes) / f.Time.Seconds()
}
