//go:build cgo && !nogpu

package gpu

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestDeviceCheck is the answer half of bench/device-check.sh: on the
// first hardware adapter (a software one only under
// UMBRA_CHECK_SOFTWARE=1, for CI's smoke run) it uploads UMBRA_CHECK_ROWS
// random rows of UMBRA_CHECK_DIM (default 768) and checks every answer of
// every path against the CPU:
//
//   - f32: for each k of UMBRA_CHECK_KS (default 10,1000) and each batch of
//     UMBRA_CHECK_BATCHES (default 1,8,64,128), Search on the fused path
//     (where the device passed it and k is within its limit), with the
//     radix select forced and, for batches, with each batch kernel forced
//     (scores.wgsl's tiles, gemm.wgsl); every query's answer is compared with the
//     fallback's exact answer by testkit.SameRanking (float64 references,
//     near-ties only may trade ranks).
//   - f16, int8: quant.wgsl's raw sums (Sums) for each batch, compared with
//     the host's over a sample of rows (every chunk's first and last row and
//     rows spread evenly, UMBRA_CHECK_SAMPLE of them, default 65,536):
//     int8 sums exactly, f16 within float32 rounding; then, for each k, the
//     candidates selected on the device (SelectSums, qbounds.wgsl), whose
//     answers must be the ones the host gives from every sum, bit for bit.
//
// UMBRA_CHECK_PRECISION picks one of f32, f16, int8 (default f32).
// Everything measured (the adapter, its limits, each case's path,
// submissions, wall time and verdict) is written as JSON to
// UMBRA_CHECK_OUT when set. Without UMBRA_CHECK_ROWS it does nothing: it
// is a tool, not part of the package's tests.
func TestDeviceCheck(t *testing.T) {
	rowsEnv := os.Getenv("UMBRA_CHECK_ROWS")
	if rowsEnv == "" {
		t.Skip("run by bench/device-check.sh (UMBRA_CHECK_ROWS)")
	}
	cfg := checkConfig{Rows: atoiEnv(t, "UMBRA_CHECK_ROWS", 0), Dim: atoiEnv(t, "UMBRA_CHECK_DIM", 768),
		Ks: intsEnv(t, "UMBRA_CHECK_KS", "10,1000"), Batches: intsEnv(t, "UMBRA_CHECK_BATCHES", "1,8,64,128"),
		Precision: envOr("UMBRA_CHECK_PRECISION", "f32"), Sample: atoiEnv(t, "UMBRA_CHECK_SAMPLE", 65536),
		Seed: uint64(atoiEnv(t, "UMBRA_CHECK_SEED", 42))}
	require.Positive(t, cfg.Rows)
	require.Zero(t, cfg.Dim%4, "UMBRA_CHECK_DIM must be a multiple of 4")
	rep := &checkReport{Config: cfg}
	defer rep.write(t)

	dev := checkDevice(t, rep)
	ctx := context.Background()
	start := time.Now()
	data := checkData(cfg.Rows, cfg.Dim, cfg.Seed)
	slab := &packed.Slab{Dim: cfg.Dim, Stride: cfg.Dim, Rows: cfg.Rows, Data: data}
	nq := 0
	for _, b := range cfg.Batches {
		nq = max(nq, b)
	}
	qs := make([][]float32, nq)
	r := rand.New(rand.NewPCG(cfg.Seed, 7))
	for i := range qs {
		qs[i] = make([]float32, cfg.Dim)
		for j := range qs[i] {
			qs[i][j] = float32(r.NormFloat64())
		}
	}
	rep.DataMS = ms(time.Since(start))
	switch cfg.Precision {
	case "f32":
		checkF32(t, ctx, dev, slab, qs, rep)
	case "f16", "int8":
		checkSums(t, ctx, dev, slab, qs, rep)
	default:
		t.Fatalf("UMBRA_CHECK_PRECISION %q: f32, f16 or int8", cfg.Precision)
	}
	for _, c := range rep.Cases {
		if !c.OK {
			t.Errorf("%s k=%d nq=%d path=%s: %s", cfg.Precision, c.K, c.NQ, c.Path, c.Error)
		}
	}
}

type checkConfig struct {
	Rows, Dim int
	Ks        []int
	Batches   []int
	Precision string
	Sample    int
	Seed      uint64
}

type checkCase struct {
	K           int     `json:"k,omitempty"`
	NQ          int     `json:"nq"`
	Path        string  `json:"path"`
	Took        string  `json:"took"` // the path the search reports it took
	Submissions int64   `json:"submissions"`
	MS          float64 `json:"ms"`
	Checked     int     `json:"checked"` // queries (f32) or query × row sums (f16, int8)
	OK          bool    `json:"ok"`
	Error       string  `json:"error,omitempty"`
}

