package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/internal/gpu"
)

// typeOrder ranks adapter types, best first, for each power preference.
var typeOrder = map[Power]map[string]int{
	HighPerformance: {"discrete": 0, "integrated": 1, "unknown": 2, "cpu": 3},
	LowPower:        {"integrated": 0, "discrete": 1, "unknown": 2, "cpu": 3},
}

// rankAdapters orders adapter descriptions best first for the power
// preference: device type first, then native APIs before GL.
func rankByPower(infos []diag.AdapterInfo, p Power) []int {
	order := typeOrder[p]
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
	idx := make([]int, len(infos))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(x, y int) bool {
		a, b := infos[idx[x]], infos[idx[y]]
		if ta, tb := typeRank(a.Type), typeRank(b.Type); ta != tb {
			return ta < tb
		}
		return apiRank(a.API) < apiRank(b.API)
	})
	return idx
}

// rankAdapters returns the indices of the adapters in infos that pass sel's
// name and backend filters, best first for sel.Power: the order in which
// Auto and Probe try them.
func rankAdapters(infos []diag.AdapterInfo, sel AdapterSelect) []int {
	var keep []diag.AdapterInfo
	var at []int
	for i, a := range infos {
		if sel.matches(a) {
			keep = append(keep, a)
			at = append(at, i)
		}
	}
	order := rankByPower(keep, sel.Power)
	out := make([]int, len(order))
	for i, j := range order {
		out[i] = at[j]
	}
	return out
}

// matches reports whether adapter a passes the selection's name and backend
// filters.
func (s AdapterSelect) matches(a diag.AdapterInfo) bool {
	if s.Backend != "" && !strings.EqualFold(s.Backend, a.API) {
		return false
	}
	if s.Name != "" {
		n := strings.ToLower(s.Name)
		hay := strings.ToLower(a.Name + "\x00" + a.Vendor + "\x00" + a.Driver)
		if !strings.Contains(hay, n) {
			return false
		}
	}
	return true
}

func (s AdapterSelect) describe() string {
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

// Probe probes every adapter matching sel (each at most once per process)
// and says which one Device Auto would use. It never panics; with no GPU
// stack at all, or in a build without the wgpu backend, it returns an empty
// Adapters list and a reason with a hint.
func Probe(ctx context.Context, sel AdapterSelect) diag.ProbeReport { return probe(ctx, sel) }

// GPUSupport reports whether this binary contains the wgpu backend (built
// with cgo and not with the nogpu tag). Without it every index runs on the
// CPU and Device GPU fails with ErrNoGPUSupport.
func GPUSupport() bool { return gpu.Built }
