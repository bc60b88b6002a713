package bench

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
)

// TestDeviceCheckRefusesNoGPU: where no adapter can run the check (here
// none matches the selection, as on a machine whose driver is missing),
// the check fails, naming the adapter assertion, and every step after
// the probe is skipped: nothing is measured on the CPU instead.
func TestDeviceCheckRefusesNoGPU(t *testing.T) {
	rep, err := RunDeviceCheck(context.Background(), DeviceCheckOptions{Smoke: true, Rows: 100, Dim: 8, Batches: []int{1, 4},
		Deadline: 2 * time.Minute, Adapter: engine.AdapterSelect{Name: "no adapter is called this"}})
	require.NoError(t, err)
	require.False(t, rep.Passed)
	require.Contains(t, rep.Asserts["nvidia adapter"], "FAIL")
	require.Contains(t, rep.Asserts["every tier ran"], "FAIL")
	require.Empty(t, rep.Searches, "no search ran anywhere")
	for _, st := range rep.Steps[1:] {
		require.Equal(t, "skipped", st.Status, st.Name)
	}
}

// TestDeviceCheckSkipsWhatDoesNotFit: a step whose estimate passes what
// is left of the deadline is skipped and says so, and a run that skipped
// a tier does not pass.
func TestDeviceCheckSkipsWhatDoesNotFit(t *testing.T) {
	rep, err := RunDeviceCheck(context.Background(), DeviceCheckOptions{Smoke: true, Rows: 100, Dim: 8, Batches: []int{1, 4},
		Deadline: 2 * time.Second, Adapter: engine.AdapterSelect{Name: "no adapter is called this"}})
	require.NoError(t, err)
	require.False(t, rep.Passed)
	require.Equal(t, "skipped", rep.Steps[0].Status, "the probe's minute does not fit in two seconds")
	require.True(t, strings.HasPrefix(rep.Steps[0].Detail, "needs about 60 s"), rep.Steps[0].Detail)
}

// TestParallelMatrix: the device check's data is the same whatever the
// core count, in [-1, 1), and not constant.
func TestParallelMatrix(t *testing.T) {
	a := ParallelMatrix(70000, 3, 9)
	prev := runtime.GOMAXPROCS(1)
	b := ParallelMatrix(70000, 3, 9)
	runtime.GOMAXPROCS(prev)
	require.Equal(t, a, b)
	lo, hi := a[0], a[0]
	for _, v := range a {
		require.True(t, v >= -1 && v < 1, "%v", v)
		lo, hi = min(lo, v), max(hi, v)
	}
	require.Less(t, lo, float32(-0.99))
	require.Greater(t, hi, float32(0.99))
}
