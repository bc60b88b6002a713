package bench

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
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

// smokeCheck runs the device check's smoke mode (a software adapter
// admitted, the NVIDIA assertions not made) at a size that fits its
// two-minute deadline on lavapipe with room to spare. Without a
// software adapter it skips, and fails under UMBRA_REQUIRE_GPU=1.
func smokeCheck(t *testing.T, edit func([][]float32)) *DeviceCheckReport {
	t.Helper()
	var log strings.Builder
	rep, err := RunDeviceCheck(context.Background(), DeviceCheckOptions{Smoke: true, Rows: 6000, Dim: 64,
		Batches: []int{1, 64, 256}, LargeK: 300, Soak: 2 * time.Second, Deadline: 2 * time.Minute,
		Seed: testkit.Rand(t).Uint64(), Log: &log, editQueries: edit})
	require.NoError(t, err)
	t.Logf("device check log:\n%s", log.String())
	if a := rep.Asserts["nvidia adapter"]; strings.HasPrefix(a, "FAIL") {
		testkit.NoGPU(t, "no adapter runs the device check: %s", a)
	}
	return rep
}

// TestDeviceCheckSmoke: the smoke mode end to end on the software
// adapter, within its two-minute deadline (a step that does not fit is
// skipped, and a skipped tier fails the run): every required step ran,
// every search ran on the GPU and matched the float64 reference, the
// filtered searches matched the subset indexes on the GPU, and the
// report names every variant's self-test.
//
// It runs under UMBRA_FULL=1 only (25–45 s, most of it the probe; the
// README's test command leaves it out). In CI the check runs once:
// .ci/run's device-check step runs the whole script (preflight, the
// negative control, then this check in the bench binary) and names its
// report in UMBRA_CHECK_REPORT, which this test then holds to the same
// assertions, the negative control's too, instead of running the check
// again. Elsewhere it runs the check in this process.
func TestDeviceCheckSmoke(t *testing.T) {
	var rep *DeviceCheckReport
	if path := os.Getenv("UMBRA_CHECK_REPORT"); path != "" {
		b, err := os.ReadFile(path)
		require.NoError(t, err, "UMBRA_CHECK_REPORT names the smoke run's report.json")
		require.NoError(t, json.Unmarshal(b, &rep), path)
		require.True(t, rep.Smoke, "%s is not a smoke run's report", path)
		require.True(t, strings.HasPrefix(rep.Asserts["negative control"], "ok"), "negative control: %s", rep.Asserts["negative control"])
	} else {
		if !testkit.Full() {
			t.Skip("the device check's smoke run takes 25–45 s: UMBRA_FULL=1 runs it (CI checks its device-check step's report)")
		}
		rep = smokeCheck(t, nil)
	}
	require.True(t, rep.Passed, "failures: %v", rep.Failures)
	for _, st := range rep.Steps {
		if st.Name != "soak" {
			require.Equal(t, "ok", st.Status, "%s: %s", st.Name, st.Detail)
		}
	}
	require.True(t, strings.HasPrefix(rep.Asserts["every tier ran"], "ok"), rep.Asserts["every tier ran"])
	require.True(t, strings.HasPrefix(rep.Asserts["all on gpu"], "ok"), rep.Asserts["all on gpu"])
	require.NotEmpty(t, rep.Searches)
	for _, s := range rep.Searches {
		require.True(t, s.OK, "%+v", s)
		require.Equal(t, "gpu", s.Device, "%+v", s)
		require.Positive(t, s.Checked, "%+v", s)
	}
	require.NotEmpty(t, rep.Variants, "the probe's self-tests are in the report")
	require.NotNil(t, rep.Filter, "the filtered step's report")
	require.Len(t, rep.Filter.Rows, 3)
	for _, row := range rep.Filter.Rows {
		require.True(t, row.Exact, "%+v", row)
		require.Positive(t, row.Checked, "%+v", row)
		require.Equal(t, "gpu", row.Device, "%+v", row)
	}
}

// TestDeviceCheckFailsWhenTheCPUAnswers: a search the engine answers on
// the CPU instead of the GPU fails the check, though the answer is right.
// Here the first query's components are subnormal, so the device's
// scaled scores would unscale to subnormals and the engine scores the
// search on the CPU (gpu.ErrSubnormal), as it would after any fallback.
// It runs under UMBRA_FULL=1 only, as TestDeviceCheckSmoke does (CI's
// shell step cannot make a query subnormal, so CI runs this one here).
func TestDeviceCheckFailsWhenTheCPUAnswers(t *testing.T) {
	if !testkit.Full() {
		t.Skip("a whole smoke run of the device check: UMBRA_FULL=1 runs it")
	}
	rep := smokeCheck(t, func(qs [][]float32) {
		for i := range qs[0] {
			qs[0][i] = float32(math.Ldexp(float64(qs[0][i]), -140))
		}
	})
	require.False(t, rep.Passed)
	var cpu []string
	for _, f := range rep.Failures {
		if strings.Contains(f, `"cpu" path, not the GPU`) {
			cpu = append(cpu, f)
		}
	}
	require.NotEmpty(t, cpu, "failures: %v", rep.Failures)
	var f32 CheckStep
	for _, st := range rep.Steps {
		if st.Name == "f32 batches" {
			f32 = st
		}
	}
	require.Equal(t, "FAIL", f32.Status, f32.Detail)
	require.False(t, strings.HasPrefix(rep.Asserts["every tier ran"], "ok"), rep.Asserts["every tier ran"])
}
