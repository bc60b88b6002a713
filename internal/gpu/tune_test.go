//go:build cgo && !nogpu

package gpu

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTimingSlabsPastTheCache: a hardware adapter is tuned and calibrated
// on slabs of at least 128 MiB (past the last-level cache of every current
// GPU: an H200's L2 is 50 MB), as far as its largest buffer allows and
// never smaller than a software adapter's, which keeps its 12 and 32 MiB
// ones; when the large slab cannot be timed (device memory), the small one
// is. On the software adapter a "hardware" copy of the device is timed on
// a scaled-down large slab, so the test takes well under a second.
func TestTimingSlabsPastTheCache(t *testing.T) {
	d := softwareDevice(t)
	like := func(typ string) *Device {
		c := &Device{api: d.api, info: d.info, lim: d.lim, hasSubgroups: d.hasSubgroups, subgroups: d.subgroups}
		c.info.Type = typ
		return c
	}
	sw, hw := like("cpu"), like("discrete-gpu")
	hw.lim.MaxBufferBytes = 1 << 40
	require.Equal(t, tuneRows, sw.timingRows(tuneDim, tuneRows))
	require.Equal(t, CalibrationRows, sw.timingRows(CalibrationDim, CalibrationRows))
	for _, c := range []struct{ dim, small int }{{tuneDim, tuneRows}, {CalibrationDim, CalibrationRows}} {
		require.GreaterOrEqual(t, hw.timingRows(c.dim, c.small)*c.dim*4, 128<<20, "dim %d", c.dim)
	}
	hw.lim.MaxBufferBytes = 64 << 20
	require.Equal(t, (64<<20)/(tuneDim*4), hw.timingRows(tuneDim, tuneRows), "capped by the largest buffer")
	hw.lim.MaxBufferBytes = 1 << 20
	require.Equal(t, tuneRows, hw.timingRows(tuneDim, tuneRows), "never below the small slab")

	// Timed on the large slab; then, when it cannot be, on the small one.
	for _, fail := range []bool{false, true} {
		hw := like("discrete-gpu")
		hw.timingBytes = 40 << 20 // 13,653 rows of 768 for tune, 10,240 of 1024 for Calibrate
		var timed []int
		hw.failTiming = func(rows int) bool {
			timed = append(timed, rows)
			return fail && rows > tuneRows && rows != CalibrationRows
		}
		big := hw.timingRows(tuneDim, tuneRows)
		require.Greater(t, big, tuneRows)
		hw.tune([]variant{{Team: 8}}) // one team, no batch timing: one slab's worth of timing
		require.Equal(t, uint32(8), hw.team)
		require.Positive(t, hw.scanRate, "fail %v", fail)
		want := []int{big}
		if fail {
			want = append(want, tuneRows)
		}
		require.Equal(t, want, timed, "tune's slabs, fail %v", fail)

		timed = nil
		latency, rate, err := hw.Calibrate()
		require.NoError(t, err)
		require.Positive(t, latency)
		require.Positive(t, rate)
		want = []int{hw.timingRows(CalibrationDim, CalibrationRows)}
		require.Greater(t, want[0], CalibrationRows)
		if fail {
			want = append(want, CalibrationRows)
		}
		require.Equal(t, want, timed, "Calibrate's slabs, fail %v", fail)
	}
}

// TestTuneGemm: tuneGemm times gemm.wgsl against scores.wgsl's tiles on a
// hardware adapter's large slab (a software one's quarter slab), and a
// timing that fails keeps the tiles rather than failing the probe. A
// device whose gemm fails its self-test never lets batches take it.
func TestTuneGemm(t *testing.T) {
	d := softwareDevice(t)
	like := func(typ string) *Device {
		c := &Device{api: d.api, info: d.info, lim: d.lim, hasSubgroups: d.hasSubgroups,
			subgroups: d.subgroups, team: d.team}
		c.info.Type = typ
		return c
	}
	for _, typ := range []string{"cpu", "discrete-gpu"} {
		for _, fail := range []bool{false, true} {
			c := like(typ)
			c.timingBytes = 16 << 20
			var timed []int
			c.failTiming = func(rows int) bool {
				timed = append(timed, rows)
				return fail
			}
			_, _, err := c.tuneGemm()
			want := tuneRows / 4
			if typ != "cpu" {
				want = (16 << 20) / (tuneDim * 4)
			}
			require.Equal(t, []int{want}, timed, "%s, fail %v", typ, fail)
			if fail {
				require.Error(t, err, "a failed timing keeps the tiles")
			}
		}
	}
	// A gemm that gives other bits than scores.wgsl fails the self-test.
	c := like(d.info.Type)
	c.editScores = func(src string) string {
		return strings.Replace(src, "partial[0u * WG + li] = (a0_0.x + a0_0.y) + (a0_0.z + a0_0.w);",
			"partial[0u * WG + li] = (a0_0.x + a0_0.y) + (a0_0.z + a0_0.w) + 1e-3;", 1)
	}
	c.verifyGemm()
	require.Error(t, c.gemmErr)
	require.False(t, c.gemm)
	t.Log(c.gemmErr)
	// The failure is recorded where umbra probe --json shows it: gemm's
	// check, refused, with the self-test's error (before, the error was
	// kept in the device and shown nowhere).
	require.Len(t, c.checks, 1)
	got := c.checks[0]
	require.Equal(t, "gemm", got.Kernel)
	require.False(t, got.Passed)
	require.False(t, got.Chosen)
	require.Contains(t, got.Error, "gemm gave score")
	require.Contains(t, got.Why, "scores.wgsl's tiles")
}
