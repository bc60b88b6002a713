package engine

import (
	"context"
	"time"
)

// NewWithChunkRows is New with at most rows rows in one device buffer, so
// tests cross chunk boundaries with small data.
func NewWithChunkRows(ctx context.Context, cfg Config, rows int) (*Index, error) {
	return newIndex(ctx, cfg, options{maxChunkRows: rows})
}

// The routing model's parts, for its tests.
func PreferGPU(r Routing, bytes int64, nq int) bool        { return r.preferGPU(bytes, nq) }
func GPUTime(r Routing, bytes int64, nq int) time.Duration { return r.gpuTime(bytes, nq) }
func CPUTime(r Routing, bytes int64, nq int) time.Duration { return r.cpuTime(bytes, nq) }
func CrossoverBytes(r Routing) int64                       { return r.crossoverBytes() }
