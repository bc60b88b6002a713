//go:build cgo && !nogpu

package gpu

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/internal/topk"
)

// qfix is a compressed index on the device beside its float32 slab and
// compressed copy, for comparing the device-selection path with the CPU's
// and with today's full-sums path.
type qfix struct {
	g    *Index
	s    fallback.Slab
	c    *exact.Compressed
	m    core.Metric
	dev  int // rows resident on the device
	rows [][]float32
}

func newQfix(t *testing.T, d *Device, prec core.Precision, m core.Metric, rows [][]float32, dev, chunk int) *qfix {
	t.Helper()
	dim := len(rows[0])
	c, err := exact.NewCompressed(prec, dim)
	require.NoError(t, err)
	c.Append(rows)
	flat := make([]float32, 0, len(rows)*dim)
	for _, r := range rows {
		flat = append(flat, r...)
	}
	words := c.WordsPerRow()
	g, err := d.NewCompressedIndex(words, prec, m, chunk)
	require.NoError(t, err)
	t.Cleanup(g.Release)
	f := &qfix{g: g, c: c, m: m, dev: dev, rows: rows,
		s: fallback.Slab{Data: flat, Rows: len(rows), Dim: dim, Stride: dim}}
	f.upload(t, 0)
	return f
}

func (f *qfix) upload(t *testing.T, from int) {
	words := f.c.WordsPerRow()
	slab := &packed.Slab{Dim: words, Stride: words, Rows: f.dev, Data: f.c.Words()[:f.dev*words]}
	require.NoError(t, f.g.Upload(context.Background(), slab, from, nil, nil))
}

// sums is today's path: every sum read back, bounded on the host.
func (f *qfix) sums(t *testing.T, qs [][]float32, k int) [][]core.Hit {
	dq := make([][]float32, len(qs))
	for j, q := range qs {
		dq[j] = exact.DeviceQuery(f.c, q)
	}
	sums, scans, err := f.g.Sums(context.Background(), dq, f.dev, nil)
	require.NoError(t, err)
	out, _, err := exact.ExactSearchSums(context.Background(), f.s, f.c, qs, exact.DeviceSums{Sums: sums, Rows: f.dev}, scans, k, f.m, 2, false)
	require.NoError(t, err)
	return out
}

// selected is the device-selection path: candidates selected on the
// device, a query that overflowed capacity (or whose norm the device does
// not take) by today's path. It returns how many queries overflowed.
func (f *qfix) selected(qs [][]float32, k, capacity int) ([][]core.Hit, int, error) {
	ctx := context.Background()
	dq := make([][]float32, len(qs))
	for j, q := range qs {
		dq[j] = exact.DeviceQuery(f.c, q)
	}
	coefs, ok, err := exact.DeviceBoundCoefs(f.s, f.c, qs, f.m)
	if err != nil {
		return nil, 0, err
	}
	cands, _, scans, rowScans, err := f.g.SelectSums(ctx, QuantSelect{Queries: dq, Coefs: coefs, Rows: f.dev, K: k, Cap: capacity,
		Mask: f.s.Allow, RowData: func(a, b int) []float32 { return exact.DeviceRowData(f.c, a, b) }}, nil)
	if err != nil {
		return nil, 0, err
	}
	var good, bad []int
	for j := range qs {
		if ok[j] && cands[j] != nil {
			good = append(good, j)
		} else {
			bad = append(bad, j)
		}
	}
	out := make([][]core.Hit, len(qs))
	if len(good) > 0 {
		gq, gc := make([][]float32, len(good)), make([][]exact.DeviceCand, len(good))
		for i, j := range good {
			gq[i], gc[i] = qs[j], cands[j]
		}
		res, _, err := exact.ExactSearchCands(ctx, f.s, f.c, gq, exact.DeviceCands{Cands: gc, Rows: f.dev}, scans, rowScans, k, f.m, 2)
		if err != nil {
			return nil, 0, err
		}
		for i, j := range good {
			out[j] = res[i]
		}
	}
	if len(bad) > 0 {
		bq, bd := make([][]float32, len(bad)), make([][]float32, len(bad))
		for i, j := range bad {
			bq[i], bd[i] = qs[j], dq[j]
		}
		sums, scans, err := f.g.Sums(ctx, bd, f.dev, nil)
		if err != nil {
			return nil, 0, err
		}
		res, _, err := exact.ExactSearchSums(ctx, f.s, f.c, bq, exact.DeviceSums{Sums: sums, Rows: f.dev}, scans, k, f.m, 2, false)
		if err != nil {
			return nil, 0, err
		}
		for i, j := range bad {
			out[j] = res[i]
		}
	}
	return out, len(bad), nil
}

