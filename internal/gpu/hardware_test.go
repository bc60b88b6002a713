//go:build cgo && !nogpu

package gpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/testkit"
)

// The faults in this file are those a hardware GPU shows and a software
// adapter, left to its own limits, never does; each test reaches one on
// lavapipe by asking for limits or rates that look like hardware.

// paddedQueries is n random queries padded to the slab's stride.
func paddedQueries(r *rand.Rand, s *packed.Slab, n int) [][]float32 {
	qs := make([][]float32, n)
	for i := range qs {
		qs[i] = make([]float32, s.Stride)
		copy(qs[i], testkit.Vector(r, s.Dim))
	}
	return qs
}

// requireFallbackAnswers checks got against the CPU backend's answers for
// the same queries: the same rows, by rank, and scores within float32
// rounding.
func requireFallbackAnswers(t *testing.T, s *packed.Slab, qs [][]float32, k int, m core.Metric, got [][]core.Hit, what string) {
	t.Helper()
	view := fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride}
	fm := fallback.Dot
	if m == core.L2 {
		fm = fallback.L2
	}
	want, err := fallback.SearchBatch(context.Background(), view, qs, k, fm, 0)
	require.NoError(t, err)
	require.Len(t, got, len(want), what)
	for i := range want {
		require.Len(t, got[i], len(want[i]), "%s: query %d", what, i)
		for j := range want[i] {
			require.Equal(t, want[i][j].Row, got[i][j].Row, "%s: query %d rank %d", what, i, j)
			require.InDelta(t, want[i][j].Score, got[i][j].Score, 1e-5*math.Max(1, math.Abs(float64(want[i][j].Score))),
				"%s: query %d rank %d", what, i, j)
		}
	}
}

