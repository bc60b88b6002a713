package packed

import (
	"errors"
	"fmt"
	"math/bits"
)

// ErrTooLarge is returned when a slab cannot be laid out within a device's
// limits or does not fit in the address space.
var ErrTooLarge = errors.New("packed: data too large")

// Limits are the device limits a ChunkPlan must respect, in bytes and
// workgroups, as reported by the adapter. MaxChunkRows, when non-zero, caps a
// chunk further; tests use it to cross chunk boundaries with small data.
type Limits struct {
	MaxStorageBindingBytes uint64 // maxStorageBufferBindingSize
	MaxBufferBytes         uint64 // maxBufferSize
	MaxWorkgroupsPerDim    uint32 // maxComputeWorkgroupsPerDimension
	MaxChunkRows           int
}

// ChunkPlan splits a slab into runs of whole rows, each small enough to be
// one storage buffer binding. Every chunk except possibly the last holds
// RowsPerChunk rows.
type ChunkPlan struct {
	Stride       int // float32 elements per row
	RowsPerChunk int
}

// PlanChunks returns how rows of the given stride are split for a device
// with the given limits. It fails with ErrTooLarge when not even one row fits
// in a binding.
func PlanChunks(stride int, lim Limits) (ChunkPlan, error) {
	maxBytes := lim.MaxStorageBindingBytes
	if lim.MaxBufferBytes != 0 && lim.MaxBufferBytes < maxBytes {
		maxBytes = lim.MaxBufferBytes
	}
	if stride <= 0 {
		return ChunkPlan{}, fmt.Errorf("%w: stride %d is not positive", ErrTooLarge, stride)
	}
	// Compared by division, so no stride can overflow the product.
	if uint64(stride) > maxBytes/4 {
		return ChunkPlan{}, fmt.Errorf("%w: one row of %d float32 values exceeds the device's largest storage binding (%d bytes)",
			ErrTooLarge, stride, maxBytes)
	}
	rows := maxBytes / (uint64(stride) * 4)
	// Row indices inside a chunk are u32 in the shaders.
	if rows > 1<<31 {
		rows = 1 << 31
	}
	if lim.MaxChunkRows > 0 && uint64(lim.MaxChunkRows) < rows {
		rows = uint64(lim.MaxChunkRows)
	}
	return ChunkPlan{Stride: stride, RowsPerChunk: int(rows)}, nil
}

// Chunks returns how many chunks hold rows rows.
func (p ChunkPlan) Chunks(rows int) int {
	return (rows + p.RowsPerChunk - 1) / p.RowsPerChunk
}

// Span returns the first row and the row count of chunk c for a slab of rows
// rows.
func (p ChunkPlan) Span(c, rows int) (start, n int) {
	start = c * p.RowsPerChunk
	n = min(p.RowsPerChunk, rows-start)
	return start, n
}

// CheckSize reports whether rows vectors of the given stride fit in this
// process's address space, before anything is allocated.
func CheckSize(rows, stride int) error {
	hi, lo := bits.Mul64(uint64(rows), uint64(stride)*4)
	const maxInt = uint64(^uint(0) >> 1)
	if hi != 0 || lo > maxInt {
		return fmt.Errorf("%w: %d rows × stride %d overflows the address space", ErrTooLarge, rows, stride)
	}
	return nil
}
