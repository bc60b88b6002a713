// Package link carries three functions from package engine to package
// engine/ondevice, which adds wgpu-typed calls (an index on a device the
// caller owns) that engine's own API must not have, since that API is the
// same in every build. engine fills them in at init; ondevice converts them
// back to their real types.
package link

var (
	// NewOnDevice is func(context.Context, engine.Config, *gpu.Device)
	// (*engine.Index, error).
	NewOnDevice any
	// RankAdapters is func([]engine.AdapterInfo, engine.AdapterSelect) []int.
	RankAdapters any
	// Device is func(*engine.Index) *gpu.Index: the index's device side,
	// nil on the CPU path.
	Device any
)
