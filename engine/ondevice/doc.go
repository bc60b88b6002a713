// Package ondevice builds umbra indexes on a wgpu device the caller already
// owns — for example one that also draws to a window — for programs that
// use the wgpu binding (github.com/oliverbestmann/webgpu) themselves.
//
// Its functions take and return wgpu types, so they exist only in builds
// with the wgpu backend (cgo, without the nogpu tag); package engine's own
// API is the same in every build and names no wgpu type. New returns an
// Index: an *engine.Index (adding, searching, Info, Close are the
// engine's) whose Resident, RowIDs and ScoreInto let the device's owner
// use what it keeps there — its rows, and every row's score for a query —
// in its own passes, without a second copy or a second scoring shader.
//
// The device reaches engine.New, and the index's device side comes back,
// through package engine/internal/devices by plain import: nothing is
// registered at init.
package ondevice