// TestOddBindingLimit: NVIDIA and AMD report a storage binding limit of
// 2,147,483,647 bytes (i32::MAX), and wgpu refuses a storage binding that
// is not a multiple of 4 bytes. A scratch buffer that doubles up to the
// limit must stop at a multiple of 4 below it, or the batch that reaches
// the limit fails (and, under Auto, the GPU flaps between failing and
// working). Here on a device whose binding limit really is 2^23 - 1 bytes
// (i32::MAX scaled down), batches of growing size each double the scores
// buffer until it meets the limit, and every answer must be the CPU's.
func TestOddBindingLimit(t *testing.T) {
	a, _ := WorkingAdapter(t)
	const binding = 1<<23 - 1 // ends in …607, as i32::MAX ends in …647
	d, release, err := a.openLimited(binding)
	require.NoError(t, err)
	defer release()
	const rows, dim, k = 4096, 4, 10
	r := testkit.Rand(t)
	s := randomSlab(r, rows, dim)
	g, err := d.NewIndex(s.Stride, core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	assert.Zero(t, g.bind%4, "the binding limit the index plans with is a multiple of 4")
	require.NoError(t, g.Upload(context.Background(), s, 0, nil, nil))
	radix := WithSelectPath(context.Background(), SelectRadix)
	limit := g.batchLimit(submission{K: k, Rows: rows, DeviceSelect: true})
	require.Greater(t, limit, 300, "the test needs batches that reach past half the binding")
	// 300 queries' scores (4.9 MB) are past half the limit: the next,
	// larger batch doubles the buffer into the limit.
	for _, nq := range []int{37, 300, 400, limit} {
		qs := paddedQueries(r, s, nq)
		got, err := g.Search(radix, qs, k, rows, nil, nil)
		require.NoError(t, err, "%d queries (scores buffer %d bytes, binding limit %d)", nq, g.scoresB.size, binding)
		requireFallbackAnswers(t, s, qs, k, core.Dot, got, fmt.Sprintf("radix, %d queries", nq))
		assert.Zero(t, g.scoresB.size%4, "scores buffer after %d queries", nq)
	}
	// Every score read back (k past half the rows): the readback buffer
	// grows the same way.
	for _, nq := range []int{100, 300, 400} {
		qs := paddedQueries(r, s, nq)
		got, err := g.Search(context.Background(), qs, rows/2+1, rows, nil, nil)
		require.NoError(t, err, "%d queries, host select", nq)
		require.Len(t, got, nq)
	}
}

// stepLog records the steps an index's fault hook is asked about, failing
// none, and calls on (may be nil) at each.
type stepLog struct {
	steps []string
	on    func(step string)
}

func (l *stepLog) hook(step string) error {
	l.steps = append(l.steps, step)
	if l.on != nil {
		l.on(step)
	}
	return nil
}

// TestUploadSubmitsAsItWrites: wgpu keeps each queue write's staging copy
// until a submission after it completes, so an upload that submits only
// at the end holds the whole upload in staging at once (+12.3 GB of pinned
// host memory for 4M × 768 on NVIDIA). The staged bytes between two
// submissions must stay within the upload's flush size however large the
// upload. Counted from the steps the upload issues: every "write rows" is
// one piece, and a submission ("flush upload" or "finish upload") frees
// the pieces before it.
func TestUploadSubmitsAsItWrites(t *testing.T) {
	d := softwareDevice(t)
	const rows, dim = 8192, 64 // 2 MiB
	r := testkit.Rand(t)
	s := randomSlab(r, rows, dim)
	g, err := d.NewIndex(s.Stride, core.L2, 3000) // three chunks
	require.NoError(t, err)
	defer g.Release()
	const piece, flush = 64 << 10, 256 << 10
	g.writePiece, g.flushBytes = piece, flush
	var log stepLog
	g.SetFault(log.hook)
	var st core.Stages
	require.NoError(t, g.Upload(context.Background(), s, 0, &st, nil))
	g.SetFault(nil)
	pending, most, writes := 0, 0, 0
	for _, step := range log.steps {
		switch step {
		case "write rows":
			pending += piece
			writes++
			most = max(most, pending)
		case "flush upload", "finish upload":
			pending = 0
		}
	}
	total := rows * dim * 4
	require.GreaterOrEqual(t, writes, total/piece, "the upload is written in pieces")
	assert.LessOrEqual(t, most, flush, "bytes staged between two submissions (upload of %d bytes)", total)
	assert.GreaterOrEqual(t, st.Submissions, int64(total/flush), "submissions of the upload")
	// The rows arrived whole.
	qs := paddedQueries(r, s, 3)
	got, err := g.Search(context.Background(), qs, 5, rows, nil, nil)
	require.NoError(t, err)
	requireFallbackAnswers(t, s, qs, 5, core.L2, got, "after a flushed upload")

	// Rewrite (an upsert of many rows) flushes the same way.
	log = stepLog{}
	g.SetFault(log.hook)
	all := make([]int, rows)
	for i := range all {
		all[i] = i
	}
	require.NoError(t, g.Rewrite(context.Background(), s, all))
	g.SetFault(nil)
	pending, most = 0, 0
	for _, step := range log.steps {
		switch step {
		case "write rows":
			pending += s.Stride * 4
			most = max(most, pending)
		case "flush upload", "finish upload":
			pending = 0
		}
	}
	assert.LessOrEqual(t, most, flush, "bytes a rewrite stages between two submissions")
}

// TestSubmissionsCutByWork: a batch is cut into submissions of about
// submitBudget of estimated work at the device's measured scan rate, not
// only by what its buffers hold: 1,024 queries over 1M × 768 in one
// submission take ~2 s on a small GPU (past Windows' 2 s TDR), with the
// device held and no way to cancel. A device that scans slowly, as this
// one is told it does, takes one tile of queries per submission; the
// answers are the same; and a context cancelled during the batch stops it
// at the next submission.
func TestSubmissionsCutByWork(t *testing.T) {
	d := softwareDevice(t)
	const rows, dim, k, nq = 3000, 32, 7, 40
	r := testkit.Rand(t)
	s := randomSlab(r, rows, dim)
	// One tile's scan (batchQT queries over the slab) is estimated at
	// twice the budget.
	slow := &Device{api: d.api, info: d.info, lim: d.lim, hasSubgroups: d.hasSubgroups,
		subgroups: d.subgroups, team: d.team, staged: d.staged,
		scanRate: float64(s.Bytes()) / (2 * submitBudget.Seconds())}
	qs := paddedQueries(r, s, nq)
	for _, path := range []SelectPath{SelectRadix, SelectAuto} {
		g, err := slow.NewIndex(s.Stride, core.Dot, 0)
		require.NoError(t, err)
		require.NoError(t, g.Upload(context.Background(), s, 0, nil, nil))
		ctx := WithSelectPath(context.Background(), path)
		var st core.Stages
		got, err := g.Search(ctx, qs, k, rows, nil, &st)
		require.NoError(t, err)
		requireFallbackAnswers(t, s, qs, k, core.Dot, got, fmt.Sprintf("path %v", path))
		tiles := (nq + batchQT - 1) / batchQT
		assert.Equal(t, int64(tiles), st.Submissions, "path %v: one submission per tile of %d queries", path, batchQT)

		// Cancelled after the first submission: no second one.
		cctx, cancel := context.WithCancel(ctx)
		submits := 0
		log := stepLog{on: func(step string) {
			if step == "submit" {
				submits++
				cancel()
			}
		}}
		g.SetFault(log.hook)
		_, err = g.Search(cctx, qs, k, rows, nil, nil)
		g.SetFault(nil)
		cancel()
		require.ErrorIs(t, err, context.Canceled, "path %v", path)
		assert.Equal(t, 1, submits, "path %v: the batch stopped at the first submission after the cancel", path)
		g.Release()
	}

	// On the device's own measured rate the same batch is one
	// submission: small work is not cut.
	g, err := d.NewIndex(s.Stride, core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	require.NoError(t, g.Upload(context.Background(), s, 0, nil, nil))
	require.Positive(t, d.scanRate, "the probe measured a scan rate")
	var st core.Stages
	_, err = g.Search(context.Background(), qs, k, rows, nil, &st)
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Submissions)
}

// peakRSS resets the process's peak resident set (Linux: clear_refs 5)
// when reset, and returns it in bytes (VmHWM).
func peakRSS(t *testing.T, reset bool) int64 {
	t.Helper()
	if reset {
		require.NoError(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0))
	}
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// TestUploadPeakHostMemory measures what TestUploadSubmitsAsItWrites
// counts: on lavapipe, device buffers and wgpu's staging copies are both
// host memory, so the process's peak resident set during an upload of B
// bytes is about B (the rows) plus what is staged at once: 2B when the
// upload submits only at the end, B plus the flush size when it submits
// as it goes. Linux and UMBRA_FULL only (256 MiB of rows).
func TestUploadPeakHostMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self")
	}
	if !testkit.Full() {
		t.Skip("256 MiB upload: UMBRA_FULL=1")
	}
	d := softwareDevice(t)
	if !d.info.Software() {
		t.Skipf("%s keeps its buffers in device memory", d.info.Name)
	}
	const rows, dim = 1 << 16, 1024 // 256 MiB
	s := packed.Synthetic(rows, dim)
	g, err := d.NewIndex(s.Stride, core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	const flush = 16 << 20
	g.writePiece, g.flushBytes = 4<<20, flush
	debug.FreeOSMemory()
	before := peakRSS(t, true)
	require.NoError(t, g.Upload(context.Background(), s, 0, nil, nil))
	grew := peakRSS(t, false) - before
	upload := int64(s.Bytes())
	t.Logf("upload of %d MiB: peak resident set grew %d MiB", upload>>20, grew>>20)
	assert.Less(t, grew, upload+upload/2, "staged copies of the upload held at once")
}

