package exact

import (
	"context"
	"math"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/parallel"
	"github.com/umbravec/umbra/internal/topk"
)

// ExactSearchRows is ExactSearchBatch over the listed rows only — as if
// s.Allow admitted exactly them — reading only their codes: it sums each
// run of consecutive listed rows in place with the kernels a scan uses, bounds each row as a scan does, and
// rescores in float32 (fallback.ScoreRun, the bits Search gives) every row
// the bounds cannot rule out. The answer is exactly what ExactSearchBatch
// (and fallback.SearchRows over the float32 rows) returns for that subset.
// rows is strictly increasing within the slab (fallback.CheckRows).
func ExactSearchRows(ctx context.Context, s fallback.Slab, c *Compressed, rows []uint32, qs [][]float32, k int, m core.Metric, workers int, approximate bool) (out [][]core.Hit, st QuantStats, err error) {
	defer parallel.Recover(&err)
	qqs, err := quantQueries(s, c, qs, m)
	if err != nil {
		return nil, st, err
	}
	if err := fallback.CheckRows(s, rows); err != nil {
		return nil, st, err
	}
	nq := len(qs)
	out = make([][]core.Hit, nq)
	st.Queries = nq
	if len(rows) == 0 || k <= 0 || nq == 0 {
		for j := range out {
			out[j] = []core.Hit{}
		}
		return out, st, nil
	}
	per := c.Stride
	if c.Prec == core.F16 {
		per *= 2
	}
	blockRows := max(8, quantBlockBytes/max(per, 1)/4*4)
	nblocks := (len(rows) + blockRows - 1) / blockRows
	w := parallel.Workers(workers, nblocks, len(rows)*c.Stride)
	ks := activeQuant.Load()
	tops := make([][]topk.Heap, w)
	cands := make([][][]candidate, w)
	for i := range tops {
		tops[i] = make([]topk.Heap, nq)
		cands[i] = make([][]candidate, nq)
		for j := range tops[i] {
			tops[i][j] = topk.New(min(k, len(rows)), len(rows)/w+blockRows, s.IDs)
		}
	}
	// The kernels read each run of consecutive listed rows in place (a
	// lone row is a run of one), into each worker's buffers, made once.
	type scratch struct {
		raw  []float64
		i32  []int32
		f32  []float32
		sink uint32
	}
	scr := make([]scratch, w)
	for i := range scr {
		scr[i] = scratch{raw: make([]float64, blockRows), i32: make([]int32, blockRows), f32: make([]float32, blockRows)}
	}
	err = parallel.RunShares(ctx, w, nblocks, func(wk, b int) {
		part := rows[b*blockRows : min((b+1)*blockRows, len(rows))]
		n := len(part)
		sc := &scr[wk]
		raw := sc.raw[:n]
		sc.sink += touchListed(c, part)
		for j, qq := range qqs {
			for a := 0; a < n; {
				e := a + 1
				for e < n && part[e] == part[e-1]+1 {
					e++
				}
				lo, hi := int(part[a])*c.Stride, int(part[e-1]+1)*c.Stride
				if c.Prec == core.Int8 {
					sums := sc.i32[a:e]
					ks.i8Rows(sums, qq.q8, c.U8[lo:hi], c.Stride)
					for i, v := range sums {
						raw[a+i] = float64(v)
					}
				} else {
					sums := sc.f32[a:e]
					ks.f16Rows(sums, qq.qf, c.F16[lo:hi], c.Stride)
					for i, v := range sums {
						raw[a+i] = float64(v)
					}
				}
				a = e
			}
			scanListed(qq, c, raw, part, &tops[wk][j], &cands[wk][j], approximate)
		}
	})
	if err != nil {
		return nil, st, err
	}
	codeBytes := c.Bytes() / int64(max(c.Rows, 1))
	st.BytesRead = int64(len(rows)) * codeBytes
	out, err = finishQuant(ctx, s, qqs, tops, cands, k, m, workers, approximate, &st)
	return out, st, err
}

// scanListed is scanBlock for the listed rows part, whose raw sums are raw.
func scanListed(qq *quantQuery, c *Compressed, raw []float64, part []uint32, t *topk.Heap, cands *[]candidate, approximate bool) {
	fast := !approximate && qq.metric != core.L2
	for i, r := range raw {
		row := int(part[i])
		if approximate {
			t.Offer(row, qq.estKey(c, row, r))
			continue
		}
		if fast && t.Full() && qq.dotUpper(c, row, r) < float64(t.Worst()) {
			continue
		}
		offerBounded(qq, c, row, r, t, cands)
	}
}

// touchListed reads one word of every cache line of the listed rows' codes
// and of their bounds' per-row values, each load independent of the
// others, so the core has many of the scattered rows' misses in flight at
// once and the kernels and bounds then find them in cache (reading them a
// row at a time left each row's misses one after another; at 1,000,000 ×
// 128, a hundredth of the rows listed, this pass cut the gather to 0.58×
// (int8) and 0.77× (f16) of its time without it, in one process). It
// returns their sum so the loads stay.
func touchListed(c *Compressed, part []uint32) uint32 {
	var acc uint32
	line := 64
	if c.Prec == core.F16 {
		line = 32 // half floats
	}
	for _, r := range part {
		i := int(r)
		lo, hi := i*c.Stride, (i+1)*c.Stride
		if c.Prec == core.Int8 {
			for o := lo; o < hi; o += line {
				acc += uint32(c.U8[o])
			}
		} else {
			for o := lo; o < hi; o += line {
				acc += uint32(c.F16[o])
			}
		}
		acc += math.Float32bits(c.Scale[i]) ^ math.Float32bits(c.Norm[i]) ^ math.Float32bits(c.Err[i]) ^ math.Float32bits(c.HatSq[i])
	}
	return acc
}
