// Package link carries a few functions from package engine to package
// engine/ondevice. ondevice adds wgpu-typed calls (an index on a device the
// caller owns) that engine's own API must not have, since that API is the
// same in every build; engine fills these in at init in builds with the
// wgpu backend, and ondevice converts them back to their real types. The
// values stay nil in other builds.
package link

var (
	// NewOnDevice is func(context.Context, engine.Config, *wgpu.Adapter,
	// *wgpu.Device, *wgpu.Limits) (*engine.Index, error).
	NewOnDevice any
	// DescribeAdapter is func(*wgpu.Adapter) (engine.AdapterInfo, error).
	DescribeAdapter any
	// InstanceBackends is func(string) wgpu.InstanceBackend.
	InstanceBackends any
	// RankAdapters is func([]engine.AdapterInfo, engine.AdapterSelect) []int.
	RankAdapters any
)
