package engine

import (
	"context"
	"time"

	"github.com/umbravec/umbra/internal/core"
)

// Trace collects where the time of writes and searches went, stage by
// stage, the way net/http/httptrace does for requests: attach one to a
// context with WithTrace and pass that context to Add, AddFlat, AdoptFlat,
// AddFrom (and its WithIDs and WithKeys forms), Upsert, Search or
// SearchBatch. Stages a path does not have stay zero. Durations add up
// over the calls that used the context. A traced GPU search issues exactly what an
// untraced one does (one submission and one map per search); it only waits
// for the device once more, after the submission, so that Kernel ends when
// the work does: Upload is the queued writes, Kernel the submission until
// the device is idle (the GPU's clock for the dispatches where it writes
// timestamps, the rest then counted as Readback), Readback the map.
type Trace struct {
	Marshal  time.Duration // host: validate and pack vectors into the slab
	Upload   time.Duration // host to device: slab rows (Add) or the query (Search, queued writes)
	Kernel   time.Duration // the scoring and top-k dispatches (GPU) or the scan (CPU)
	Readback time.Duration // device to host: copy and map the results
	Select   time.Duration // host: top-k selection over read-back scores

	UploadBytes   int64
	ReadbackBytes int64
	// What the GPU path issued, counted where its wgpu calls are made
	// (zero on the CPU path): compute dispatches, queue submissions, buffer
	// maps (each a round trip that waits for the device), bytes written to
	// the device (queries, parameters, rows at Add) and bytes read back.
	// A traced search issues exactly what an untraced one does. A search
	// whose k is within DeviceLimits.FusedK issues one scan dispatch per
	// device chunk plus one merge, one submission and one map.
	Dispatches, Submissions, Maps int64
	BytesUp, BytesDown            int64
	// SelectPath is how the last traced GPU search selected: "fused",
	// "radix", "host" (every score read back) or "scores".
	SelectPath string
	// KernelClock says how Kernel was timed: "gpu" (timestamps written by
	// the device before the first and after the last dispatch, where it
	// supports timestamps inside compute passes), "wall" (submit and wait
	// on the host clock) or "cpu" (the fallback's scan).
	KernelClock string
	// Backend is the path that served the last traced search: under Device
	// Auto a GPU index may route a small search to the CPU.
	Backend Backend

	// The scan's cost: Searches counts the queries traced (on the CPU
	// path, and on the GPU under a compressed precision); under a
	// compressed precision Rescored is how many rows were scored again in
	// float32 over those queries (Rescored/Searches the mean), MaxRescored
	// the most for one query, and BytesRead the compressed bytes scanned
	// (by the device, once per tile of queries, on the GPU) plus the
	// float32 bytes rescored. On the GPU, Select holds the host's bounding
	// of the device's sums and the rescore.
	Searches    int
	Rescored    int64
	MaxRescored int
	BytesRead   int64

	// The stages of a write (Add, AddFlat, AdoptFlat, Upsert): Pack, Assign
	// and Compress make up its Marshal, Upload follows them on a GPU, then
	// Log and Publish. Pack checks, normalises and writes the rows into the
	// slab, from the call's start (the first touch of newly allocated
	// memory is in it, as it would be in a plain copy); Assign assigns or
	// checks the IDs; Compress is the compressed copy of the new rows
	// (F16, Int8); Log writes the store's log record and syncs it as
	// Config.LogSync says; Publish is the swap that makes the rows
	// visible. Rows counts the vectors the traced writes stored.
	Pack, Assign, Compress, Log, Publish time.Duration
	Rows                                 int64
}

// writeStage names one of a Trace's write stages.
type writeStage int

const (
	stagePack writeStage = iota
	stageAssign
	stageCompress
	stageLog
	stagePublish
)

// lapWrite adds the time since *mark to stage s (and to Marshal for the
// stages that make it up) and moves *mark to now; nothing when t is nil.
func (t *Trace) lapWrite(s writeStage, mark *time.Time) {
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

type traceKey struct{}

// WithTrace returns a context that makes engine calls record into t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

func traceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// lap adds the time since start to the stage total *d and returns now, the
// next stage's start. Callers hold a non-nil Trace.
func lap(d *time.Duration, start time.Time) time.Time {
	now := time.Now()
	*d += now.Sub(start)
	return now
}

// add adds the device stages st recorded into t, by core.Stages' one
// rule of accumulation; either may be nil.
func (t *Trace) add(st *core.Stages) {
	if t == nil {
		return
	}
	st.AddTo(core.Totals{
		Upload: &t.Upload, Kernel: &t.Kernel, Readback: &t.Readback, Select: &t.Select,
		UploadBytes: &t.UploadBytes, ReadbackBytes: &t.ReadbackBytes,
		Dispatches: &t.Dispatches, Submissions: &t.Submissions, Maps: &t.Maps,
		BytesUp: &t.BytesUp, BytesDown: &t.BytesDown,
		KernelClock: &t.KernelClock, Path: &t.SelectPath,
	})
}
