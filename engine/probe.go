package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine/internal/devices"
	"github.com/umbravec/umbra/internal/gpu"
)

// rankAdapters returns the indices of the adapters in infos that pass sel's
// name and backend filters, best first for sel.Power: the order in which
// Auto and Probe try them.
func rankAdapters(infos []diag.AdapterInfo, sel AdapterSelect) []int {
	return devices.Rank(infos, sel.Power == LowPower, sel.Name, sel.Backend)
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
