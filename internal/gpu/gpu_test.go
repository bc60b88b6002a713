//go:build cgo && !nogpu

package gpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/gpu/native"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/testkit"
)

// softwareDevice returns the probed device of the first working adapter of
// any type, skipping (or failing under UMBRA_REQUIRE_GPU=1) when none works.
func softwareDevice(t *testing.T) *Device {
	t.Helper()
	_, d := WorkingAdapter(t)
	return d
}

// WorkingAdapter returns the first adapter of any type, Vulkan first (the
// faster of the software adapters), whose probe works, with its device, so
// that tests run the real shaders anywhere; it skips (or, under
// UMBRA_REQUIRE_GPU=1, fails) when none works.
//
// Under UMBRA_GPU_LIMITS=nvidia the device is a second one on that adapter,
// opened with limits like an NVIDIA card's where the adapter allows them
// (see hardwareLimits) and self-tested and tuned as a probed one is.
func WorkingAdapter(t testing.TB) (*Adapter, *Device) {
	t.Helper()
	for _, backend := range []string{"vulkan", ""} {
		as, err := Adapters(backend)
		if err != nil {
			break
		}
		for _, a := range as {
			if dev, _ := a.Probe(context.Background(), 30*time.Second); dev != nil {
				if os.Getenv("UMBRA_GPU_LIMITS") == "nvidia" {
					return a, mimicDevice(t, a)
				}
				return a, dev
			}
		}
	}
	testkit.NoGPU(t, "no adapter works")
	return nil, nil
}

// mimic is the device mimicDevice opened, once per process.
var mimic struct {
	sync.Once
	d   *Device
	err error
}

// hardwareLimits edits an adapter's limits to look like an NVIDIA card's
// as far as a software adapter can: the storage binding limit one byte
// short of a power of two (NVIDIA reports i32::MAX, 2^31 - 1; this is the
// adapter's own limit, a power of two, less one), workgroup storage of
// 48 KiB and 1,024 invocations where the adapter has that much (lavapipe
// has 32 KiB, which stays).
func hardwareLimits(l *wgpu.Limits) {
	l.MaxStorageBufferBindingSize = min(l.MaxStorageBufferBindingSize, 1<<31) - 1
	l.MaxComputeWorkgroupStorageSize = min(l.MaxComputeWorkgroupStorageSize, 48<<10)
	l.MaxComputeInvocationsPerWorkgroup = min(l.MaxComputeInvocationsPerWorkgroup, 1024)
}

// mimicDevice opens (once per process) and self-tests a device on a with
// hardwareLimits.
func mimicDevice(t testing.TB, a *Adapter) *Device {
	t.Helper()
	mimic.Do(func() {
		mimic.d, mimic.err = openDeviceWith(a, hardwareLimits)
		if mimic.err == nil {
			mimic.err = mimic.d.Verify()
		}
	})
	require.NoError(t, mimic.err, "a device with hardware-like limits")
	require.Equal(t, uint64(7), mimic.d.lim.MaxStorageBindingBytes%8, "the binding limit is odd, as hardware's is")
	return mimic.d
}

// TestTwoDimensionalGrid caps workgroups per dimension far below the
// device's limit so one chunk needs a 2-D grid with a ragged last row.
func TestTwoDimensionalGrid(t *testing.T) {
	d := softwareDevice(t)
	r := testkit.Rand(t)
	capped := &Device{api: d.api, info: d.info, lim: d.lim, hasSubgroups: d.hasSubgroups}
	capped.lim.MaxWorkgroupsPerDim = 7
	const dim, rows = 64, 3001
	slab := packed.NewSlab(dim)
	vs := make([][]float32, rows)
	for i := range vs {
		vs[i] = make([]float32, dim)
		for j := range vs[i] {
			vs[i][j] = r.Float32()*2 - 1
		}
	}
	slab.Append(vs, false)
	g, err := newIndex(capped, slab.Stride, core.L2, 0)
	require.NoError(t, err)
	defer g.Release()
	x, y := g.grid(rows, g.single)
	require.Equal(t, uint32(7), x)
	require.Greater(t, y, uint32(1))
	require.NoError(t, g.Upload(context.Background(), slab, 0, nil, nil))
	q := make([]float32, slab.Stride)
	for j := 0; j < dim; j++ {
		q[j] = r.Float32()*2 - 1
	}
	got, err := g.scores(context.Background(), q, rows)
	require.NoError(t, err)
	for i := 0; i < rows; i++ {
		var want float64
		for j, v := range slab.Row(i) {
			d := float64(v) - float64(q[j])
			want += d * d
		}
		require.InDelta(t, want, float64(got[i]), 1e-5*math.Max(1, want), "row %d", i)
	}
}

