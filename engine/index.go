package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/umbravec/umbra/fallback"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/packed"
)

// Hit is one search result: the ID Add assigned to the vector, and its
// score (cosine similarity, inner product, or squared L2 distance).
type Hit struct {
	ID    uint64
	Score float32
}

// Index is an exact similarity index. All methods are safe for concurrent
// use: on the CPU path searches run in parallel with each other, on a GPU
// they take turns on the device; Add waits for running searches and blocks
// new ones while it appends.
type Index struct {
	cfg Config

	mu     sync.RWMutex
	slab   *packed.Slab
	closed bool

	// gpu is nil on the CPU path. gpuDown is set when a GPU failure under
	// Device Auto moved searches to the fallback for good; reason says why.
	dev     *gpu.Index
	route   *Routing // non-nil under Auto on a GPU
	gpuDown atomic.Bool
	whyMu   sync.Mutex
	reason  string
	hint    string
}

// New creates an empty index. With Device Auto it probes the GPU (once per
// process per adapter) and falls back to the CPU on any failure, recording
// why in Info; with Device GPU a failure is returned instead. ctx bounds the
// probe; a cancelled ctx is an error, never a fallback.
func New(ctx context.Context, cfg Config) (*Index, error) {
	return newIndex(ctx, cfg, options{})
}

// options are what tests may set beyond Config (see export_test.go).
type options struct {
	// maxChunkRows, when non-zero, caps the rows in one device buffer below
	// what the adapter's limits allow, so tests cross chunk boundaries
	// with small data.
	maxChunkRows int
}

func newIndex(ctx context.Context, cfg Config, opt options) (ix *Index, err error) {
	defer func() {
		if r := recover(); r != nil {
			ix, err = nil, fmt.Errorf("%w: %v", ErrGPU, r)
		}
	}()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// A cancelled context is an answer of its own, whatever the device and
	// whether or not a probe verdict is already cached.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("umbra: creating the index: %w", err)
	}
	ix = &Index{cfg: cfg, slab: packed.NewSlab(cfg.Dim)}
	if cfg.Device == CPU {
		return ix, nil
	}
	g, reason, hint, err := openGPU(ctx, cfg, opt, cfg.Device == GPU)
	if err != nil {
		// A probe cut short by ctx says nothing about the GPU: return
		// that rather than fall back with a misleading reason.
		if cfg.Device == GPU || ctx.Err() != nil {
			return nil, err
		}
		ix.reason, ix.hint = reason, hint
		return ix, nil
	}
	ix.dev = g
	if cfg.Device == Auto {
		r, err := routingFor(g)
		if err != nil {
			g.Release()
			ix.dev, ix.reason, ix.hint = nil, "GPU calibration failed: "+err.Error(), hintProbeFailed
			return ix, nil
		}
		ix.route = r
	}
	return ix, nil
}

// Dim returns the vector dimension.
func (ix *Index) Dim() int { return ix.cfg.Dim }

// Metric returns the index's metric.
func (ix *Index) Metric() Metric { return ix.cfg.Metric }

// Len returns the number of stored vectors.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.slab.Rows
}

// Add stores vectors and returns their IDs, which are consecutive from
// Len(). It is atomic: on any error nothing is stored. Every vector must have
// Dim finite components and, under Cosine, a non-zero norm. ctx may carry a
// Trace (see WithTrace) and a Progress (see WithProgress).
func (ix *Index) Add(ctx context.Context, vectors [][]float32) (ids []uint64, err error) {
	defer ix.recoverInto(&err)
	start := time.Now()
	report := progressFrom(ctx)
	for i, v := range vectors {
		if err := ix.checkVector(v, input{"vector", i}); err != nil {
			return nil, err
		}
		if (i+1)%progressRows == 0 {
			report("validate", i+1, len(vectors))
		}
	}
	report("validate", len(vectors), len(vectors))
	return ix.add(ctx, start, len(vectors), func(s *packed.Slab) { s.Append(vectors, ix.cfg.Metric == Cosine) })
}

// AddFlat stores rows given as one row-major slice of n×Dim values, as read
// from a .npy or .fvecs file, without building a slice per row. It is atomic
// like Add; an error names the offending row and column.
func (ix *Index) AddFlat(ctx context.Context, data []float32) (ids []uint64, err error) {
	defer ix.recoverInto(&err)
	start := time.Now()
	dim := ix.cfg.Dim
	if len(data)%dim != 0 {
		return nil, fmt.Errorf("%w: %d values is not a whole number of rows of dimension %d", ErrDimMismatch, len(data), dim)
	}
	n := len(data) / dim
	report := progressFrom(ctx)
	for i := 0; i < n; i++ {
		if err := ix.checkVector(data[i*dim:(i+1)*dim], input{"vector", i}); err != nil {
			return nil, err
		}
		if (i+1)%progressRows == 0 {
			report("validate", i+1, n)
		}
	}
	report("validate", n, n)
	return ix.add(ctx, start, n, func(s *packed.Slab) { s.AppendFlat(data, ix.cfg.Metric == Cosine) })
}

