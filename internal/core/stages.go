package core

import "time"

// Stages accumulates where a traced call spent its time on the device, and
// what it issued; internal/gpu records into it, and engine adds it into
// the caller's diag.Trace.
type Stages struct {
	Upload, Kernel, Readback, Select time.Duration
	// KernelClock says how Kernel was timed: "gpu" (device timestamps) or
	// "wall" (submit and wait on the host clock).
	KernelClock string
	// What the calls issued, counted where the wgpu calls are made:
	// compute dispatches, queue submissions, buffer maps (each a round
	// trip that waits for the device), bytes written to the device by
	// queue writes, and bytes read back through maps.
	Dispatches, Submissions, Maps int64
	BytesUp, BytesDown            int64
	// BytesRead is the row bytes the scan kernels read on the device:
	// every resident row once per tile of queries (the queries one
	// workgroup scores together), on the radix and fused paths and for a
	// compressed index's sums alike. It is the dispatches' coverage, not a
	// hardware counter: a cache may serve part of it.
	BytesRead int64
	// Path is the selection the last search used: "fused" (scan and
	// select in one pass, topk.wgsl), "radix" (scores, then select.wgsl),
	// "host" (every score read back, selected on the host), "scores", or
	// "qselect" (a compressed index's candidates selected on the device).
	Path string
}

// Totals names, by pointer, the fields a Stages is added into: another
// Stages' (Add), or those of a type that keeps the same figures in fields
// of its own (diag.Trace). A nil pointer drops its figure.
type Totals struct {
	Upload, Kernel, Readback, Select *time.Duration
	Dispatches, Submissions, Maps    *int64
	BytesUp, BytesDown               *int64
	BytesRead                        *int64
	KernelClock, Path                *string
}

// AddTo adds s into t by the one rule of how stages accumulate: durations
// and counts add up, a non-empty KernelClock or Path replaces the one
// before (the last traced call's). A nil s adds nothing.
func (s *Stages) AddTo(t Totals) {
	if s == nil {
		return
	}
	for _, d := range []struct {
		to   *time.Duration
		from time.Duration
	}{{t.Upload, s.Upload}, {t.Kernel, s.Kernel}, {t.Readback, s.Readback}, {t.Select, s.Select}} {
		if d.to != nil {
			*d.to += d.from
		}
	}
	for _, n := range []struct {
		to   *int64
		from int64
	}{
		{t.Dispatches, s.Dispatches}, {t.Submissions, s.Submissions}, {t.Maps, s.Maps},
		{t.BytesUp, s.BytesUp}, {t.BytesDown, s.BytesDown}, {t.BytesRead, s.BytesRead},
	} {
		if n.to != nil {
			*n.to += n.from
		}
	}
	for _, w := range []struct {
		to   *string
		from string
	}{{t.KernelClock, s.KernelClock}, {t.Path, s.Path}} {
		if w.to != nil && w.from != "" {
			*w.to = w.from
		}
	}
}

// Add adds o into s (AddTo's rule); either may be nil.
func (s *Stages) Add(o *Stages) {
	if s == nil {
		return
	}
	o.AddTo(Totals{
		Upload: &s.Upload, Kernel: &s.Kernel, Readback: &s.Readback, Select: &s.Select,
		Dispatches: &s.Dispatches, Submissions: &s.Submissions, Maps: &s.Maps,
		BytesUp: &s.BytesUp, BytesDown: &s.BytesDown, BytesRead: &s.BytesRead,
		KernelClock: &s.KernelClock, Path: &s.Path,
	})
}