func (f *qfix) cpu(t *testing.T, qs [][]float32, k int) [][]core.Hit {
	out, _, err := exact.ExactSearchBatch(context.Background(), f.s, f.c, qs, k, f.m, 2, false)
	require.NoError(t, err)
	return out
}

// sameAnswer requires identical hits: rows, scores (bits) and order.
func sameAnswer(t *testing.T, got, want [][]core.Hit, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for j := range want {
		require.Equal(t, len(want[j]), len(got[j]), "%s: query %d", what, j)
		for i := range want[j] {
			require.Equal(t, want[j][i].Row, got[j][i].Row, "%s: query %d hit %d", what, j, i)
			require.Equal(t, math.Float32bits(want[j][i].Score), math.Float32bits(got[j][i].Score), "%s: query %d hit %d", what, j, i)
		}
	}
}

// qdata returns n rows of dim by kind: "normal"; "dups", eight distinct
// rows repeated (ties everywhere, tight bounds); "tiny", values in the
// float32 subnormal range and just above it; "huge", most rows normal,
// some near 2^50.
func qdata(r *rand.Rand, kind string, n, dim int, unit bool) [][]float32 {
	rows := testkit.Vectors(r, n, dim)
	switch kind {
	case "dups":
		base := testkit.Vectors(r, 8, dim)
		for i := range rows {
			rows[i] = slices.Clone(base[r.IntN(len(base))])
		}
	case "tiny":
		// Products of these with a normal query are near or below the
		// smallest normal float32 (2^-126): the device may flush them.
		for i := range rows {
			s := math.Ldexp(1, -(55 + r.IntN(80)))
			for j := range rows[i] {
				rows[i][j] = float32(float64(rows[i][j]) * s)
			}
		}
	case "huge":
		for i := range rows {
			if r.IntN(20) != 0 {
				continue
			}
			s := math.Ldexp(1, 45+r.IntN(6))
			for j := range rows[i] {
				rows[i][j] = float32(float64(rows[i][j]) * s)
			}
		}
	}
	if unit {
		for _, v := range rows {
			normalize(v)
		}
	}
	return rows
}

func normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := 1 / math.Sqrt(s)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
}

// TestSelectSums runs the device-selection path against the CPU's
// compressed search and today's full-sums path: every metric, both
// precisions, small chunks, masks, rows past the device's, k small and
// large, and data that makes the bounds tight (duplicates), tiny
// (subnormal range) or huge (near 2^50, some rows past the bound's
// overflow limit), with a capacity small enough that some queries
// overflow and fall back.
func TestSelectSums(t *testing.T) {
	d := backendDevice(t, "vulkan")
	r := testkit.Rand(t)
	kinds := []string{"normal", "dups", "tiny", "huge"}
	for _, prec := range []core.Precision{core.F16, core.Int8} {
		for _, m := range []core.Metric{core.Dot, core.Cosine, core.L2} {
			for _, kind := range kinds {
				name := fmt.Sprintf("%v/%v/%s", prec, m, kind)
				t.Run(name, func(t *testing.T) {
					dim := []int{7, 24, 130}[r.IntN(3)]
					n := 700 + r.IntN(900)
					rows := qdata(r, kind, n, dim, m == core.Cosine)
					dev := n - r.IntN(100) // some rows past the device's
					f := newQfix(t, d, prec, m, rows, dev, 256)
					qs := qdata(r, "normal", 9, dim, m == core.Cosine)
					if kind == "huge" {
						for _, q := range qs[:3] {
							for i := range q {
								q[i] *= 0x1p50 // ‖q‖·‖x‖ past 2^100 for the huge rows
							}
						}
					}
					if kind == "tiny" {
						for _, q := range qs[:3] {
							for i := range q {
								q[i] *= 0x1p-100
							}
						}
					}
					if r.IntN(2) == 0 {
						mask := make([]uint64, (n+63)/64)
						for i := range n {
							if r.IntN(3) != 0 {
								mask[i/64] |= 1 << (i % 64)
							}
						}
						f.s.Allow = mask
					}
					for _, k := range []int{1, 10, 100} {
						for _, capacity := range []int{max(4*k, 256), 2 * k} {
							what := fmt.Sprintf("k %d capacity %d", k, capacity)
							got, _, err := f.selected(qs, k, capacity)
							require.NoError(t, err, what)
							sameAnswer(t, got, f.cpu(t, qs, k), what+" vs the CPU")
							sameAnswer(t, got, f.sums(t, qs, k), what+" vs the full sums")
						}
					}
				})
			}
		}
	}
}

