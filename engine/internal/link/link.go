// Package link carries three functions and an error from package engine to
// package engine/ondevice, which adds wgpu-typed calls (an index on a device
// the caller owns) that engine's own API must not have, since that API is
// the same in every build.
//
// The functions are typed. link cannot name engine's types (engine imports
// it), so Engine is generic over them — I is *engine.Index, C engine.Config,
// S engine.AdapterSelect — and every function's signature is written once,
// here, in terms of those three: engine lends an Engine[*Index, Config,
// AdapterSelect] whose fields are its functions, ondevice borrows the same
// instantiation and calls them, and a signature that drifts on either side
// no longer compiles. (The registry this replaced held each function as
// `any` and type-asserted it back at the call, so a drift was a panic in a
// user's program.) What the compiler cannot see across the two packages is
// that both name the same three types: Borrow checks that once, when
// ondevice is initialised, so a mismatch fails every program and test that
// imports ondevice at start-up, not a call in the field.
package link

import (
	"context"
	"errors"
	"fmt"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpu"
)

// Engine is what engine lends ondevice; I is *engine.Index, C engine.Config
// and S engine.AdapterSelect.
type Engine[I, C, S any] struct {
	// NewOnDevice is ondevice.New after the device was adopted: an index
	// whose GPU side lives on d, a device the caller owns.
	NewOnDevice func(ctx context.Context, cfg C, d *gpu.Device) (I, error)
	// RankAdapters returns the indices of the adapters in infos that pass
	// sel's filters, best first: the order Device Auto tries them in.
	RankAdapters func(infos []core.AdapterInfo, sel S) []int
	// WithDevice runs f on the index's device side with its rows held
	// still; ErrNoDevice on the CPU path.
	WithDevice func(ix I, f Visit) error
}

// Visit is what WithDevice runs: g is the index's device side, ids[r] the
// ID of resident row r, dead(r) whether that row was deleted.
type Visit = func(g *gpu.Index, ids []uint64, dead func(row int) bool) error

// lent is the Engine engine lent, as Lend received it.
var lent any

// Lend makes e what Borrow returns; engine calls it once, at init.
func Lend[I, C, S any](e Engine[I, C, S]) { lent = e }

// Borrow returns what engine lent, which must be an Engine of the same
// three types: ondevice calls it once, while it is initialised (after
// engine, which it imports).
func Borrow[I, C, S any]() Engine[I, C, S] {
	e, ok := lent.(Engine[I, C, S])
	if !ok {
		panic(fmt.Sprintf("link: engine lent %T, ondevice borrows %T", lent, e))
	}
	return e
}

// ErrNoDevice: the index has no device side in use (the CPU path, or a
// GPU index moved to the fallback).
var ErrNoDevice = errors.New("no device")