// add appends n validated vectors with pack and uploads them, undoing the
// append if Device GPU cannot upload them.
func (ix *Index) add(ctx context.Context, start time.Time, n int, pack func(*packed.Slab)) ([]uint64, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return nil, ErrClosed
	}
	old := ix.slab.Rows
	total := old + n
	if ix.cfg.MaxRows > 0 && total > ix.cfg.MaxRows {
		return nil, fmt.Errorf("%w: adding %d vectors to %d would exceed MaxRows %d", ErrTooLarge, n, old, ix.cfg.MaxRows)
	}
	if err := packed.CheckSize(total, ix.slab.Stride); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	if n == 0 {
		return []uint64{}, nil
	}
	t := traceFrom(ctx)
	pack(ix.slab)
	if t != nil {
		start = lap(&t.Marshal, start)
	}
	if ix.onGPU() {
		var st *gpu.Stages
		if t != nil {
			st = &gpu.Stages{}
		}
		report := progressFrom(ctx)
		err := ix.dev.Upload(ctx, ix.slab, old, st, func(done, total int) { report("upload", done, total) })
		t.add(st)
		if err = gpuError(err); err != nil {
			if ix.cfg.Device == GPU {
				ix.slab.Truncate(old)
				return nil, err
			}
			ix.demote(err)
		}
		if t != nil {
			lap(&t.Upload, start)
		}
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(old + i)
	}
	return ids, nil
}

// input names one vector of a call's input in an error: "vector 3",
// "query 2", or "query" for a single search (index -1). It is formatted only
// when an error is returned, so validating a million rows allocates nothing.
type input struct {
	kind  string
	index int
}

func (in input) String() string {
	if in.index < 0 {
		return in.kind
	}
	return in.kind + " " + strconv.Itoa(in.index)
}

// checkVector validates one vector of input: its length, finiteness and,
// under Cosine, a non-zero norm. what names it in the error.
func (ix *Index) checkVector(v []float32, what input) error {
	if len(v) != ix.cfg.Dim {
		return fmt.Errorf("%w: %s has %d components, index dimension is %d", ErrDimMismatch, what, len(v), ix.cfg.Dim)
	}
	zero := true
	for j, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w: %s, component %d is %v", ErrNonFinite, what, j, x)
		}
		if x != 0 {
			zero = false
		}
	}
	// Any other finite vector normalises: the norm is taken in float64, where
	// neither float32's largest nor its smallest values overflow or vanish.
	if zero && ix.cfg.Metric == Cosine {
		return fmt.Errorf("%w: %s has norm 0, which has no direction", ErrZeroVector, what)
	}
	return nil
}

// Search returns the k stored vectors most similar to query, best first;
// equal scores are ordered by lower ID. k larger than Len returns every
// vector; an empty index returns no hits.
func (ix *Index) Search(ctx context.Context, query []float32, k int) (hits []Hit, err error) {
	defer ix.recoverInto(&err)
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	q, err := ix.prepare(ctx, query, k, input{"query", -1})
	if err != nil {
		return nil, err
	}
	return ix.search(ctx, q, k)
}

// SearchBatch runs Search for every query. All queries are validated before
// any is searched.
func (ix *Index) SearchBatch(ctx context.Context, queries [][]float32, k int) (all [][]Hit, err error) {
	defer ix.recoverInto(&err)
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	qs := make([][]float32, len(queries))
	for i, query := range queries {
		if qs[i], err = ix.prepare(ctx, query, k, input{"query", i}); err != nil {
			return nil, err
		}
	}
	return ix.searchMany(ctx, qs, k)
}

// prepare validates a query and returns it normalised (for Cosine) and
// padded to the slab stride. The caller holds ix.mu.
func (ix *Index) prepare(ctx context.Context, query []float32, k int, what input) ([]float32, error) {
	if ix.closed {
		return nil, ErrClosed
	}
	if k <= 0 {
		return nil, fmt.Errorf("%w: got k=%d", ErrInvalidK, k)
	}
	if err := ix.checkVector(query, what); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ix.cfg.Metric == Cosine {
		return packed.Normalized(query, ix.slab.Stride), nil
	}
	return packed.Padded(query, ix.slab.Stride), nil
}

// search runs one prepared query. The caller holds ix.mu.
func (ix *Index) search(ctx context.Context, q []float32, k int) ([]Hit, error) {
	all, err := ix.searchMany(ctx, [][]float32{q}, k)
	if err != nil {
		return nil, err
	}
	return all[0], nil
}