// TestSelectSumsOverflow forces a capacity below the candidates (duplicate
// rows make thousands tie): every query must overflow, fall back, and be
// exact; and a single query takes the single-query layout.
func TestSelectSumsOverflow(t *testing.T) {
	d := backendDevice(t, "vulkan")
	r := testkit.Rand(t)
	for _, prec := range []core.Precision{core.F16, core.Int8} {
		rows := qdata(r, "dups", 2000, 16, false)
		f := newQfix(t, d, prec, core.L2, rows, len(rows), 512)
		qs := qdata(r, "normal", 5, 16, false)
		got, over, err := f.selected(qs, 3, 3)
		require.NoError(t, err)
		require.Equal(t, len(qs), over, "every query has more than 3 candidates")
		sameAnswer(t, got, f.cpu(t, qs, 3), "overflowed")
		got, _, err = f.selected(qs[:1], 3, 1024)
		require.NoError(t, err)
		sameAnswer(t, got, f.cpu(t, qs[:1], 3), "one query")
	}
}

// TestSelectSumsRowData checks that the resident bound data follows the
// codes: rows appended after a search, rows rewritten and truncated.
func TestSelectSumsRowData(t *testing.T) {
	d := backendDevice(t, "vulkan")
	r := testkit.Rand(t)
	m := core.Dot
	rows := qdata(r, "normal", 1500, 12, false)
	f := newQfix(t, d, core.Int8, m, rows, 1000, 300)
	qs := qdata(r, "normal", 4, 12, false)
	check := func(what string) {
		got, _, err := f.selected(qs, 5, 64)
		require.NoError(t, err, what)
		sameAnswer(t, got, f.cpu(t, qs, 5), what)
	}
	check("first")
	f.dev = 1500
	f.upload(t, 1000)
	check("appended")
	// Replace rows (host copies and codes), rewrite them on the device.
	re := []int{3, 700, 1200}
	for _, i := range re {
		v := slices.Clone(qs[0])
		for j := range v {
			v[j] *= 3
		}
		copy(f.s.Data[i*12:], v)
		f.c.Set(i, v)
	}
	words := f.c.WordsPerRow()
	slab := &packed.Slab{Dim: words, Stride: words, Rows: f.dev, Data: f.c.Words()}
	require.NoError(t, f.g.Rewrite(context.Background(), slab, re))
	check("rewritten")
	f.g.Truncate(800)
	f.dev = 800
	check("truncated")
}

