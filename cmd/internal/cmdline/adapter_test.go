package cmdline

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
)

// TestAdapterFlagsUnderCPU: an adapter flag under --device cpu is a usage
// error naming it; without one, or on another device, nothing is refused.
func TestAdapterFlagsUnderCPU(t *testing.T) {
	for flag, a := range map[string]Adapter{
		"--backend": {Backend: "vulkan", Power: "high"},
		"--adapter": {Name: "nvidia", Power: "high"},
		"--power":   {Power: "low"},
	} {
		require.ErrorContains(t, a.CheckDevice(engine.CPU), flag)
		require.NoError(t, a.CheckDevice(engine.GPU))
		require.NoError(t, a.CheckDevice(engine.Auto))
	}
	require.NoError(t, Adapter{Power: "high"}.CheckDevice(engine.CPU))
}