type checkReport struct {
	Config   checkConfig      `json:"config"`
	Adapter  core.AdapterInfo `json:"adapter"`
	Limits   Limits           `json:"limits"`
	ScanRate float64          `json:"scan_rate_bytes_per_s"`
	DataMS   float64          `json:"data_ms"`
	UploadMS float64          `json:"upload_ms"`
	CPUMS    float64          `json:"cpu_reference_ms"`
	Cases    []checkCase      `json:"cases"`
}

func (rep *checkReport) write(t *testing.T) {
	out := os.Getenv("UMBRA_CHECK_OUT")
	if out == "" {
		return
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(out, append(b, '\n'), 0o644))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func atoiEnv(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	return n
}

func intsEnv(t *testing.T, name, def string) []int {
	var out []int
	for _, f := range strings.FieldsFunc(envOr(name, def), func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		require.NoError(t, err, name)
		out = append(out, n)
	}
	return out
}

// checkDevice returns the first adapter's probed device that is hardware,
// or any working one under UMBRA_CHECK_SOFTWARE=1; it fails, naming every
// adapter it saw, when there is none.
func checkDevice(t *testing.T, rep *checkReport) *Device {
	software := os.Getenv("UMBRA_CHECK_SOFTWARE") == "1"
	as, err := Adapters("")
	require.NoError(t, err)
	var seen []string
	for _, a := range as {
		if a.Info.Software() && !software {
			seen = append(seen, fmt.Sprintf("%s (%s, software: refused)", a.Info.Name, a.Info.API))
			continue
		}
		dev, pr := a.Probe(context.Background(), 2*time.Minute)
		if dev == nil {
			seen = append(seen, fmt.Sprintf("%s (%s): probe failed: %s", a.Info.Name, a.Info.API, pr.Error))
			continue
		}
		rep.Adapter, rep.Limits, rep.ScanRate = a.Info, pr.Limits, dev.scanRate
		t.Logf("adapter %s (%s, %s, driver %s)", a.Info.Name, a.Info.API, a.Info.Type, a.Info.Driver)
		return dev
	}
	t.Fatalf("no usable adapter (software ones refused unless UMBRA_CHECK_SOFTWARE=1): %s", strings.Join(seen, "; "))
	return nil
}

// checkData is rows × dim values uniform in [-1, 1), filled in parallel
// from the seed.
func checkData(rows, dim int, seed uint64) []float32 {
	data := make([]float32, rows*dim)
	workers := runtime.GOMAXPROCS(0)
	per := (rows + workers - 1) / workers
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*per, min((w+1)*per, rows)
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)+1000))
			for i := lo * dim; i < hi*dim; i++ {
				data[i] = r.Float32()*2 - 1
			}
		}()
	}
	wg.Wait()
	return data
}