// TestCalibrate measures a device the way Auto does and checks the numbers
// are usable (their size depends on the machine, so only their sign is
// asserted).
func TestCalibrate(t *testing.T) {
	d := softwareDevice(t)
	latency, rate, err := d.Calibrate()
	require.NoError(t, err)
	t.Logf("%s: latency %v, %.2f GB/s", d.info.Name, latency, rate/1e9)
	assert.Positive(t, latency)
	assert.Positive(t, rate)
	l2, r2, err := d.Calibrate()
	require.NoError(t, err)
	assert.Equal(t, latency, l2, "calibration runs once per device")
	assert.Equal(t, rate, r2)
}

// TestReductionVariantsAgree scores the same rows with the subgroup-shuffle
// reduction and the workgroup-memory tree on one device, for team widths
// below, at and above common subgroup sizes, against float64. That they
// give the same bits, and the fused scan's, at every team and subgroup
// size is TestScoreBitsOnEveryPath's.
func TestReductionVariantsAgree(t *testing.T) {
	d := softwareDevice(t)
	if !d.subgroups {
		t.Skipf("%s (%s) has no subgroup feature; the tree variant is covered by every other test", d.info.Name, d.info.API)
	}
	r := testkit.Rand(t)
	tree := &Device{api: d.api, info: d.info, lim: d.lim, hasSubgroups: d.hasSubgroups, team: d.team}
	// The subgroup variant on a device whose subgroup layout it does not
	// trust: every workgroup must take its own tree reduction instead.
	distrust := &Device{api: d.api, info: d.info, lim: d.lim, hasSubgroups: d.hasSubgroups, subgroups: true,
		team: d.team, staged: d.staged, // the same variant as d's but for the layout check
		editScores: func(src string) string {
			const check = "var ok = w > 0u"
			require.Contains(t, src, check)
			return strings.Replace(src, check, "var ok = false && w > 0u", 1)
		}}
	for _, dim := range []int{3, 30, 130, 768} {
		slab := packed.NewSlab(dim)
		vs := make([][]float32, 777)
		for i := range vs {
			vs[i] = make([]float32, dim)
			for j := range vs[i] {
				vs[i][j] = r.Float32()*2 - 1
			}
		}
		slab.Append(vs, false)
		q := make([]float32, slab.Stride)
		for j := 0; j < dim; j++ {
			q[j] = r.Float32()*2 - 1
		}
		var got [3][]float32
		for i, dev := range []*Device{d, tree, distrust} {
			g, err := newIndex(dev, slab.Stride, core.Dot, 0)
			require.NoError(t, err)
			require.Equal(t, i != 1, g.single.Subgroups)
			require.NoError(t, g.Upload(context.Background(), slab, 0, nil, nil))
			got[i], err = g.scores(context.Background(), q, slab.Rows)
			require.NoError(t, err)
			g.Release()
		}
		for i := range got[0] {
			var want float64
			for j, v := range slab.Row(i) {
				want += float64(v) * float64(q[j])
			}
			require.InDelta(t, want, float64(got[0][i]), 1e-5*math.Max(1, math.Abs(want)), "dim %d row %d, subgroups", dim, i)
			require.InDelta(t, want, float64(got[1][i]), 1e-5*math.Max(1, math.Abs(want)), "dim %d row %d, tree", dim, i)
			require.InDelta(t, want, float64(got[2][i]), 1e-5*math.Max(1, math.Abs(want)), "dim %d row %d, subgroups distrusted", dim, i)
		}
		require.Equal(t, got[0], got[1], "dim %d: shuffles and tree give the same bits", dim)
		require.Equal(t, got[0], got[2], "dim %d: shuffles and their distrusted tree give the same bits", dim)
	}
}