// TestSelectSumsFaults fails every step SelectSums takes, once each: the
// call must fail (never return a wrong answer), and the next one, with no
// fault, must be exact.
func TestSelectSumsFaults(t *testing.T) {
	d := backendDevice(t, "vulkan")
	r := testkit.Rand(t)
	rows := qdata(r, "normal", 900, 20, false)
	qs := qdata(r, "normal", 6, 20, false)
	for _, prec := range []core.Precision{core.F16, core.Int8} {
		f := newQfix(t, d, prec, core.L2, rows, 900, 256)
		want := f.cpu(t, qs, 7)
		// Record the steps a search takes, from a fresh index.
		var steps []string
		f.g.SetFault(func(s string) error { steps = append(steps, s); return nil })
		_, _, err := f.selected(qs, 7, 64)
		require.NoError(t, err)
		f.g.SetFault(nil)
		require.Contains(t, steps, "compile qbounds")
		require.Contains(t, steps, "write qselect rows")
		seen := map[string]bool{}
		boom := errors.New("injected")
		for _, step := range steps {
			if seen[step] {
				continue
			}
			seen[step] = true
			g := newQfix(t, d, prec, core.L2, rows, 900, 256)
			g.g.SetFault(func(s string) error {
				if s == step {
					return boom
				}
				return nil
			})
			got, _, err := g.selected(qs, 7, 64)
			g.g.SetFault(nil)
			if err == nil {
				sameAnswer(t, got, want, "despite a fault at "+step)
			} else {
				require.ErrorIs(t, err, ErrFailed, step)
			}
			got, _, err = g.selected(qs, 7, 64)
			require.NoError(t, err, "after a fault at %s", step)
			sameAnswer(t, got, want, "after a fault at "+step)
			// and on the same index, a fault at that step mid-life
			g.g.SetFault(func(s string) error {
				if s == step {
					return boom
				}
				return nil
			})
			_, _, _ = g.selected(qs[:2], 7, 64)
			g.g.SetFault(nil)
			got, _, err = g.selected(qs, 7, 64)
			require.NoError(t, err, "after a second fault at %s", step)
			sameAnswer(t, got, want, "after a second fault at "+step)
		}
	}
}

// slabOf is codes as the rows Upload takes: words float32 words a row.
func slabOf(codes []float32, words, rows int) *packed.Slab {
	return &packed.Slab{Dim: words, Stride: words, Rows: rows, Data: codes[:rows*words]}
}

// selectedRange is a range search on the device's candidates; ok false:
// the list overflowed (the caller would read the sums back).
func (f *qfix) selectedRange(q []float32, threshold float32, capacity int) ([]core.Hit, bool, error) {
	ctx := context.Background()
	dq := [][]float32{exact.DeviceQuery(f.c, q)}
	coefs, ok, err := exact.DeviceBoundCoefs(f.s, f.c, [][]float32{q}, f.m)
	if err != nil || !ok[0] {
		return nil, false, err
	}
	cands, _, scans, rowScans, err := f.g.SelectSums(ctx, QuantSelect{Queries: dq, Coefs: coefs, Rows: f.dev, Cap: capacity, Mask: f.s.Allow,
		Range: true, Limit: topk.Key(f.m, threshold), RowData: func(a, b int) []float32 { return exact.DeviceRowData(f.c, a, b) }}, nil)
	if err != nil || cands[0] == nil {
		return nil, false, err
	}
	hits, _, err := exact.ExactRangeCands(ctx, f.s, f.c, q, cands[0], f.dev, scans, rowScans, threshold, f.m, 2)
	return hits, true, err
}

// TestSelectSumsRange: a range search on the device's candidates answers
// as the CPU's and the full-sums path's, at thresholds from the best
// score to past the worst, with and without a mask and rows past the
// device's; a list too small overflows rather than cut the answer.
func TestSelectSumsRange(t *testing.T) {
	d := backendDevice(t, "vulkan")
	r := testkit.Rand(t)
	ctx := context.Background()
	for _, prec := range []core.Precision{core.F16, core.Int8} {
		for _, m := range []core.Metric{core.Dot, core.Cosine, core.L2} {
			for _, kind := range []string{"normal", "dups", "huge"} {
				rows := qdata(r, kind, 1200, 19, m == core.Cosine)
				f := newQfix(t, d, prec, m, rows, 1100, 256)
				if r.IntN(2) == 0 {
					f.s.Allow = make([]uint64, (1200+63)/64)
					for i := range 1200 {
						if r.IntN(4) != 0 {
							f.s.Allow[i/64] |= 1 << (i % 64)
						}
					}
				}
				used := 0
				for _, q := range qdata(r, "normal", 3, 19, m == core.Cosine) {
					all, _, err := exact.ExactSearchBatch(ctx, f.s, f.c, [][]float32{q}, 1200, m, 2, false)
					require.NoError(t, err)
					for _, at := range []int{0, 5, 60, len(all[0]) - 1} {
						th := all[0][min(at, len(all[0])-1)].Score
						what := fmt.Sprintf("%v %v %s threshold %g", prec, m, kind, th)
						want, _, err := exact.ExactRange(ctx, f.s, f.c, q, th, m, 2)
						require.NoError(t, err)
						got, ok, err := f.selectedRange(q, th, 256)
						require.NoError(t, err, what)
						if !ok {
							require.Greater(t, len(want), 0, "%s: overflowed", what)
							continue
						}
						used++
						require.Len(t, got, len(want), what)
						for i := range want {
							require.Equal(t, want[i].Row, got[i].Row, what)
							require.Equal(t, math.Float32bits(want[i].Score), math.Float32bits(got[i].Score), what)
						}
					}
				}
				if kind == "normal" {
					require.Greater(t, used, 0, "some range searches were answered from the device's lists")
				}
				// A list of 2 overflows for a threshold that takes many rows.
				q := qdata(r, "normal", 1, 19, m == core.Cosine)[0]
				all, _, err := exact.ExactSearchBatch(ctx, f.s, f.c, [][]float32{q}, 1200, m, 2, false)
				require.NoError(t, err)
				_, ok, err := f.selectedRange(q, all[0][len(all[0])/2].Score, 2)
				require.NoError(t, err)
				require.False(t, ok, "half the rows in a list of 2")
			}
		}
	}
}

