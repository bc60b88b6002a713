package engine

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/topk"
)

// Gather or scan. A filter (Where, Allow, AllowFunc, and the rows deleted)
// becomes a bitmap of the rows it admits before any row is read, and its
// popcount is the admitted count. A scan reads every row and lets the
// bitmap decide which may enter the top k; a gather lists the admitted rows
// and reads and scores only them, with the same kernels (the same float32
// bits) and the same selection and tie rule, so both give the same answer.
// Which is faster depends on how many rows are admitted, how long a row is
// and the machine, so it is measured: once per process and precision, a
// scan and a gather of a scattered sixteenth of the rows are timed on the
// calibration slab at two row lengths, which gives each path a cost per
// row and per byte of row (gatherCosts); a search gathers when its admitted
// rows cost less that way than the scan of every row, and are at most a
// quarter of them (gatherMaxShare).

// gatherCosts are the measured costs, in nanoseconds, of one query's scan
// (per row of the index) and gather (per admitted row): a fixed cost a row
// plus a cost a byte of row.
type gatherCosts struct {
	ScanRow, ScanByte     float64
	GatherRow, GatherByte float64
}

// pays reports whether gathering admitted of rows rows, each rowBytes
// long, costs nq queries less than scanning them all. A batch's scan
// reads the rows once per block of queries and is then bound by its
// arithmetic (perQuery bytes a second, 0 when unknown); each query of a
// gather is priced as if its rows came from memory again.
func (c gatherCosts) pays(admitted, rows int, rowBytes float64, nq int, perQuery float64) bool {
	if admitted >= rows {
		return false // nothing to skip
	}
	if admitted > rows/gatherMaxShare {
		return false // priced in cache, read from memory: gatherMaxShare
	}
	scan := float64(rows) * (c.ScanRow + c.ScanByte*rowBytes)
	if nq > 1 && perQuery > 0 {
		scan += float64(nq-1) * float64(rows) * rowBytes / perQuery * 1e9
	} else {
		scan *= float64(nq)
	}
	gather := float64(nq) * float64(admitted) * (c.GatherRow + c.GatherByte*rowBytes)
	return gather < scan
}

// gatherMaxShare bounds the CPU's gather to a quarter of the rows, whatever
// the calibrated costs say. The calibration gathers from a 32 MiB slab the
// caches partly hold, while an index far past the cache gathers its
// scattered rows from memory, at several times the calibrated cost a row:
// on this project's Zen 5 test machine, at 1,000,000 × 128, a gather of
// half the rows took 1.45× the unfiltered scan though the costs priced it
// under half the scan, while a gather of a quarter was still 1.4× faster
// than the scan, and of a tenth 3–4× at 96, 128 and 768 components
// (docs/memory.md).
const gatherMaxShare = 4

// The two row lengths the costs are measured at (float32 components), on
// gpu.CalibrationSlab's data viewed as rows of each.
const (
	gatherShortRow = 64
	gatherLongRow  = 1024
)

// measureGather fits gatherCosts from timings of one query: scan(dim,
// rows) times a scan of the first rows rows of the calibration data viewed
// as rows of dim components, gather(dim, list) a gather of the listed
// rows. Each path is timed at two sizes, and its cost a row is the slope
// between them, so what a search costs whatever its size (preparing the
// query, a compressed index's rescore) counts for neither. rowBytes gives
// the bytes a row of dim components costs the path.
func measureGather(total int, rowBytes func(dim int) float64,
	scan func(dim, rows int) (time.Duration, error),
	gather func(dim int, list []uint32) (time.Duration, error)) (gatherCosts, error) {
	var scanAt, gatherAt [2]float64
	for i, dim := range []int{gatherShortRow, gatherLongRow} {
		rows := total / dim
		big, err := scan(dim, rows)
		if err != nil {
			return gatherCosts{}, err
		}
		small, err := scan(dim, rows/4)
		if err != nil {
			return gatherCosts{}, err
		}
		scanAt[i] = float64((big - small).Nanoseconds()) / float64(rows-rows/4)
		many, few := gatherSample(rows, 8), gatherSample(rows, 32)
		big, err = gather(dim, many)
		if err != nil {
			return gatherCosts{}, err
		}
		small, err = gather(dim, few)
		if err != nil {
			return gatherCosts{}, err
		}
		gatherAt[i] = float64((big - small).Nanoseconds()) / float64(max(1, len(many)-len(few)))
	}
	b0, b1 := rowBytes(gatherShortRow), rowBytes(gatherLongRow)
	line := func(c [2]float64) (perRow, perByte float64) {
		perByte = max(0, (c[1]-c[0])/(b1-b0))
		return max(0, c[0]-perByte*b0), perByte
	}
	var g gatherCosts
	g.ScanRow, g.ScanByte = line(scanAt)
	g.GatherRow, g.GatherByte = line(gatherAt)
	if g.ScanRow+g.ScanByte <= 0 || g.GatherRow+g.GatherByte <= 0 {
		return g, fmt.Errorf("gather calibration: no cost measured (scan %v, gather %v ns a row)", scanAt, gatherAt)
	}
	return g, nil
}