// checkF32 runs every k, batch and path over the slab and compares each
// query's answer with the fallback's.
func checkF32(t *testing.T, ctx context.Context, dev *Device, slab *packed.Slab, qs [][]float32, rep *checkReport) {
	g, err := dev.NewIndex(slab.Stride, core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	start := time.Now()
	require.NoError(t, g.Upload(ctx, slab, 0, nil, nil))
	rep.UploadMS = ms(time.Since(start))
	maxK := 0
	for _, k := range rep.Config.Ks {
		maxK = max(maxK, min(k, slab.Rows))
	}
	start = time.Now()
	view := fallback.Slab{Data: slab.Data, Rows: slab.Rows, Dim: slab.Dim, Stride: slab.Stride}
	want, err := fallback.SearchBatch(ctx, view, qs, maxK, fallback.Dot, 0)
	require.NoError(t, err)
	rep.CPUMS = ms(time.Since(start))
	for _, k := range rep.Config.Ks {
		k = min(k, slab.Rows)
		for _, nq := range rep.Config.Batches {
			type checkPath struct {
				name string
				ctx  context.Context
			}
			paths := []checkPath{{"auto", ctx}, {"radix", WithSelectPath(ctx, SelectRadix)}}
			if nq > 1 {
				// Both batch kernels, whichever the probe chose.
				paths = append(paths, checkPath{"tiles", WithBatchKernel(ctx, BatchTile)},
					checkPath{"gemm", WithBatchKernel(ctx, BatchGemm)})
			}
			for _, path := range paths {
				c := checkCase{K: k, NQ: nq, Path: path.name}
				pctx := path.ctx
				var st core.Stages
				start := time.Now()
				got, err := g.Search(pctx, qs[:nq], k, slab.Rows, nil, &st)
				c.MS, c.Took, c.Submissions = ms(time.Since(start)), st.Path, st.Submissions
				if err == nil {
					err = sameAsCPU(slab, qs[:nq], want, got, k)
				}
				c.Checked = nq
				c.OK = err == nil
				if err != nil {
					c.Error = err.Error()
				}
				t.Logf("f32 k=%d nq=%d %s (took %s): %.1f ms, %d submissions, ok=%v", k, nq, c.Path, c.Took, c.MS, c.Submissions, c.OK)
				rep.Cases = append(rep.Cases, c)
			}
		}
	}
}

// sameAsCPU compares each query's k best from the device with the first k
// of the fallback's answer.
func sameAsCPU(slab *packed.Slab, qs [][]float32, want [][]fallback.Hit, got [][]core.Hit, k int) error {
	if len(got) != len(qs) {
		return fmt.Errorf("%d answers for %d queries", len(got), len(qs))
	}
	for i, q := range qs {
		w := make([]testkit.Hit, min(k, len(want[i])))
		for j := range w {
			w[j] = testkit.Hit{ID: uint64(want[i][j].Row), Score: want[i][j].Score}
		}
		gh := make([]testkit.Hit, len(got[i]))
		for j, h := range got[i] {
			gh[j] = testkit.Hit{ID: uint64(h.Row), Score: h.Score}
		}
		ref := func(id uint64) (testkit.Ref, error) {
			if id >= uint64(slab.Rows) {
				return testkit.Ref{}, fmt.Errorf("row %d past the %d rows", id, slab.Rows)
			}
			return testkit.Score(testkit.Dot, id, slab.Row(int(id)), q), nil
		}
		if err := testkit.SameRanking(w, gh, ref); err != nil {
			return fmt.Errorf("query %d: %w", i, err)
		}
	}
	return nil
}

// checkSums compresses the slab, runs quant.wgsl's sums for each batch and
// compares a sample of them with the host's.
func checkSums(t *testing.T, ctx context.Context, dev *Device, slab *packed.Slab, qs [][]float32, rep *checkReport) {
	prec := core.F16
	if rep.Config.Precision == "int8" {
		prec = core.Int8
	}
	c, err := exact.NewCompressed(prec, slab.Dim)
	require.NoError(t, err)
	c.AppendSlab(fallback.Slab{Data: slab.Data, Rows: slab.Rows, Dim: slab.Dim, Stride: slab.Stride}, 0)
	words := c.WordsPerRow()
	g, err := dev.NewCompressedIndex(words, prec, core.Dot, 0)
	require.NoError(t, err)
	defer g.Release()
	cs := &packed.Slab{Dim: words, Stride: words, Rows: slab.Rows, Data: c.Words()}
	start := time.Now()
	require.NoError(t, g.Upload(ctx, cs, 0, nil, nil))
	rep.UploadMS = ms(time.Since(start))
	dq := make([][]float32, len(qs))
	for i, q := range qs {
		dq[i] = exact.DeviceQuery(c, q)
	}
	sample := sampleRows(slab.Rows, g.ChunkRows(), rep.Config.Sample)
	for _, nq := range rep.Config.Batches {
		cc := checkCase{NQ: nq, Path: "sums", Took: rep.Config.Precision}
		var st core.Stages
		start := time.Now()
		sums, scans, err := g.Sums(ctx, dq[:nq], slab.Rows, &st)
		cc.MS, cc.Submissions = ms(time.Since(start)), st.Submissions
		if err == nil {
			err = sumsAsHost(c, prec, dq[:nq], sums, slab.Rows, slab.Dim, sample)
		}
		cc.Checked = nq * len(sample)
		cc.OK = err == nil
		if err != nil {
			cc.Error = err.Error()
		}
		t.Logf("%s nq=%d: %.1f ms, %d submissions, %d sums checked, ok=%v", rep.Config.Precision, nq, cc.MS, cc.Submissions, cc.Checked, cc.OK)
		rep.Cases = append(rep.Cases, cc)
		if err != nil {
			continue
		}
		view := fallback.Slab{Data: slab.Data, Rows: slab.Rows, Dim: slab.Dim, Stride: slab.Stride}
		for _, k := range rep.Config.Ks {
			k = min(k, slab.Rows)
			rep.Cases = append(rep.Cases, checkSelect(t, ctx, g, c, view, qs[:nq], dq[:nq], sums, scans, k, rep.Config.Precision))
		}
	}
}

// checkSelect runs a compressed search's device-side candidate selection
// (qbounds.wgsl: the device bounds every row and returns only the
// candidates) for k, and compares every query's answer, IDs and score
// bits, with the one the host gives from every sum the device computed
// (sums): the device's float32 bounds must contain the host's however it
// rounds and flushes, or a row goes missing. Queries whose lists
// overflowed are counted, not checked (a search takes their sums).
func checkSelect(t *testing.T, ctx context.Context, g *Index, c *exact.Compressed, view fallback.Slab, qs, dq [][]float32, sums []float32, scans, k int, prec string) checkCase {
	cc := checkCase{K: k, NQ: len(qs), Path: "qselect", Took: prec}
	fail := func(err error) checkCase {
		cc.Error = err.Error()
		t.Logf("%s qselect k=%d nq=%d: %v", prec, k, len(qs), err)
		return cc
	}
	want, _, err := exact.ExactSearchSums(ctx, view, c, qs, exact.DeviceSums{Sums: sums, Rows: view.Rows}, scans, k, core.Dot, 0, false)
	if err != nil {
		return fail(err)
	}
	coefs, bounded, err := exact.DeviceBoundCoefs(view, c, qs, core.Dot)
	if err != nil {
		return fail(err)
	}
	var st core.Stages
	start := time.Now()
	cands, _, dscans, rowScans, err := g.SelectSums(ctx, QuantSelect{Queries: dq, Coefs: coefs, Rows: view.Rows, K: k, Cap: max(4*k, 1024),
		RowData: func(a, b int) []float32 { return exact.DeviceRowData(c, a, b) }}, &st)
	cc.MS, cc.Submissions = ms(time.Since(start)), st.Submissions
	if err != nil {
		return fail(err)
	}
	var good []int
	for j := range qs {
		if bounded[j] && cands[j] != nil {
			good = append(good, j)
		}
	}
	gq, gc := make([][]float32, len(good)), make([][]exact.DeviceCand, len(good))
	for i, j := range good {
		gq[i], gc[i] = qs[j], cands[j]
	}
	got, _, err := exact.ExactSearchCands(ctx, view, c, gq, exact.DeviceCands{Cands: gc, Rows: view.Rows}, dscans, rowScans, k, core.Dot, 0)
	if err != nil {
		return fail(err)
	}
	for i, j := range good {
		if len(got[i]) != len(want[j]) {
			return fail(fmt.Errorf("query %d: %d hits, every sum gives %d", j, len(got[i]), len(want[j])))
		}
		for r, h := range got[i] {
			if w := want[j][r]; h.Row != w.Row || math.Float32bits(h.Score) != math.Float32bits(w.Score) {
				return fail(fmt.Errorf("query %d rank %d: row %d score %v, every sum gives row %d score %v", j, r, h.Row, h.Score, w.Row, w.Score))
			}
		}
	}
	cc.Checked, cc.OK = len(good), true
	t.Logf("%s qselect k=%d nq=%d: %.1f ms, %d submissions, %d queries checked (%d overflowed their lists)",
		prec, k, len(qs), cc.MS, cc.Submissions, len(good), len(qs)-len(good))
	return cc
}

// sampleRows is up to n rows: every chunk's first and last, and the rest
// spread evenly.
func sampleRows(rows, chunk, n int) []int {
	seen := map[int]bool{}
	var out []int
	add := func(i int) {
		if i >= 0 && i < rows && !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	for c := 0; c < rows; c += chunk {
		add(c)
		add(min(c+chunk, rows) - 1)
	}
	step := max(rows/max(n-len(out), 1), 1)
	for i := 0; i < rows && len(out) < n; i += step {
		add(i)
	}
	return out
}

// sumsAsHost checks the device's sums of the sampled rows against the
// host's: int8 exactly, f16 within float32 rounding of the float64 sum.
func sumsAsHost(c *exact.Compressed, prec core.Precision, dq [][]float32, sums []float32, rows, dim int, sample []int) error {
	if len(sums) != len(dq)*rows {
		return fmt.Errorf("%d sums for %d queries × %d rows", len(sums), len(dq), rows)
	}
	words := c.WordsPerRow()
	codes := c.Words()
	errs := make([]error, len(dq))
	var wg sync.WaitGroup
	for j := range dq {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range sample {
				got := sums[j*rows+i]
				if prec == core.Int8 {
					var want int64
					for w := range words {
						qw, xw := math.Float32bits(dq[j][w]), math.Float32bits(codes[i*words+w])
						for b := range 4 {
							want += int64(int8(qw>>(8*b))) * int64(int(uint8(xw>>(8*b)))-128)
						}
					}
					if g := int64(int32(math.Float32bits(got))); g != want {
						errs[j] = fmt.Errorf("query %d row %d: int8 sum %d, host %d", j, i, g, want)
						return
					}
					continue
				}
				var want, mag float64
				for k := range dim {
					x := half(c.F16[i*c.Stride+k])
					want += float64(dq[j][k]) * x
					mag += math.Abs(float64(dq[j][k]) * x)
				}
				if d := math.Abs(want - float64(got)); d > mag*float64(c.Stride+1)*0x1p-24+1e-30 {
					errs[j] = fmt.Errorf("query %d row %d: f16 sum %v, host %v", j, i, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
