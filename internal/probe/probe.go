// Package probe is how umbra finds and proves its GPU adapters: the order
// they are tried in, the probe of each (a device created, the real search
// shaders compiled, run and checked), the full report of what it found
// (limits, features, every variant's self-test and timing), and the reason
// and hint when Device Auto would use none.
//
// engine opens its devices through it and reduces the report to
// diag.ProbeReport for engine.Probe; `umbra probe` and the device check
// print the full report. It is internal so that those reports' details,
// which follow the kernels, are no part of the public API.
package probe

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/internal/gpu"
)

// Select is an adapter selection (engine.AdapterSelect) in plain values.
type Select struct {
	LowPower      bool   // prefer integrated adapters
	Name, Backend string // substring of name, vendor or driver; graphics API
}

// Describe words the selection for a reason ("backend vulkan and name
// containing \"NVIDIA\"", or "any adapter").
func (s Select) Describe() string {
	var parts []string
	if s.Backend != "" {
		parts = append(parts, "backend "+s.Backend)
	}
	if s.Name != "" {
		parts = append(parts, fmt.Sprintf("name containing %q", s.Name))
	}
	if len(parts) == 0 {
		return "any adapter"
	}
	return strings.Join(parts, " and ")
}

// Hint is the hint code under the selection: its Args hold the
// selection's Backend and Name where they were set.
func (s Select) Hint(code string) umbra.Hint {
	h := umbra.Hint{Code: code}
	if s.Backend != "" || s.Name != "" {
		h.Args = map[string]string{}
		if s.Backend != "" {
			h.Args["backend"] = s.Backend
		}
		if s.Name != "" {
			h.Args["name"] = s.Name
		}
	}
	return h
}

// ValidateBackend refuses a backend that is none of wgpu's graphics APIs.
func (s Select) ValidateBackend() error {
	switch strings.ToLower(s.Backend) {
	case "", "vulkan", "metal", "dx12", "gl":
		return nil
	}
	return fmt.Errorf("%w: unknown backend %q (want vulkan, metal, dx12 or gl)", umbra.ErrInvalidConfig, s.Backend)
}

// typeOrder ranks adapter types, best first, for each power preference
// (0: high performance, 1: low power).
var typeOrder = [2]map[string]int{
	{"discrete": 0, "integrated": 1, "unknown": 2, "cpu": 3},
	{"integrated": 0, "discrete": 1, "unknown": 2, "cpu": 3},
}