// gatherSample lists a scattered one in every rows rows, in order.
func gatherSample(rows, every int) []uint32 {
	list := make([]uint32, 0, rows/every+1)
	x := uint32(2463534242)
	for r := 0; r < rows; r++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		if x%uint32(every) == 0 {
			list = append(list, uint32(r))
		}
	}
	return list
}

// gatherCostsF32 is the float32 costs, measured once per process on the
// whole calibration slab (32 MiB).
var gatherCostsF32 = sync.OnceValues(func() (gatherCosts, error) {
	data := gpu.CalibrationSlab().Data
	ctx := context.Background()
	view := func(dim, rows int) fallback.Slab {
		return fallback.Slab{Data: data[:rows*dim], Rows: rows, Dim: dim, Stride: dim}
	}
	return measureGather(len(data), func(dim int) float64 { return float64(4 * dim) },
		func(dim, rows int) (time.Duration, error) {
			return gpu.MedianOf(5, func() error {
				_, err := fallback.Search(ctx, view(dim, rows), data[:dim], 10, fallback.Dot, 0)
				return err
			})
		},
		func(dim int, list []uint32) (time.Duration, error) {
			s := view(dim, len(data)/dim)
			return gpu.MedianOf(5, func() error {
				_, err := fallback.SearchRows(ctx, s, list, data[:dim], 10, fallback.Dot, 0)
				return err
			})
		})
})

// gatherCostsQuant measures a compressed precision's costs once per
// process, on a compressed copy of a quarter of the calibration slab
// (8 MiB of float32 rows; compressing all of it would cost more than the
// measurement), the exact search over the codes against its gather.
func gatherCostsQuant(p core.Precision) func() (gatherCosts, error) {
	return sync.OnceValues(func() (gatherCosts, error) {
		data := gpu.CalibrationSlab().Data
		data = data[:len(data)/4]
		ctx := context.Background()
		type compressed struct {
			s fallback.Slab
			c *exact.Compressed
		}
		byDim := map[int]compressed{}
		get := func(dim int) (compressed, error) {
			if c, ok := byDim[dim]; ok {
				return c, nil
			}
			s := fallback.Slab{Data: data, Rows: len(data) / dim, Dim: dim, Stride: dim}
			c, err := exact.NewCompressed(p, dim)
			if err != nil {
				return compressed{}, err
			}
			c.AppendSlab(s, 0)
			byDim[dim] = compressed{s, c}
			return byDim[dim], nil
		}
		for _, dim := range []int{gatherShortRow, gatherLongRow} {
			if _, err := get(dim); err != nil {
				return gatherCosts{}, err
			}
		}
		return measureGather(len(data), func(dim int) float64 {
			c := byDim[dim].c
			return float64(c.Bytes()) / float64(max(c.Rows, 1))
		}, func(dim, rows int) (time.Duration, error) {
			sc, _ := get(dim)
			s := sc.s
			s.Rows, s.Data = rows, s.Data[:rows*dim]
			c := *sc.c
			c.Truncate(rows)
			qs := [][]float32{data[:dim]}
			return gpu.MedianOf(5, func() error {
				_, _, err := exact.ExactSearchBatch(ctx, s, &c, qs, 10, core.Dot, 0, false)
				return err
			})
		}, func(dim int, list []uint32) (time.Duration, error) {
			sc, _ := get(dim)
			qs := [][]float32{data[:dim]}
			return gpu.MedianOf(5, func() error {
				_, _, err := exact.ExactSearchRows(ctx, sc.s, sc.c, list, qs, 10, core.Dot, 0, false)
				return err
			})
		})
	})
}

var (
	gatherCostsI8  = gatherCostsQuant(core.Int8)
	gatherCostsF16 = gatherCostsQuant(core.F16)
)

// gatherCostsFor is the measured costs of the index's precision.
func (ix *Index) gatherCostsFor() (gatherCosts, error) {
	switch ix.cfg.Precision {
	case core.Int8:
		return gatherCostsI8()
	case core.F16:
		return gatherCostsF16()
	}
	return gatherCostsF32()
}