// TestAdoptDefaultLimits: with nil limits an index on a caller's
// device plans with WebGPU's guaranteed defaults, so a slab larger than the
// 128 MiB default binding is split into chunks.
func TestAdoptDefaultLimits(t *testing.T) {
	d := softwareDevice(t)
	adopted, err := Adopt(nativeOf(d).Adapter(), nativeOf(d).Raw(), nil)
	require.NoError(t, err)
	g, err := adopted.NewIndex(384, core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	assert.Equal(t, uint64(128<<20), g.Limits().MaxStorageBindingBytes)
	assert.Equal(t, (128<<20)/(384*4), g.ChunkRows())
}

// TestTuneTeam: the probe measured a team width for the device, and an
// index plans with it (capped by the row's vec4 count).
func TestTuneTeam(t *testing.T) {
	d := softwareDevice(t)
	assert.Contains(t, teamCandidates, d.team, "the probe tuned the team width")
	g, err := newIndex(d, 768, core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	assert.Equal(t, d.team, g.single.Team)
	assert.Equal(t, d.team, g.Limits().Team)
	short, err := newIndex(d, 8, core.Dot, 0)
	require.NoError(t, err)
	defer short.Release()
	assert.Equal(t, uint32(2), short.single.Team, "two vec4 per row: a team of two")
	t.Logf("%s (%s): team %d", d.info.Name, d.info.API, d.team)
}

// TestSelectSettlesEarly reads the select state back after a search: on
// distinct random scores the threshold settles in fewer than eight rounds
// (later rounds return at once), while rows that all tie need the row-index
// rounds, and still come back by lower ID.
func TestSelectSettlesEarly(t *testing.T) {
	d := softwareDevice(t)
	radix := WithSelectPath(context.Background(), SelectRadix) // the radix select's state is read here
	r := testkit.Rand(t)
	rounds := func(g *Index) uint32 {
		return binary.LittleEndian.Uint32(readBuffer(t, g, g.state.buf, 32)[28:])
	}
	for _, tc := range []struct {
		name  string
		tied  bool
		check func(uint32)
	}{
		{"distinct", false, func(n uint32) { assert.Less(t, n, uint32(8), "random scores settle early") }},
		{"all tied", true, func(n uint32) { assert.GreaterOrEqual(t, n, uint32(5), "ties need the row-index bytes") }},
	} {
		s := packed.NewSlab(16)
		vs := make([][]float32, 3000)
		one := make([]float32, 16)
		for j := range one {
			one[j] = r.Float32()*2 - 1
		}
		for i := range vs {
			vs[i] = one
			if !tc.tied {
				vs[i] = make([]float32, 16)
				for j := range vs[i] {
					vs[i][j] = r.Float32()*2 - 1
				}
			}
		}
		s.Append(vs, false)
		g, err := newIndex(d, s.Stride, core.Dot, 0)
		require.NoError(t, err)
		require.NoError(t, g.Upload(context.Background(), s, 0, nil, nil))
		hits, err := g.Search(radix, [][]float32{s.PaddedRow(5)}, 10, s.Rows, nil, nil)
		require.NoError(t, err)
		require.Len(t, hits[0], 10)
		if tc.tied {
			for i, h := range hits[0] {
				assert.Equal(t, i, h.Row, "tied rows come back by lower row")
			}
		}
		n := rounds(g)
		t.Logf("%s: threshold settled after %d rounds", tc.name, n)
		tc.check(n)
		g.Release()
	}
}

// TestStagedQueriesAgree runs batches with the queries staged in workgroup
// memory and read through the cache (whichever the probe chose, the other
// is forced here), across dimensions that leave a partial last slice and a
// partial last tile of queries, and checks both against the fallback.
func TestStagedQueriesAgree(t *testing.T) {
	d := softwareDevice(t)
	t.Logf("the probe chose staged=%v on %s (%s)", d.staged, d.info.Name, d.info.API)
	r := testkit.Rand(t)
	for _, dim := range []int{3, 130, 768} {
		slab := packed.NewSlab(dim)
		vs := make([][]float32, 1300)
		for i := range vs {
			vs[i] = make([]float32, dim)
			for j := range vs[i] {
				vs[i][j] = r.Float32()*2 - 1
			}
		}
		slab.Append(vs, false)
		qs := make([][]float32, 11)
		for i := range qs {
			qs[i] = make([]float32, slab.Stride)
			for j := 0; j < dim; j++ {
				qs[i][j] = r.Float32()*2 - 1
			}
		}
		view := fallback.Slab{Data: slab.Data, Rows: slab.Rows, Dim: slab.Dim, Stride: slab.Stride}
		want, err := fallback.SearchBatch(context.Background(), view, qs, 7, fallback.L2, 0)
		require.NoError(t, err)
		for _, staged := range []bool{false, true} {
			dev := &Device{api: d.api, info: d.info, lim: d.lim, hasSubgroups: d.hasSubgroups,
				subgroups: d.subgroups, team: d.team, staged: staged}
			g, err := newIndex(dev, slab.Stride, core.L2, 500)
			require.NoError(t, err)
			require.Equal(t, staged && g.batch.Slice > 0, g.batch.Slice > 0)
			require.NoError(t, g.Upload(context.Background(), slab, 0, nil, nil))
			got, err := g.Search(context.Background(), qs, 7, slab.Rows, nil, nil)
			require.NoError(t, err)
			for i := range want {
				for j := range want[i] {
					assert.Equal(t, want[i][j].Row, got[i][j].Row, "dim %d staged %v query %d rank %d", dim, staged, i, j)
					assert.InDelta(t, want[i][j].Score, got[i][j].Score, 1e-5*math.Max(1, float64(want[i][j].Score)))
				}
			}
			g.Release()
		}
	}
}

// TestBatchLimitCoversEveryBuffer: whatever the request, one submission's
// scratch buffers each fit the device's binding and its readback the
// device's buffer size, and at least one query always fits.
func TestBatchLimitCoversEveryBuffer(t *testing.T) {
	d := softwareDevice(t)
	for _, c := range []struct{ stride, rows, k int }{
		{4, 1, 1}, {4, 20000, 20000}, {4, 20000, 9999}, {768, 50000, 10},
		{65536, 100, 5}, {4, 1 << 25, 1<<24 + 1}, {4, 1 << 25, 1 << 20},
	} {
		t.Run(fmt.Sprintf("stride%d/rows%d/k%d", c.stride, c.rows, c.k), func(t *testing.T) {
			g, err := newIndex(d, c.stride, 0, 0)
			require.NoError(t, err)
			defer g.Release()
			// An upload whose one query's scores outgrow a binding is
			// refused (Stage), so no search asks for more rows: on an
			// odd, hardware-like binding limit 2^25 rows are too many.
			c.rows = min(c.rows, int(g.bind/4))
			c.k = min(c.k, c.rows)
			sub := submission{K: c.k, Rows: c.rows, DeviceSelect: 2*c.k < c.rows}
			n := g.batchLimit(sub)
			require.GreaterOrEqual(t, n, 1)
			sub.NQ = n
			nq := uint64(n)
			require.LessOrEqual(t, nq*uint64(c.rows)*4, g.bind, "scores")
			require.LessOrEqual(t, nq*uint64(c.stride)*4, g.bind, "queries")
			require.LessOrEqual(t, nq*uint64(sub.HitsPerQuery())*8, g.bind, "hits")
			require.LessOrEqual(t, sub.ReadbackBytes(), g.dev.lim.MaxBufferBytes, "readback")
		})
	}
}

// TestSplitsOnASmallBinding: on a device whose bindings really are 64 KiB,
// the requests that once failed there need several submissions: 40 queries
// with k = 1,000 of 1,000 rows, and 10 queries of 4,096 floats.
func TestSplitsOnASmallBinding(t *testing.T) {
	a, _ := WorkingAdapter(t)
	d, release, err := a.openLimited(64 << 10)
	require.NoError(t, err)
	defer release()
	for _, c := range []struct{ stride, rows, k, nq int }{{8, 1000, 1000, 40}, {4096, 10, 3, 10}} {
		g, err := d.NewIndex(c.stride, 0, 0)
		require.NoError(t, err)
		n := g.batchLimit(submission{K: c.k, Rows: c.rows, DeviceSelect: 2*c.k < c.rows})
		assert.Less(t, n, c.nq, "stride %d, %d rows, k %d: one submission would not fit", c.stride, c.rows, c.k)
		g.Release()
	}
}

// openLimited opens a new device on the adapter whose storage bindings
// really are at most binding bytes (a binding past it is a validation error
// on the device), self-tested like any other; release frees it: the
// device's limits reached with small data.
func (ad *Adapter) openLimited(binding uint64) (d *Device, release func(), err error) {
	var dev *wgpu.Device
	var lim wgpu.Limits
	err = native.Call("open a limited device", func() error {
		lim = ad.a.Raw.GetLimits()
		lim.MaxStorageBufferBindingSize = binding
		var err error
		dev, err = ad.a.Raw.RequestDevice(&wgpu.DeviceDescriptor{Label: "umbra limited", RequiredLimits: &lim})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if d, err = Adopt(ad.a.Raw, dev, &lim); err != nil {
		dev.Release()
		return nil, nil, err
	}
	return d, dev.Release, nil
}

// readBuffer reads the first size bytes of a buffer of g's on the device
// (through g's readback buffer).
func readBuffer(t testing.TB, g *Index, src gpuplan.Buffer, size uint64) []byte {
	t.Helper()
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	var raw []byte
	require.NoError(t, g.dev.scoped("test readback", func() error {
		if _, err := g.staging.ensure(g, size); err != nil {
			return err
		}
		done, err := g.api().Submit(gpuplan.Work{Copies: []gpuplan.Copy{{Src: src, Dst: g.staging.buf, Size: size}},
			Map: g.staging.buf, MapBytes: size}, false)
		raw = done.Data
		return err
	}))
	return raw
}
