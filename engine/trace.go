package engine

import (
	"context"
	"time"

	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/internal/core"
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

// lapWrite adds the time since *mark to stage s of t (addWrite) and moves
// *mark to now; nothing when t is nil.
func lapWrite(t *diag.Trace, s writeStage, mark *time.Time) {
	if t == nil {
		return
	}
	now := time.Now()
	addWrite(t, s, now.Sub(*mark))
	*mark = now
}

// addWrite adds d to stage s of t, and to Marshal for the stages that make
// it up. t is not nil.
func addWrite(t *diag.Trace, s writeStage, d time.Duration) {
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

// addStages adds the device stages st recorded into t, by core.Stages'
// one rule of accumulation; either may be nil. st.BytesRead is left to the
// caller: a compressed search counts the device's passes in its
// QuantStats, a float32 one adds it itself.
func addStages(t *diag.Trace, st *core.Stages) {
	if t == nil {
		return
	}
	st.AddTo(core.Totals{
		Upload: &t.Upload, Kernel: &t.Kernel, Readback: &t.Readback, Select: &t.Select,
		Dispatches: &t.Dispatches, Submissions: &t.Submissions, Maps: &t.Maps,
		BytesUp: &t.BytesUp, BytesDown: &t.BytesDown,
		KernelClock: &t.KernelClock, Path: &t.SelectPath,
	})
}