// rowBytes is what one row costs a scan of the index: its float32 stride,
// or its compressed codes and values.
func (ix *Index) rowBytes() float64 {
	if c := ix.quant.c; c != nil && c.Rows > 0 {
		return float64(c.Bytes()) / float64(c.Rows)
	}
	return float64(4 * ix.slab.Stride)
}

// gatherAt is where a filtered search reads only its admitted rows:
// nowhere (it scans), on the CPU or on the index's GPU.
type gatherAt int

const (
	scanAll gatherAt = iota
	gatherCPU
	gatherGPU
)

// gatherer is a device side that gathers (internal/gpu's Index): the
// scores of listed rows, and what that costs on the device.
type gatherer interface {
	Gather(ctx context.Context, qs [][]float32, rows []uint32, st *core.Stages) ([]float32, error)
	GatherCosts() (fixed time.Duration, perByte float64, err error)
}

// subsetRows decides how a search of nq queries meets the rows m admits:
// it returns the admitted rows, in order,
// and where to gather them when that is measured to be cheaper than the
// scan (on the CPU: gatherCosts; on a GPU index: the device's gather
// costs against its latency and scan rate, and under Auto the CPU's gather
// too), and records the choice in ctx's trace. A compressed GPU index, a
// sharded or isolated one and one whose rows overflow its device scan on
// the device. The caller holds ix.mu.
func (ix *Index) subsetRows(ctx context.Context, m rowMask, filtered bool, nq int) ([]uint32, gatherAt) {
	mask, admitted := m.bits, m.n
	t := traceFrom(ctx)
	if t != nil {
		t.Admitted += int64(admitted) * int64(nq)
		t.Subset = ""
		if mask != nil {
			t.Subset = "scan"
		}
	}
	if mask == nil || ix.slab.Rows == 0 {
		return nil, scanAll
	}
	at := ix.gatherPlace(admitted, nq, filtered && gpu.SelectPathOf(ctx) == gpu.SelectAuto)
	if at == scanAll {
		return nil, scanAll
	}
	if t != nil {
		t.Subset = "gather"
	}
	if rows := m.rows; rows != nil {
		for len(rows) > 0 && int(rows[len(rows)-1]) >= ix.slab.Rows {
			rows = rows[:len(rows)-1]
		}
		return rows, at
	}
	return maskRows(mask, m.words, admitted, ix.slab.Rows), at
}

// gatherPlace is subsetRows' choice; gpuGather says a GPU index may
// gather on its device: the search has a filter (with only deleted rows to
// leave out, its scan skips them by the tombstones resident on the device
// and sends nothing) and no caller forced a selection path. The caller
// holds ix.mu.
func (ix *Index) gatherPlace(admitted, nq int, gpuGather bool) gatherAt {
	forced := ix.test.subsetForced()
	if forced == subsetScan {
		return scanAll
	}
	cpuPays := func() bool {
		if admitted == 0 || forced == subsetGather {
			return true
		}
		costs, err := ix.gatherCostsFor()
		if err != nil {
			return false
		}
		perQuery, _ := cpuQueryRate()
		return costs.pays(admitted, ix.slab.Rows, ix.rowBytes(), nq, perQuery)
	}
	if !ix.onGPU() {
		if cpuPays() {
			return gatherCPU
		}
		return scanAll
	}
	if admitted == 0 {
		return gatherCPU // nothing to read anywhere
	}
	gd, ok := ix.dev.(gatherer)
	if !ok || !gpuGather || ix.quant.c != nil || ix.overflowing() || ix.stale || admitted >= ix.slab.Rows {
		return scanAll
	}
	if forced == subsetGather {
		return gatherGPU
	}
	lat, rate, err := ix.dev.Calibrate()
	if err != nil || rate <= 0 {
		return scanAll
	}
	fixed, perByte, err := gd.GatherCosts()
	if err != nil {
		return scanAll
	}
	b := float64(4 * ix.slab.Stride)
	scan := float64(nq) * (lat.Seconds() + float64(ix.slab.Rows)*b/rate)
	gather := float64(nq) * (fixed.Seconds() + float64(admitted)*b*perByte)
	if ix.cfg.Device == Auto {
		// The CPU's gather, when it is sooner still (a few rows: the
		// device's fixed cost is a round trip).
		if costs, err := ix.gatherCostsFor(); err == nil && admitted <= ix.slab.Rows/gatherMaxShare {
			cpu := float64(nq) * float64(admitted) * (costs.GatherRow + costs.GatherByte*b) / 1e9
			if cpu < min(scan, gather) {
				return gatherCPU
			}
		}
	}
	if gather < scan {
		return gatherGPU
	}
	return scanAll
}

