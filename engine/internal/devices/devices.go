// Package devices is what package engine and package engine/ondevice
// share about devices, by plain import rather than a registry: the
// hand-over of a device a caller owns into engine.New and of the new
// index's device side back out (Slot, for ondevice.New). The order
// adapters are tried in is internal/probe's Rank.
package devices

import (
	"context"
	"errors"

	"github.com/umbravec/umbra/internal/gpu"
)

// Slot carries a device the caller owns into engine.New, which builds the
// index's device side on it, and carries that side's access back out. It
// travels in New's context under a key only this package knows: no
// program can set it but ondevice.
type Slot struct {
	// Device is the caller's device, adopted (gpu.Adopt).
	Device *gpu.Device
	// Visit, set by engine.New, runs f on the new index's device side
	// with its rows held still (Visit's doc in engine: withDevice).
	Visit func(f VisitFunc) error
}

// VisitFunc is what Slot.Visit runs: g is the index's device side, ids[r]
// the ID of resident row r, dead(r) whether that row was deleted.
type VisitFunc = func(g *gpu.Index, ids []uint64, dead func(row int) bool) error

type slotKey struct{}

// With returns ctx carrying s.
func With(ctx context.Context, s *Slot) context.Context { return context.WithValue(ctx, slotKey{}, s) }

// From returns the Slot ctx carries, or nil.
func From(ctx context.Context) *Slot {
	s, _ := ctx.Value(slotKey{}).(*Slot)
	return s
}

// ErrNoDevice: the index has no device side in use (the CPU path, or a
// GPU index moved to the fallback).
var ErrNoDevice = errors.New("no device")
