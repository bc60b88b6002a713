package engine

import (
	"context"
	"time"

	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/internal/gpu"
)

// writeStage names one of a Trace's write stages.
type writeStage int

const (
	stagePack writeStage = iota
	stageAssign
	stageCompress
	stageLog
	stagePublish
)

// lapWrite adds the time since *mark to stage s of t (and to Marshal for
// the stages that make it up) and moves *mark to now; nothing when t is
// nil.
func lapWrite(t *diag.Trace, s writeStage, mark *time.Time) {
	if t == nil {
		return
	}
	now := time.Now()
	d := now.Sub(*mark)
	*mark = now
	switch s {
	case stagePack:
		t.Pack += d
	case stageAssign:
		t.Assign += d
	case stageCompress:
		t.Compress += d
	case stageLog:
		t.Log += d
		return
	case stagePublish:
		t.Publish += d
		return
	}
	t.Marshal += d
}

// traceFrom is the Trace diag.WithTrace attached to ctx, or nil.
func traceFrom(ctx context.Context) *diag.Trace { return diag.ContextTrace(ctx) }

// lap adds the time since start to the stage total *d and returns now, the
// next stage's start. Callers hold a non-nil Trace.
func lap(d *time.Duration, start time.Time) time.Time {
	now := time.Now()
	*d += now.Sub(start)
	return now
}

// addStages adds the device stages st recorded into t; either may be nil.
func addStages(t *diag.Trace, st *gpu.Stages) {
	if t == nil || st == nil {
		return
	}
	t.Upload += st.Upload
	t.Kernel += st.Kernel
	t.Readback += st.Readback
	t.Select += st.Select
	t.Dispatches += st.Dispatches
	t.Submissions += st.Submissions
	t.Maps += st.Maps
	t.BytesUp += st.BytesUp
	t.BytesDown += st.BytesDown
	if st.KernelClock != "" {
		t.KernelClock = st.KernelClock
	}
	if st.Path != "" {
		t.SelectPath = st.Path
	}
}
