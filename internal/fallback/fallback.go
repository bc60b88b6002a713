package fallback

import (
	"errors"
	"fmt"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/parallel"
)

// Metric is the score a kernel computes and which end of it is best:
// engine's metrics, named here for this package's callers. Dot scores a
// row by dot(row, q), larger better; Cosine is the same kernel over rows
// and a query the caller has already normalised; L2 scores a row by the
// squared Euclidean distance sum((row-q)^2), smaller better.
type Metric = core.Metric

// The metrics (internal/core's, which engine's are too).
const (
	Cosine = core.Cosine
	Dot    = core.Dot
	L2     = core.L2
)

// Hit is one result: Row is the row index in the slab (or in the scores
// slice given to topk's selections), Score is the metric's value for that
// row.
type Hit = core.Hit

// Slab is a read-only view of packed rows: row i is
// Data[i*Stride : i*Stride+Dim]. Stride >= Dim; the padding Data[i*Stride+Dim :
// (i+1)*Stride] is zero, which lets kernels run over whole strides. The last
// row may omit its padding.
type Slab struct {
	Data   []float32
	Rows   int
	Dim    int
	Stride int
	// Allow, when not nil, is a bitmap over rows (bit r of word r/64):
	// only rows whose bit is set may be returned, the others are skipped
	// inside the scan. It must hold at least Rows bits.
	Allow []uint64
	// IDs, when not nil, names each row (at least Rows of them): equal
	// scores go to the lower ID, IDs[row]. With IDs nil they go to the
	// lower row, which is the same order when IDs increase with the row.
	IDs []uint64
}

var (
	// ErrSlabShape reports a slab whose Rows, Dim, Stride and len(Data)
	// do not describe each other.
	ErrSlabShape = errors.New("fallback: slab shape does not match its data")
	// ErrQueryLen reports a query whose length is neither Dim nor Stride.
	ErrQueryLen = errors.New("fallback: query length is neither Dim nor Stride")
	// ErrMetric reports a Metric value this package does not know.
	ErrMetric = errors.New("fallback: unknown metric")
	// ErrInternal reports a panic caught inside the package, so that a bug
	// here fails one call instead of the host process.
	ErrInternal = parallel.ErrInternal
)

func checkMetric(m Metric) error {
	if m != Cosine && m != Dot && m != L2 {
		return fmt.Errorf("%w: %d", ErrMetric, int(m))
	}
	return nil
}

// Check refuses a metric this package does not know and shapes that would
// make indexing go out of range, as every search does first; it is not
// input validation (the engine does that).
func (s Slab) Check(m Metric) error {
	if err := checkMetric(m); err != nil {
		return err
	}
	return s.check()
}

// check refuses shapes that would make indexing go out of range.
func (s Slab) check() error {
	if s.Rows < 0 || s.Dim < 0 || s.Stride < s.Dim {
		return fmt.Errorf("%w: rows %d, dim %d, stride %d", ErrSlabShape, s.Rows, s.Dim, s.Stride)
	}
	if s.Allow != nil && len(s.Allow)*64 < s.Rows {
		return fmt.Errorf("%w: an allow bitmap of %d words for %d rows", ErrSlabShape, len(s.Allow), s.Rows)
	}
	if s.IDs != nil && len(s.IDs) < s.Rows {
		return fmt.Errorf("%w: %d IDs for %d rows", ErrSlabShape, len(s.IDs), s.Rows)
	}
	if s.Rows == 0 {
		return nil
	}
	// (Rows-1)*Stride+Dim <= len(Data), written to avoid overflow.
	if s.Stride > 0 && s.Rows-1 > (len(s.Data)-s.Dim)/s.Stride || len(s.Data) < s.Dim {
		return fmt.Errorf("%w: %d rows of stride %d (dim %d) need more than %d floats",
			ErrSlabShape, s.Rows, s.Stride, s.Dim, len(s.Data))
	}
	return nil
}

// query returns q as a Stride-long vector, copying only when q lacks the
// padding, so every kernel can run over whole strides.
func (s Slab) query(q []float32) ([]float32, error) {
	switch len(q) {
	case s.Stride:
		return q, nil
	case s.Dim:
		p := make([]float32, s.Stride)
		copy(p, q)
		return p, nil
	}
	return nil, fmt.Errorf("%w: len %d, dim %d, stride %d", ErrQueryLen, len(q), s.Dim, s.Stride)
}

// Kernel names the scoring kernels in use: the best this CPU runs,
// "avx512", "avx2+fma", "neon" (arm64) or "generic", unless umbra's tests
// or cmd/bench forced another (internal/kernelset).
func Kernel() string { return active.name }