// nvidiaLike is a device that is never opened, with an H100's or H200's
// limits as wgpu reports them on NVIDIA (a 2^31 - 1 byte binding, buffers
// of 2^40 and more, 65,535 workgroups a dimension, 1,024 invocations and
// 48 KiB of workgroup memory) and the variant a probe there would likely
// choose (teams of 32, gemm.wgsl, the fused top-k): planning alone, for
// the sizes no software adapter can hold.
func nvidiaLike(scanRate float64) *Device {
	return &Device{lim: Limits{MaxStorageBindingBytes: 1<<31 - 1, MaxBufferBytes: 1 << 42, MaxWorkgroupsPerDim: 65535,
		MaxInvocations: 1024, MaxWorkgroupBytes: 48 << 10}, team: 32, gemm: true, fused: true, scanRate: scanRate}
}

// TestSubmissionsAreWholeTiles: at 4,000,000 × 768 under NVIDIA's binding
// limit, 134 queries' scores fit one binding (4 × 32 + 6): a batch of
// 1,024 cut into submissions of 134 ran 8 submissions of 4 full gemm
// tiles and a sixth of one (about 19% of the tile work wasted), the last
// of 86. Every submission is now whole tiles of the kernel it runs
// (gemm.wgsl's 32 queries, scores.wgsl's 8), whatever the device's scan
// rate and the scratch cap (that of the rows resident) allow, and never
// fewer queries than one tile where a tile fits.
func TestSubmissionsAreWholeTiles(t *testing.T) {
	for _, rate := range []float64{0, 3e11, 4e12} { // not measured, a laptop's, an H200's
		d := nvidiaLike(rate)
		g, err := d.planIndex(768, core.Dot, core.F32, 0)
		require.NoError(t, err)
		require.Equal(t, uint32(32), g.gemm.QT)
		for _, c := range []struct {
			rows, k int
			gemm    bool
		}{{4_000_000, 10, true}, {4_000_000, 1000, true}, {4_000_000, 10, false}, {1_000_000, 100, true}, {699_050, 10, true}} {
			sub := submission{K: c.k, Rows: c.rows, DeviceSelect: 2*c.k < c.rows}
			// The scratch cap is that of the rows resident: as if they
			// were (this device allocates nothing).
			g.rowBudget = uint64(c.rows) * uint64(g.plan.Stride) * 4
			per := g.perSubmission(sub, c.gemm)
			qt := int(g.batch.QT)
			if c.gemm {
				qt = int(g.gemm.QT)
			}
			what := fmt.Sprintf("scan rate %g, %d rows, k %d, gemm %v: %d queries a submission", rate, c.rows, c.k, c.gemm, per)
			t.Log(what)
			require.GreaterOrEqual(t, per, qt, what)
			require.Zero(t, per%qt, what)
			require.LessOrEqual(t, uint64(per)*uint64(c.rows)*4, g.bind, what)
			require.LessOrEqual(t, uint64(per)*scratchPerQuery(sub, g.queryBytes()), g.scratchCap(), what)
		}
	}
}