// searchMany runs prepared queries on the GPU (top-k selected on the
// device) or on the fallback (rows read once per block of queries). Under
// Device Auto a GPU failure moves this and later searches to the fallback.
// The caller holds ix.mu.
func (ix *Index) searchMany(ctx context.Context, qs [][]float32, k int) ([][]Hit, error) {
	all := make([][]Hit, len(qs))
	t := traceFrom(ctx)
	if ix.slab.Rows == 0 {
		for i := range all {
			all[i] = []Hit{}
		}
		return all, nil
	}
	if len(qs) > progressQueries {
		if p, ok := ctx.Value(progressKey{}).(Progress); ok && p != nil {
			return ix.searchInPieces(ctx, qs, k)
		}
	}
	if ix.onGPU() && (ix.route == nil || ix.route.preferGPU(int64(ix.slab.Bytes()), len(qs))) {
		var st *gpu.Stages
		if t != nil {
			st = &gpu.Stages{}
		}
		res, err := ix.dev.Search(ctx, qs, k, ix.slab.Rows, st)
		t.add(st)
		err = gpuError(err)
		if err == nil {
			if t != nil {
				t.Backend = BackendGPU
			}
			for i, r := range res {
				all[i] = toHits(r)
			}
			return all, nil
		}
		if ctx.Err() != nil || ix.cfg.Device == GPU {
			return nil, err
		}
		// A request the device cannot take in one piece says nothing
		// about the device: this call is answered on the CPU, later ones
		// still go to the GPU. Any other failure moves the index off it.
		if !errors.Is(err, ErrTooLarge) {
			ix.demote(err)
		}
	}
	start := time.Now()
	var res [][]fallback.Hit
	var err error
	if len(qs) == 1 {
		var one []fallback.Hit
		one, err = fallback.Search(ctx, ix.view(), qs[0], k, ix.fallbackMetric(), ix.cfg.Workers)
		res = [][]fallback.Hit{one}
	} else {
		res, err = fallback.SearchBatch(ctx, ix.view(), qs, k, ix.fallbackMetric(), ix.cfg.Workers)
	}
	if err != nil {
		return nil, err
	}
	if t != nil {
		lap(&t.Kernel, start)
		t.KernelClock, t.Backend = "cpu", BackendCPU
	}
	for i, r := range res {
		all[i] = toHits(r)
	}
	return all, nil
}

// searchInPieces runs a large batch progressQueries at a time so a
// Progress can be told how far it has got. Each piece still reads a row once
// per tile of queries, so the split costs one pass over the slab per piece.
// The caller holds ix.mu.
func (ix *Index) searchInPieces(ctx context.Context, qs [][]float32, k int) ([][]Hit, error) {
	report := progressFrom(ctx)
	quiet := context.WithValue(ctx, progressKey{}, Progress(nil))
	all := make([][]Hit, 0, len(qs))
	for lo := 0; lo < len(qs); lo += progressQueries {
		part, err := ix.searchMany(quiet, qs[lo:min(lo+progressQueries, len(qs))], k)
		if err != nil {
			return nil, err
		}
		all = append(all, part...)
		report("search", len(all), len(qs))
	}
	return all, nil
}

func (ix *Index) onGPU() bool { return ix.dev != nil && !ix.gpuDown.Load() }

// demote moves an Auto index to the fallback after a GPU failure. The slab
// is kept on the host, so nothing is lost.
func (ix *Index) demote(err error) {
	ix.whyMu.Lock()
	defer ix.whyMu.Unlock()
	if ix.gpuDown.CompareAndSwap(false, true) {
		if errors.Is(err, ErrTooLarge) {
			ix.reason = "the index outgrew what the GPU can hold, searches moved to the CPU: " + err.Error()
			ix.hint = hintTooLarge
		} else {
			ix.reason = "GPU failed after start-up, searches moved to the CPU: " + err.Error()
			ix.hint = hintProbeFailed
		}
	}
}

func (ix *Index) view() fallback.Slab {
	s := ix.slab
	return fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride}
}

func (ix *Index) fallbackMetric() fallback.Metric { return ix.cfg.Metric.fallbackCode() }

func toHits(r []fallback.Hit) []Hit {
	hits := make([]Hit, len(r))
	for i, h := range r {
		hits[i] = Hit{ID: uint64(h.Row), Score: h.Score}
	}
	return hits
}

// Info reports the backend, the adapter and, for a fallback, why.
func (ix *Index) Info() Info {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	info := Info{
		Backend:   BackendCPU,
		CPUKernel: fallback.Kernel(),
	}
	if ix.dev != nil {
		info.Adapter = AdapterInfo(ix.dev.Adapter())
		info.Limits = DeviceLimits(ix.dev.Limits())
		info.ChunkRows = ix.dev.ChunkRows()
		info.Chunks = (ix.slab.Rows + info.ChunkRows - 1) / info.ChunkRows
		if ix.onGPU() {
			info.Backend = BackendGPU
		}
		if ix.route != nil {
			info.Routing = ix.route
		}
	}
	ix.whyMu.Lock()
	info.Reason, info.Hint = ix.reason, ix.hint
	ix.whyMu.Unlock()
	return info
}

// Close releases the index's device buffers. Later calls return ErrClosed;
// closing twice is harmless.
func (ix *Index) Close() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return nil
	}
	ix.closed = true
	if ix.dev != nil {
		ix.dev.Release()
	}
	ix.slab = packed.NewSlab(ix.cfg.Dim)
	return nil
}

// recoverInto turns a panic below the API into an ErrGPU error: the binding
// panics on some failures, and no panic may reach the caller.
func (ix *Index) recoverInto(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %v", ErrGPU, r)
	}
}