// maskRows lists the rows below n whose bits mask sets (admitted of them):
// from the words listed in words when not nil, else skipping empty words
// four at a time (a selective filter's bitmap is nearly all zero).
func maskRows(mask []uint64, words []uint32, admitted, n int) []uint32 {
	rows := make([]uint32, 0, admitted)
	if words != nil {
		for _, i := range words {
			for word := mask[i]; word != 0; word &= word - 1 {
				if r := int(i)<<6 | bits.TrailingZeros64(word); r < n {
					rows = append(rows, uint32(r))
				}
			}
		}
		return rows
	}
	i := 0
	for ; i+4 <= len(mask); i += 4 {
		q := mask[i : i+4 : i+4]
		if q[0]|q[1]|q[2]|q[3] == 0 {
			continue
		}
		for j, word := range q {
			for word != 0 {
				rows = append(rows, uint32((i+j)<<6|bits.TrailingZeros64(word)))
				word &= word - 1
			}
		}
	}
	for ; i < len(mask); i++ {
		for word := mask[i]; word != 0; word &= word - 1 {
			rows = append(rows, uint32(i<<6|bits.TrailingZeros64(word)))
		}
	}
	for len(rows) > 0 && int(rows[len(rows)-1]) >= n {
		rows = rows[:len(rows)-1]
	}
	return rows
}

// searchGather answers prepared queries from the listed rows only, where
// at says: on the GPU (gather.wgsl's scores, selected here by the rule of
// every path), falling back to the CPU as a GPU search does; on the CPU
// fallback.SearchRows for float32 rows, exact.ExactSearchRows (the
// compressed codes gathered, then the float32 rescore) for a compressed
// index. The caller holds ix.mu.
func (ix *Index) searchGather(ctx context.Context, qs [][]float32, k int, rows []uint32, at gatherAt, approximate bool) ([][]umbra.Hit, error) {
	t := traceFrom(ctx)
	if at == gatherGPU {
		all, err := ix.gatherOnGPU(ctx, qs, k, rows)
		if err == nil {
			return all, nil
		}
		if !errors.Is(err, gpu.ErrSubnormal) {
			if err := ix.afterGPUFailure(ctx, err); err != nil {
				return nil, err
			}
		}
		// Scores a device that flushes subnormals could change, or Auto
		// after a failure: the CPU gathers.
	}
	start := time.Now()
	view := ix.view()
	var res [][]core.Hit
	if ix.quant.c != nil {
		var st exact.QuantStats
		var err error
		res, st, err = exact.ExactSearchRows(ctx, view, ix.quant.c, rows, qs, k, ix.cfg.Metric, ix.cfg.Workers, approximate)
		if err != nil {
			return nil, err
		}
		addQuant(t, st, start)
	} else {
		var err error
		res, err = fallback.SearchRowsBatch(ctx, view, rows, qs, k, ix.cfg.Metric, ix.cfg.Workers)
		if err != nil {
			return nil, err
		}
		addGather(t, start, len(qs), len(rows), ix.slab.Stride)
	}
	all := make([][]umbra.Hit, len(res))
	for i, r := range res {
		all[i] = ix.toHits(r)
	}
	return all, nil
}

// gatherOnGPU is searchGather on the index's device. The caller holds
// ix.mu.
func (ix *Index) gatherOnGPU(ctx context.Context, qs [][]float32, k int, rows []uint32) ([][]umbra.Hit, error) {
	t := traceFrom(ctx)
	var st *core.Stages
	if t != nil {
		st = &core.Stages{}
	}
	scores, err := ix.dev.(gatherer).Gather(ctx, qs, rows, st)
	addStages(t, st)
	if err = gpuError(err); err != nil {
		return nil, err
	}
	start := time.Now()
	n, m, ids := len(rows), ix.cfg.Metric, ix.rid.tieIDs()
	all := make([][]umbra.Hit, len(qs))
	for j := range qs {
		keys := scores[j*n : (j+1)*n]
		topk.ToKeys(m, keys)
		h := topk.New(min(k, n), n, ids)
		for i, key := range keys {
			h.Offer(int(rows[i]), key)
		}
		all[j] = ix.toHits(h.Result(m))
	}
	if t != nil {
		lap(&t.Select, start)
		t.Device = "gpu"
		t.Searches += len(qs)
		t.BytesRead += st.BytesRead
	}
	return all, nil
}

// addGather records a float32 gather of listed rows for nq queries in t
// (nil: nothing).
func addGather(t *diag.Trace, start time.Time, nq, listed, stride int) {
	if t == nil {
		return
	}
	lap(&t.Kernel, start)
	t.KernelClock, t.Device = "cpu", "cpu"
	t.Searches += nq
	t.BytesRead += int64(nq) * int64(listed) * int64(stride) * 4
}
