// Package devices is what package engine and package engine/ondevice
// share about devices, by plain import rather than a registry: the order
// adapters are tried in (Rank, for Device Auto, Probe and ondevice.Rank),
// and the hand-over of a device a caller owns into engine.New and of the
// new index's device side back out (Slot, for ondevice.New).
package devices

import (
	"context"
	"errors"
	"sort"
	"strings"

	"github.com/umbravec/umbra/diag"
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

// typeOrder ranks adapter types, best first, for each power preference
// (0: high performance, 1: low power).
var typeOrder = [2]map[string]int{
	{"discrete": 0, "integrated": 1, "unknown": 2, "cpu": 3},
	{"integrated": 0, "discrete": 1, "unknown": 2, "cpu": 3},
}

// Rank returns the indices of the adapters in infos whose API is backend
// (any, for "") and whose name, vendor or driver contains name (any, for
// ""), best first for the power preference lowPower: device type first,
// then native APIs before GL. It is the order Device Auto and Probe try
// adapters in.
func Rank(infos []diag.AdapterInfo, lowPower bool, name, backend string) []int {
	var at []int
	for i, a := range infos {
		if Matches(a, name, backend) {
			at = append(at, i)
		}
	}
	order := typeOrder[0]
	if lowPower {
		order = typeOrder[1]
	}
	typeRank := func(t string) int {
		if r, ok := order[t]; ok {
			return r
		}
		return order["unknown"]
	}
	apiRank := func(a string) int {
		if a == "gl" {
			return 1
		}
		return 0
	}
	sort.SliceStable(at, func(x, y int) bool {
		a, b := infos[at[x]], infos[at[y]]
		if ta, tb := typeRank(a.Type), typeRank(b.Type); ta != tb {
			return ta < tb
		}
		return apiRank(a.API) < apiRank(b.API)
	})
	return at
}

// Matches reports whether adapter a passes an adapter selection's name and
// backend filters.
func Matches(a diag.AdapterInfo, name, backend string) bool {
	if backend != "" && !strings.EqualFold(backend, a.API) {
		return false
	}
	if name != "" {
		hay := strings.ToLower(a.Name + "\x00" + a.Vendor + "\x00" + a.Driver)
		if !strings.Contains(hay, strings.ToLower(name)) {
			return false
		}
	}
	return true
}