// TestSelectSumsRangeFaults fails every step of a range selection once:
// an error or the exact answer, and the next call exact.
func TestSelectSumsRangeFaults(t *testing.T) {
	d := backendDevice(t, "vulkan")
	r := testkit.Rand(t)
	ctx := context.Background()
	rows := qdata(r, "normal", 900, 20, false)
	q := qdata(r, "normal", 1, 20, false)[0]
	for _, prec := range []core.Precision{core.F16, core.Int8} {
		f := newQfix(t, d, prec, core.Dot, rows, 900, 256)
		all, _, err := exact.ExactSearchBatch(ctx, f.s, f.c, [][]float32{q}, 20, core.Dot, 2, false)
		require.NoError(t, err)
		th := all[0][19].Score
		want, _, err := exact.ExactRange(ctx, f.s, f.c, q, th, core.Dot, 2)
		require.NoError(t, err)
		var steps []string
		f.g.SetFault(func(s string) error { steps = append(steps, s); return nil })
		_, ok, err := f.selectedRange(q, th, 64)
		require.NoError(t, err)
		require.True(t, ok)
		f.g.SetFault(nil)
		require.Contains(t, steps, "write qselect range")
		same := func(got []core.Hit, what string) {
			require.Len(t, got, len(want), what)
			for i := range want {
				require.Equal(t, want[i].Row, got[i].Row, what)
				require.Equal(t, math.Float32bits(want[i].Score), math.Float32bits(got[i].Score), what)
			}
		}
		seen := map[string]bool{}
		for _, step := range steps {
			if seen[step] {
				continue
			}
			seen[step] = true
			g := newQfix(t, d, prec, core.Dot, rows, 900, 256)
			g.g.SetFault(func(s string) error {
				if s == step {
					return errors.New("injected")
				}
				return nil
			})
			got, ok, err := g.selectedRange(q, th, 64)
			g.g.SetFault(nil)
			if err == nil {
				require.True(t, ok, step)
				same(got, "despite a fault at "+step)
			} else {
				require.ErrorIs(t, err, ErrFailed, step)
			}
			got, ok, err = g.selectedRange(q, th, 64)
			require.NoError(t, err, "after a fault at %s", step)
			require.True(t, ok, step)
			same(got, "after a fault at "+step)
		}
	}
}