// Rank returns the indices of the adapters in infos whose API is s.Backend
// (any, for "") and whose name, vendor or driver contains s.Name (any, for
// ""), best first for the power preference: device type first, then
// native APIs before GL. It is the order Device Auto, engine.Probe and
// ondevice.Rank try adapters in.
func Rank(infos []diag.AdapterInfo, s Select) []int {
	var at []int
	for i, a := range infos {
		if matches(a, s.Name, s.Backend) {
			at = append(at, i)
		}
	}
	order := typeOrder[0]
	if s.LowPower {
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

// matches reports whether adapter a passes a selection's name and backend
// filters.
func matches(a diag.AdapterInfo, name, backend string) bool {
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

// Candidates lists the adapters matching s, best first.
func Candidates(s Select) ([]*gpu.Adapter, error) {
	list, err := gpu.Adapters(strings.ToLower(s.Backend))
	if err != nil {
		return nil, err
	}
	infos := make([]diag.AdapterInfo, len(list))
	for i, a := range list {
		infos[i] = a.Info
	}
	order := Rank(infos, s)
	out := make([]*gpu.Adapter, len(order))
	for i, j := range order {
		out[i] = list[j]
	}
	return out, nil
}

// Adapter is what the probe found out about one adapter.
type Adapter struct {
	Adapter  diag.AdapterInfo
	Limits   gpu.Limits
	Features []string
	// Works is true when a device was created on the adapter and the real
	// search shaders compiled, ran on a small input and gave the right
	// answer; Error says why not.
	Works bool
	Error string
	// Eligible is true when Auto may choose the adapter: it works and it
	// is not a software (CPU-type) adapter.
	Eligible bool
	Elapsed  time.Duration
	// Checks are the probe's self-tests and timings, one per variant it
	// tried: which passed, which the device uses, and why the others are
	// not used.
	Checks []gpu.VariantCheck
}

// Of is the report of adapter a's probe r.
func Of(a *gpu.Adapter, r gpu.Report) Adapter {
	info := a.Info
	return Adapter{Adapter: info, Limits: r.Limits, Features: r.Features, Works: r.Works,
		Error: r.Error, Eligible: r.Works && !info.Software(), Elapsed: r.Elapsed, Checks: r.Checks}
}

// Report is the probe of every adapter matching a selection.
type Report struct {
	Adapters []Adapter
	// Auto is the index in Adapters of the adapter Device Auto would use,
	// or -1 when Auto would use the CPU; Reason and Hint then say why and
	// what to do.
	Auto   int
	Reason string
	Hint   umbra.Hint
}

// Public is the report as engine.Probe gives it.
func (r Report) Public() diag.ProbeReport {
	out := diag.ProbeReport{Auto: r.Auto, Reason: r.Reason, Hint: r.Hint}
	for _, a := range r.Adapters {
		out.Adapters = append(out.Adapters, diag.AdapterReport{Adapter: a.Adapter, Works: a.Works, Error: a.Error, Eligible: a.Eligible})
	}
	return out
}

// DefaultTimeout bounds one adapter's probe where no timeout is given
// (engine.Config.ProbeTimeout's default).
const DefaultTimeout = 30 * time.Second

// ReasonNoCgo is the reason a build without the wgpu backend uses the CPU.
const ReasonNoCgo = "built without GPU support (no cgo, or the nogpu tag)"

// NoGPUSupport is its hint.
var NoGPUSupport = umbra.Hint{Code: umbra.HintNoGPUSupport}

// Run probes every adapter matching s (each at most once per process,
// within timeout) and says which one Device Auto would use. It never
// panics; with no GPU stack at all, or in a build without the wgpu
// backend, it returns no adapters and a reason with a hint.
func Run(ctx context.Context, s Select, timeout time.Duration) Report {
	rep := Report{Auto: -1}
	if !gpu.Built {
		rep.Reason, rep.Hint = ReasonNoCgo, NoGPUSupport
		return rep
	}
	if err := s.ValidateBackend(); err != nil {
		rep.Reason, rep.Hint = err.Error(), s.Hint(umbra.HintNoMatch)
		return rep
	}
	as, err := Candidates(s)
	if err != nil {
		rep.Reason, rep.Hint = err.Error(), s.Hint(umbra.HintNoAdapter)
		return rep
	}
	for i, a := range as {
		_, r := a.Probe(ctx, timeout)
		rep.Adapters = append(rep.Adapters, Of(a, r))
		if rep.Auto < 0 && rep.Adapters[i].Eligible {
			rep.Auto = i
		}
	}
	if rep.Auto < 0 {
		// Auto never probes a software adapter, so explain the choice
		// the way Auto would.
		view := make([]Adapter, len(rep.Adapters))
		for i, r := range rep.Adapters {
			view[i] = r
			if r.Adapter.Software() {
				view[i].Works, view[i].Error = true, ""
			}
		}
		rep.Reason, rep.Hint = FallbackReason(s, view, false)
	}
	return rep
}

// FallbackReason explains, from the probe reports, why no adapter was
// chosen.
func FallbackReason(s Select, reports []Adapter, allowSoftware bool) (string, umbra.Hint) {
	if len(reports) == 0 {
		if s.Backend != "" && s.Name == "" {
			return fmt.Sprintf("no %s adapter found (no %s driver answered)", s.Backend, s.Backend), s.Hint(umbra.HintNoAdapter)
		}
		if s.Name != "" || s.Backend != "" {
			if all, _ := Candidates(Select{}); len(all) > 0 {
				return fmt.Sprintf("no adapter matches %s", s.Describe()), s.Hint(umbra.HintNoMatch)
			}
		}
		return "no GPU adapter found (no Vulkan, Metal, DX12 or GL driver answered)", s.Hint(umbra.HintNoAdapter)
	}
	var failed, soft []string
	for _, r := range reports {
		name := r.Adapter.String()
		switch {
		case !r.Works:
			failed = append(failed, name+": "+r.Error)
		case r.Adapter.Software() && !allowSoftware:
			soft = append(soft, name)
		}
	}
	if len(failed) > 0 && len(soft) == 0 {
		return "every adapter failed its probe: " + strings.Join(failed, "; "), s.Hint(umbra.HintProbeFailed)
	}
	if len(failed) > 0 {
		return "only software adapters work (" + strings.Join(soft, ", ") + "); failed: " + strings.Join(failed, "; "), s.Hint(umbra.HintSoftwareOnly)
	}
	return "only software adapters found: " + strings.Join(soft, ", "), s.Hint(umbra.HintSoftwareOnly)
}
