// Package link carries three functions and an error from package engine
// to package engine/ondevice, which adds wgpu-typed calls (an index on a device the
// caller owns) that engine's own API must not have, since that API is the
// same in every build. engine fills them in at init; ondevice converts them
// back to their real types.
package link

import "errors"

var (
	// NewOnDevice is func(context.Context, engine.Config, *gpu.Device)
	// (*engine.Index, error).
	NewOnDevice any
	// RankAdapters is func([]engine.AdapterInfo, engine.AdapterSelect) []int.
	RankAdapters any
	// WithDevice is func(*engine.Index, func(g *gpu.Index, ids []uint64,
	// dead func(row int) bool) error) error: f runs on the index's device
	// side with its rows held still; ErrNoDevice on the CPU path.
	WithDevice any
)

// ErrNoDevice: the index has no device side in use (the CPU path, or a
// GPU index moved to the fallback).
var ErrNoDevice = errors.New("no device")
