package diag

import (
	"context"
	"time"
)

// Trace collects where the time of writes and searches went, stage by
// stage, the way net/http/httptrace does for requests: attach one to a
// context with WithTrace and pass that context to an index's Add, Upsert,
// Search or SearchBatch. Stages a path does not have stay zero. Durations
// add up over the calls that used the context; a Trace is not safe for
// calls running at the same time.
//
// A traced GPU search issues exactly what an untraced one does (one
// submission and one map per search); it only waits for the device once
// more, after the submission, so that Kernel ends when the work does:
// Upload is the queued writes, Kernel the submission until the device is
// idle (the GPU's clock for the dispatches where it writes timestamps, the
// rest then counted as Readback), Readback the map.
type Trace struct {
	Marshal  time.Duration // host: validate and pack vectors into the slab
	Upload   time.Duration // host to device: slab rows (Add) or the query (Search, queued writes)
	Kernel   time.Duration // the scoring and top-k dispatches (GPU) or the scan (CPU)
	Readback time.Duration // device to host: copy and map the results
	Select   time.Duration // host: top-k selection over read-back scores
	// Filter is the host's work on a search's filters before any row is
	// read: the bitmap of the rows Where, Allow, AllowFunc and the
	// deletions admit, its count, and for a gather the list of its rows.
	Filter time.Duration

	// What the GPU path issued, counted where its wgpu calls are made
	// (zero on the CPU path): compute dispatches, queue submissions, buffer
	// maps (each a round trip that waits for the device), bytes written to
	// the device (queries, parameters, rows at Add) and bytes read back.
	// A search whose k is within the fused top-k's limit (`umbra probe
	// --json`'s chosen.fused_k) issues one scan dispatch
	// per device chunk plus one merge, one submission and one map.
	Dispatches, Submissions, Maps int64
	BytesUp, BytesDown            int64
	// SelectPath is how the last traced GPU search selected: "fused",
	// "radix", "host" (every score read back), "scores" (a compressed
	// index's sums read back) or "qselect" (a compressed index's
	// candidates selected on the device, only they read back).
	SelectPath string
	// KernelClock says how Kernel was timed: "gpu" (timestamps written by
	// the device before the first and after the last dispatch, where it
	// supports timestamps inside compute passes), "wall" (submit and wait
	// on the host clock) or "cpu" (the fallback's scan).
	KernelClock string
	// Device is the path that served the last traced search, "gpu" or
	// "cpu": under Device Auto a GPU index may route a small search to
	// the CPU, and under any Device a float32 search whose scores a device
	// that flushes subnormals could change (tiny magnitudes, see
	// docs/how-it-works.md) runs on the CPU.
	Device string
	// Subset says how the last traced search met the rows its filters
	// admitted (Where, Allow, AllowFunc, and the rows deleted): "gather"
	// when it read and scored only the admitted rows, "scan" when it read
	// every row and the bitmap decided which may enter the top k, "" when
	// every row was admitted. Which is faster is measured, not assumed:
	// docs/memory.md, "What a filter costs". Admitted counts the rows the
	// filters admitted, summed over the traced queries.
	Subset   string
	Admitted int64

	// The scan's cost: Searches counts the queries traced (k-nearest
	// searches, on every path); BytesRead the row bytes the scan read for
	// them: the float32 rows once per block of queries on the CPU, once per
	// tile of queries (the queries one workgroup scores together) on the
	// GPU, so BytesRead / (Searches × the rows' bytes) is the passes over
	// the rows per query. Under a compressed precision BytesRead is the
	// compressed bytes scanned (by the device, once per tile of queries,
	// on the GPU) plus the float32 bytes rescored, Rescored how many rows
	// were scored again in float32 (Rescored/Searches the mean) and
	// MaxRescored the most for one query. On the GPU, Select holds the
	// host's bounding of the device's sums and the rescore. The GPU's
	// figure is what its dispatches cover, not a hardware counter: a
	// cache may serve part of it.
	Searches    int
	Rescored    int64
	MaxRescored int
	BytesRead   int64

	// The stages of a write (Add, Upsert): Pack, Assign and Compress make
	// up its Marshal, Upload follows them on a GPU, then Log and Publish.
	// Pack checks, normalises and writes the rows into the slab, from the
	// call's start (the first touch of newly allocated memory is in it, as
	// it would be in a plain copy); Assign assigns or checks the IDs;
	// Compress is the compressed copy of the new rows (F16, Int8); Log
	// writes the store's log record and syncs it as the store's log sync
	// says (an Add of 256 rows or more to a store on the CPU compresses
	// beside its log write, so there the two overlap and the call takes
	// the longer, not both); Publish is the swap that makes the rows
	// visible. Rows counts the vectors the traced writes stored.
	Pack, Assign, Compress, Log, Publish time.Duration
	Rows                                 int64
}

type traceKey struct{}

// WithTrace returns a context that makes an index's calls record into t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// ContextTrace returns the Trace WithTrace attached to ctx, or nil.
func ContextTrace(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}
