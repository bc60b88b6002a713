package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/umbravec/umbra/engine"
)

// Timing is a sample of group values, each the minimum of one group's
// repeats, summed up as a Summary is. Every field is absent when nothing was
// timed.
type Timing struct {
	MedianMS *float64  `json:"median_ms,omitempty"`
	MinMS    *float64  `json:"min_ms,omitempty"`
	MaxMS    *float64  `json:"max_ms,omitempty"`
	Jitter   *float64  `json:"jitter,omitempty"`
	GroupsMS []float64 `json:"groups_ms,omitempty"`
}

// Ran reports whether there are timings.
func (t *Timing) Ran() bool { return t.MedianMS != nil }

func timingOf(groups []float64) Timing {
	s := Summarize(groups)
	return Timing{MedianMS: finite(s.Median), MinMS: finite(s.Min), MaxMS: finite(s.Max), Jitter: finite(s.Jitter), GroupsMS: groups}
}

// Floors holds the read floor of each device a tier ran on.
type Floors struct {
	CPU *FloorResult `json:"cpu,omitempty"`
	GPU *FloorResult `json:"gpu,omitempty"`
	// C is the independent C read loop (Options.CFloor) over a buffer of
	// the slab's bytes, timed in the same groups; VsC states the fallback
	// tier and the CPU floor as multiples of it, paired by group.
	C   *FloorResult `json:"c,omitempty"`
	VsC []VsC        `json:"vs_c,omitempty"`
}

// FloorResult is one device's memory-bandwidth floor for this slab: a plain
// read of every stored row (engine Index.ReadFloor), timed in the same
// groups as the tiers, interleaved with them.
type FloorResult struct {
	Backend string `json:"backend"` // cpu or gpu
	Premise string `json:"premise"`
	Bytes   int64  `json:"bytes"` // the slab read per pass (rows × padded stride × 4)
	// Clock is how a pass was timed: "gpu" (device timestamps around the
	// dispatches), "wall" (submit to done) or "cpu".
	Clock string `json:"clock,omitempty"`
	Error string `json:"error,omitempty"`
	Timing
	GBPerS *float64 `json:"gb_per_s,omitempty"` // Bytes over the median
}

const (
	cpuFloorPremise = "engine ReadFloor on the fallback's index: one plain read of the slab's bytes, each worker streaming " +
		"its contiguous share in order with the widest vector loads, the search's blocks and goroutines, no query, no row structure, a running sum"
	gpuFloorPremise = "engine ReadFloor on the resident GPU index: read.wgsl over every resident chunk (a warm-up pass, " +
		"then one pass timed by GPU timestamps where the device has them, else on the wall clock from submit to done)"
)

// gbPerS is bytes read in ms milliseconds, in GB/s (10⁹ bytes).
func gbPerS(bytes int64, ms float64) *float64 {
	if bytes <= 0 || ms <= 0 {
		return nil
	}
	return finite(float64(bytes) / (ms * 1e6))
}

// floorItems returns the floors to time beside the tiers: the CPU's when
// the fallback runs, the GPU's when a GPU tier does (opening the resident
// index for it when only the rebuilding tiers asked for the GPU).
func (h *harness) floorItems(ctx context.Context, tiers []Tier) []*timed {
	var cpu, gpu bool
	for _, t := range tiers {
		if t.GPU() {
			gpu = true
		} else {
			cpu = true
		}
	}
	var items []*timed
	add := func(ix *engine.Index, f *FloorResult, want string) {
		items = append(items, &timed{
			name: want + " floor",
			call: func(ctx context.Context, _ int) (time.Duration, error) {
				fl, err := ix.ReadFloor(ctx)
				if err == nil && fl.Device != want {
					err = fmt.Errorf("the floor ran on the %s, not the %s", fl.Device, want)
				}
				f.Bytes, f.Clock = fl.Bytes, fl.Clock
				return fl.Time, err
			},
			fail: func(err error) { f.Error = err.Error() },
			done: func(groups []float64) {
				f.Timing = timingOf(groups)
				if f.Ran() {
					f.GBPerS = gbPerS(f.Bytes, *f.MedianMS)
				}
			},
		})
	}
	if cpu && h.cpuIx != nil {
		h.rep.floors().CPU = &FloorResult{Backend: "cpu", Premise: cpuFloorPremise}
		add(h.cpuIx, h.rep.Floors.CPU, "cpu")
	}
	if gpu && h.gpu != nil {
		h.rep.floors().GPU = &FloorResult{Backend: "gpu", Premise: gpuFloorPremise}
		if h.gpuIx == nil {
			if err := h.openResident(ctx); err != nil {
				h.rep.Floors.GPU.Error = err.Error()
			}
		}
		if h.gpuIx != nil {
			add(h.gpuIx, h.rep.Floors.GPU, "gpu")
		}
	}
	return items
}

func (r *Report) floors() *Floors {
	if r.Floors == nil {
		r.Floors = &Floors{}
	}
	return r.Floors
}

// efficiency states each tier that ran as a multiple of its device's floor
// and as achieved bandwidth over the slab.
func (h *harness) efficiency() {
	f := h.rep.Floors
	if f == nil {
		return
	}
	for _, t := range h.opt.Tiers {
		res := h.result[t]
		fl := f.CPU
		if t.GPU() {
			fl = f.GPU
		}
		if !res.Ran() || fl == nil || !fl.Ran() || *fl.MedianMS <= 0 {
			continue
		}
		res.FloorMS = fl.MedianMS
		res.XFloor = finite(*res.MedianMS / *fl.MedianMS)
		res.GBPerS = gbPerS(fl.Bytes, *res.MedianMS)
	}
}
