package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestAutoMatchesProbe checks that Auto picks what the probe says it would:
// a working hardware adapter, or the fallback with a reason and a hint when
// there is none (as on a machine with only lavapipe and llvmpipe).
func TestAutoMatchesProbe(t *testing.T) {
	if !engine.GPUSupport() {
		t.Skip("built without the wgpu backend; TestNoGPUBuild covers this build")
	}
	rep := engine.Probe(context.Background(), engine.AdapterSelect{})
	for _, a := range rep.Adapters {
		t.Logf("adapter %s (%s, %s): works=%v eligible=%v %s", a.Adapter.Name, a.Adapter.API, a.Adapter.Type, a.Works, a.Eligible, a.Error)
		if a.Works {
			assert.Equal(t, !a.Adapter.Software(), a.Eligible, "a working adapter is eligible unless it is software")
		}
	}
	if testkit.RequireGPU() {
		require.NotEmpty(t, rep.Adapters, "UMBRA_REQUIRE_GPU=1 but the probe found no adapter")
	}
	ix, err := engine.New(context.Background(), engine.Config{Dim: 8})
	require.NoError(t, err)
	defer ix.Close()
	info := ix.Info()
	if rep.Auto >= 0 {
		assert.Equal(t, engine.GPU, info.Device)
		assert.Equal(t, rep.Adapters[rep.Auto].Adapter, info.Adapter)
		assert.Empty(t, info.Reason)
	} else {
		assert.Equal(t, engine.CPU, info.Device)
		assert.NotEmpty(t, info.Reason)
		assert.NotEmpty(t, info.Hint)
		assert.Equal(t, rep.Reason, info.Reason)
	}
	// A second index reuses the cached verdict and agrees.
	ix2, err := engine.New(context.Background(), engine.Config{Dim: 8})
	require.NoError(t, err)
	defer ix2.Close()
	assert.Equal(t, info.Device, ix2.Info().Device)
}

func TestCPUNeverProbes(t *testing.T) {
	ix, err := engine.New(context.Background(), engine.Config{Dim: 4, Device: engine.CPU})
	require.NoError(t, err)
	info := ix.Info()
	assert.Equal(t, engine.CPU, info.Device)
	assert.Empty(t, info.Reason, "CPU was asked for: nothing to explain")
	assert.Zero(t, info.Adapter)
	assert.NotEmpty(t, info.CPUKernel)
}

// TestNoVulkanDriver runs a child process in which the Vulkan loader finds
// no driver and checks that Auto falls back with a reason, and that Device
// GPU restricted to Vulkan fails with ErrNoAdapter instead of crashing.
func TestNoVulkanDriver(t *testing.T) {
	if !engine.GPUSupport() {
		t.Skip("built without the wgpu backend; TestNoGPUBuild covers this build")
	}
	child := testkit.Run(t, testkit.Child("no-driver", "VK_DRIVER_FILES=/nonexistent", "VK_ICD_FILENAMES=/nonexistent"))
	out := child.Stdout + child.Stderr
	require.Zero(t, child.Code, "child process failed:\n%s", out)
	var line string
	for _, l := range strings.Split(child.Stdout, "\n") {
		if strings.HasPrefix(l, "CHILD ") {
			line = strings.TrimPrefix(l, "CHILD ")
		}
	}
	require.NotEmpty(t, line, "child printed no result:\n%s", out)
	var res struct {
		Info   engine.Info
		GPUErr string
		IsNoAd bool
	}
	require.NoError(t, json.Unmarshal([]byte(line), &res))
	t.Logf("child: backend=%s reason=%q gpu error=%q", res.Info.Device, res.Info.Reason, res.GPUErr)
	assert.Equal(t, engine.CPU, res.Info.Device)
	assert.NotEmpty(t, res.Info.Reason)
	assert.NotEmpty(t, res.Info.Hint)
	assert.True(t, res.IsNoAd, "Device GPU on Vulkan without a driver must be an AdapterError wrapping ErrNoAdapter, with a hint: %s", res.GPUErr)
}

// noDriverChild is TestNoVulkanDriver's child: it prints what Auto and
// Device GPU made of a machine without a Vulkan driver.
func noDriverChild() int {
	ix, err := engine.New(context.Background(), engine.Config{Dim: 8})
	if err != nil {
		panic(err)
	}
	_, gerr := engine.New(context.Background(), engine.Config{Dim: 8, Device: engine.GPU, Adapters: []engine.AdapterSelect{engine.AdapterSelect{Backend: "vulkan"}}})
	var ae *engine.AdapterError
	res := map[string]any{"Info": ix.Info(), "IsNoAd": errors.Is(gerr, engine.ErrNoAdapter) && errors.As(gerr, &ae) && ae.Hint.Code != ""}
	if gerr != nil {
		res["GPUErr"] = gerr.Error()
	}
	b, _ := json.Marshal(res)
	os.Stdout.WriteString("CHILD " + string(b) + "\n")
	return 0
}