// deviceLo reads back the lower bounds (lo', float32) the last SelectSums
// submission of g wrote, queries × rows.
func deviceLo(t *testing.T, g *Index, n int) []float32 {
	t.Helper()
	raw := readBuffer(t, g, g.qsel.keys.buf, uint64(n)*4)
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// TestSelectSumsLowerBounds reads the lower bounds the adapter itself
// computed (qbounds.wgsl's lo', this device's rounding, sqrt and
// flushing) and requires each to be at most the host's lo for the same
// sum; and a row the host leaves unbounded unbounded on the device too.
// (Upper bounds stay on the device; the answers' equality in
// TestSelectSums and the emulation in internal/exact cover them.)
func TestSelectSumsLowerBounds(t *testing.T) {
	d := backendDevice(t, "vulkan")
	r := testkit.Rand(t)
	ctx := context.Background()
	for _, prec := range []core.Precision{core.F16, core.Int8} {
		for _, m := range []core.Metric{core.Dot, core.Cosine, core.L2} {
			for _, kind := range []string{"normal", "dups", "tiny", "huge"} {
				dim := 5 + r.IntN(60)
				rows := qdata(r, kind, 800, dim, m == core.Cosine)
				f := newQfix(t, d, prec, m, rows, 800, 0)
				qs := qdata(r, "normal", 6, dim, m == core.Cosine)
				for j, q := range qs {
					sc := []float32{1, 0x1p-30, 0x1p-60, 0x1p20, 0x1p45, 0x1p-100}[j]
					for i := range q {
						q[i] *= sc
					}
				}
				dq := make([][]float32, len(qs))
				for j, q := range qs {
					dq[j] = exact.DeviceQuery(f.c, q)
				}
				coefs, ok, err := exact.DeviceBoundCoefs(f.s, f.c, qs, m)
				require.NoError(t, err)
				_, _, _, _, err = f.g.SelectSums(ctx, QuantSelect{Queries: dq, Coefs: coefs, Rows: 800, K: 5, Cap: 64,
					RowData: func(a, b int) []float32 { return exact.DeviceRowData(f.c, a, b) }}, nil)
				require.NoError(t, err)
				got := deviceLo(t, f.g, len(qs)*800)
				sums, _, err := f.g.Sums(ctx, dq, 800, nil)
				require.NoError(t, err)
				lo, _, err := exact.DeviceKeyBounds(f.s, f.c, qs, exact.DeviceSums{Sums: sums, Rows: 800}, m)
				require.NoError(t, err)
				for j := range qs {
					if !ok[j] {
						continue
					}
					for i := range 800 {
						dl := got[j*800+i]
						what := fmt.Sprintf("%v %v %s query %d row %d: host lo %g, device %g", prec, m, kind, j, i, lo[j][i], dl)
						if math.IsInf(float64(lo[j][i]), -1) {
							require.True(t, math.IsInf(float64(dl), -1), what)
							continue
						}
						require.True(t, dl <= lo[j][i], what)
					}
				}
			}
		}
	}
}

// TestSelectSumsUpperBounds checks the adapter's upper bounds through the
// range selection: with the limit set to the host's hi of a row, that row
// (and every row whose host hi reaches the limit) must be a candidate, so
// the device's hi' is at least the host's hi. Each query tests the rows
// of the eight largest host upper bounds and eight more at random.
func TestSelectSumsUpperBounds(t *testing.T) {
	d := backendDevice(t, "vulkan")
	r := testkit.Rand(t)
	ctx := context.Background()
	const n = 600
	for _, prec := range []core.Precision{core.F16, core.Int8} {
		for _, m := range []core.Metric{core.Dot, core.L2} {
			for _, kind := range []string{"normal", "dups", "tiny", "huge"} {
				dim := 5 + r.IntN(60)
				rows := qdata(r, kind, n, dim, false)
				f := newQfix(t, d, prec, m, rows, n, 0)
				qs := qdata(r, "normal", 3, dim, false)
				for j, q := range qs {
					sc := []float32{1, 0x1p-60, 0x1p40}[j]
					for i := range q {
						q[i] *= sc
					}
				}
				dq := make([][]float32, len(qs))
				for j, q := range qs {
					dq[j] = exact.DeviceQuery(f.c, q)
				}
				sums, _, err := f.g.Sums(ctx, dq, n, nil)
				require.NoError(t, err)
				_, hi, err := exact.DeviceKeyBounds(f.s, f.c, qs, exact.DeviceSums{Sums: sums, Rows: n}, m)
				require.NoError(t, err)
				coefs, ok, err := exact.DeviceBoundCoefs(f.s, f.c, qs, m)
				require.NoError(t, err)
				for j := range qs {
					if !ok[j] {
						continue
					}
					order := make([]int, n)
					for i := range order {
						order[i] = i
					}
					slices.SortFunc(order, func(a, b int) int { return -cmpF(hi[j][a], hi[j][b]) })
					test := append(slices.Clone(order[:8]), r.Perm(n)[:8]...)
					for _, i := range test {
						limit := hi[j][i]
						if math.IsInf(float64(limit), 0) || math.IsNaN(float64(limit)) {
							continue
						}
						cands, _, _, _, err := f.g.SelectSums(ctx, QuantSelect{Queries: dq[j : j+1], Coefs: coefs[j : j+1], Rows: n, Cap: n,
							Range: true, Limit: limit, RowData: func(a, b int) []float32 { return exact.DeviceRowData(f.c, a, b) }}, nil)
						require.NoError(t, err)
						in := map[uint32]bool{}
						for _, c := range cands[0] {
							in[c.Row] = true
						}
						for x := range n {
							if hi[j][x] >= limit {
								require.True(t, in[uint32(x)], "%v %v %s query %d: row %d (host hi %g) missing at limit %g", prec, m, kind, j, x, hi[j][x], limit)
							}
						}
					}
				}
			}
		}
	}
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// A downlevel adapter with fewer storage bindings a stage than
// qbounds.wgsl needs, or a request whose lists could not fit a binding,
// is refused with ErrSelectUnfit (the caller reads the sums back), not
// failed as a device error; so are malformed requests, with ErrFailed.
func TestSelectSumsUnfit(t *testing.T) {
	d := backendDevice(t, "vulkan")
	r := testkit.Rand(t)
	rows := qdata(r, "normal", 300, 8, false)
	f := newQfix(t, d, core.Int8, core.Dot, rows, 300, 0)
	qs := qdata(r, "normal", 2, 8, false)
	got, _, err := f.selected(qs, 3, 16)
	require.NoError(t, err)
	sameAnswer(t, got, f.cpu(t, qs, 3), "before")
	dq := [][]float32{exact.DeviceQuery(f.c, qs[0])}
	coefs, _, err := exact.DeviceBoundCoefs(f.s, f.c, qs[:1], core.Dot)
	require.NoError(t, err)
	rowData := func(a, b int) []float32 { return exact.DeviceRowData(f.c, a, b) }
	req := QuantSelect{Queries: dq, Coefs: coefs, Rows: 300, K: 3, Cap: 16, RowData: rowData}
	keep := d.lim.MaxStorageBuffers
	d.lim.MaxStorageBuffers = 4
	_, _, _, _, err = f.g.SelectSums(context.Background(), req, nil)
	d.lim.MaxStorageBuffers = keep
	require.ErrorIs(t, err, ErrSelectUnfit)
	huge := req
	huge.Cap = int(f.g.bind / 8)
	_, _, _, _, err = f.g.SelectSums(context.Background(), huge, nil)
	require.ErrorIs(t, err, ErrSelectUnfit)
	for _, bad := range []QuantSelect{
		{Queries: dq, Coefs: coefs, Rows: 300, K: 0, Cap: 16, RowData: rowData},                    // k 0
		{Queries: dq, Coefs: coefs, Rows: 300, K: 20, Cap: 16, RowData: rowData},                   // capacity below k
		{Queries: dq, Coefs: nil, Rows: 300, K: 3, Cap: 16, RowData: rowData},                      // no coefficients
		{Queries: dq, Coefs: coefs, Rows: 300, K: 3, Cap: 16},                                      // no row data
		{Queries: dq, Coefs: coefs, Rows: 300, K: 3, Cap: 16, RowData: rowData, Mask: []uint64{1}}, // short mask
		{Queries: [][]float32{{1}}, Coefs: coefs, Rows: 300, K: 3, Cap: 16, RowData: rowData},      // short query
	} {
		_, _, _, _, err = f.g.SelectSums(context.Background(), bad, nil)
		require.ErrorIs(t, err, ErrFailed)
	}
	got, _, err = f.selected(qs, 3, 16)
	require.NoError(t, err)
	sameAnswer(t, got, f.cpu(t, qs, 3), "after")
	// Row data of the wrong length, asked of a fresh index.
	g := newQfix(t, d, core.Int8, core.Dot, rows, 300, 0)
	short := req
	short.RowData = func(a, b int) []float32 { return nil }
	_, _, _, _, err = g.g.SelectSums(context.Background(), short, nil)
	require.ErrorIs(t, err, ErrFailed)
}
