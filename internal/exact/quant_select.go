package exact

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/parallel"
	"github.com/umbravec/umbra/internal/topk"
)

// Device-side candidate selection (issue 24; shaders/qbounds.wgsl). The
// device computes, from each raw sum, a float32 interval [lo', hi'] that
// contains the host's keyBounds interval [lo, hi] (below: the per-row
// data and per-query coefficients it needs, the latter rounded outward),
// finds τ' = the k-th best lo' among the allowed rows it holds, and returns
// only the rows with hi' ≥ τ', with their raw sums. Since lo' ≤ lo for
// every row, τ' ≤ τ (the host's k-th best lo among all allowed rows); since
// hi' ≥ hi, every row with hi ≥ τ, and every row of the top k by lo, is
// among the candidates. ExactSearchCands then runs the host's own bounds on
// the candidates only: their k-th best lo is τ itself, and it rescores
// exactly the rows ExactSearchSums would, so the answer is the same.

// QRowWords is how many float32 DeviceRowData gives a row, and QCoefWords
// how many DeviceBoundCoefs gives a query (shaders/qbounds.wgsl's Coef; the
// last two words, the candidate capacity and the query count, are the
// device side's to fill).
const (
	QRowWords  = 4
	QCoefWords = 16
)

// DeviceRowData returns rows [from, to) of c's per-row bound data as the
// device reads it: scale, norm, err and ‖x̂‖², four float32 a row.
func DeviceRowData(c *Compressed, from, to int) []float32 {
	out := make([]float32, 0, QRowWords*max(0, to-from))
	for i := from; i < to; i++ {
		out = append(out, c.Scale[i], normalUp(c.Norm[i]), normalUp(c.Err[i]), c.HatSq[i])
	}
	return out
}

// normalUp raises a subnormal upper bound to the smallest normal float32,
// so that a device that flushes subnormals to zero still reads an upper
// bound.
func normalUp(v float32) float32 {
	if v > 0 && v < 0x1p-126 {
		return 0x1p-126
	}
	return v
}

// coefLimit caps the device's validity limits: far above any magnitude the
// checks let through, and finite.
const coefLimit = 0x1p120

// DeviceBoundCoefs returns, for each query (prepared as ExactSearchSums
// takes them), the coefficients qbounds.wgsl bounds its rows with, each
// rounded outward from the host's float64 value (QCoefWords a query; the
// last two left 0), and whether the device may bound it at all: a query
// whose norm reaches 2^60 is not (its rows would overflow the device's
// float32 arithmetic), and takes the full-sums path.
func DeviceBoundCoefs(s fallback.Slab, c *Compressed, qs [][]float32, m core.Metric) ([][]float32, []bool, error) {
	qqs, err := quantQueries(s, c, qs, m)
	if err != nil {
		return nil, nil, err
	}
	out := make([][]float32, len(qs))
	ok := make([]bool, len(qs))
	for j, qq := range qqs {
		qq.forDevice(c)
		out[j], ok[j] = qq.deviceCoefs()
	}
	return out, ok, nil
}

// deviceCoefs is one query's DeviceBoundCoefs (see qbounds.wgsl's Coef).
func (qq *quantQuery) deviceCoefs() ([]float32, bool) {
	w := make([]float32, QCoefWords)
	qn := qq.qn
	if !(qn < 0x1p60) {
		return w, false
	}
	a, hh, hs := 1.0, qq.g16*qn, qq.abs16
	if qq.prec == core.Int8 {
		a, hh, hs = qq.sq, qq.eq, 0
	}
	// A float64 rounding error of these few steps (2^-50 relative) is far
	// inside the 2^-40 each is widened by.
	const wid = 1 + 0x1p-40
	tiny := 0x1p-40 * qn
	ce := (qq.wide*(qn+hh) + tiny) * wid
	cx := (qq.wide*(hh+qq.g32*qn) + tiny) * wid
	cs := qq.wide * hs * wid
	c0 := max(qq.wide*qq.abs32*wid, 0x1p-120)
	hlim, mlim := coefLimit, coefLimit
	if qn > 0 {
		hlim = min(hlim, 0x1p100/qn*(1-0x1p-20))
	}
	if a > 0 {
		mlim = min(mlim, 0x1p100/a*(1-0x1p-20))
	}
	if a > 0 && a < 0x1p-126 {
		return w, false // a device may flush the query's scale to zero
	}
	w[0] = float32(a) // exact: the query's scale is a float32, or 1
	w[1], w[2], w[3], w[4] = up32(ce), up32(cx), up32(cs), up32(c0)
	w[5], w[6] = down32(hlim), down32(mlim)
	w[7] = float32(qq.qn2)
	w[8] = up32(qn)
	w[9], w[10] = up32(hh*wid), up32(hs*wid)
	w[11] = up32((1 + qq.g32) * qq.wide * (1 + 0x1p-16))
	w[12] = down32((1 - qq.g32) * qq.wide2 * (1 - 0x1p-16))
	w[13] = up32(max(qq.abs32*wid, 0x1p-120))
	// The upper coefficients must survive a flush of subnormals.
	for _, i := range []int{1, 2, 3, 8, 9, 10} {
		w[i] = normalUp(w[i])
	}
	return w, true
}

// DeviceCand is one candidate a device returned: its row and its raw sum's
// bits (as DeviceSums holds them).
type DeviceCand struct {
	Row uint32
	Raw uint32
}

// DeviceCands are the candidates a device selected among the first Rows
// rows of a Compressed, per query; rows past Rows are summed on the CPU.
type DeviceCands struct {
	Cands [][]DeviceCand
	Rows  int
}

// ExactSearchCands is ExactSearchSums on the candidates a device selected
// (d) instead of every sum: the host's bounds for the candidates and for
// every row past d.Rows, τ, and the float32 rescore of the rows whose
// upper bound reaches it; the same answer. scans is how many passes the
// device made over the codes, rowScans over its per-row bound data (for
// st.BytesRead).
func ExactSearchCands(ctx context.Context, s fallback.Slab, c *Compressed, qs [][]float32, d DeviceCands, scans, rowScans, k int, m core.Metric, workers int) (out [][]core.Hit, st QuantStats, err error) {
	defer parallel.Recover(&err)
	qqs, err := quantQueries(s, c, qs, m)
	if err != nil {
		return nil, st, err
	}
	nq := len(qs)
	if d.Rows < 0 || d.Rows > s.Rows || len(d.Cands) != nq {
		return nil, st, fmt.Errorf("%w: candidates of %d device rows for %d queries over %d rows", fallback.ErrSlabShape, d.Rows, nq, s.Rows)
	}
	for j, cs := range d.Cands {
		for _, cd := range cs {
			if int(cd.Row) >= d.Rows {
				return nil, st, fmt.Errorf("%w: query %d's candidate row %d is past the device's %d rows", fallback.ErrSlabShape, j, cd.Row, d.Rows)
			}
		}
	}
	for _, qq := range qqs {
		qq.forDevice(c)
	}
	st.Queries = nq
	if s.Rows == 0 || k <= 0 || nq == 0 {
		return gpuplan.EmptyLists(nq), st, nil
	}
	const blockRows = 4096
	tops := [][]topk.Heap{make([]topk.Heap, nq)}
	cands := [][][]candidate{make([][]candidate, nq)}
	var hostCands int64
	for _, cs := range d.Cands {
		hostCands += int64(len(cs))
	}
	err = parallel.Run(ctx, parallel.Workers(workers, nq, (s.Rows-d.Rows+len(d.Cands[0]))*4), nq, func(_, j int) {
		qq := qqs[j]
		t := &tops[0][j]
		*t = topk.New(k, len(d.Cands[j])+s.Rows-d.Rows, s.IDs)
		cl := &cands[0][j]
		for _, cd := range d.Cands[j] {
			row := int(cd.Row)
			if !topk.Allows(s.Allow, row) {
				continue // the device skips them too; never trusted
			}
			var raw float64
			if c.Prec == core.Int8 {
				raw = float64(int32(cd.Raw)) + float64(qq.off)
			} else {
				raw = float64(math.Float32frombits(cd.Raw))
			}
			offerBounded(qq, c, row, raw, t, cl)
		}
		buf := make([]float64, blockRows)
		for lo := d.Rows; lo < s.Rows; lo += blockRows {
			raw := buf[:min(blockRows, s.Rows-lo)]
			DeviceSums{}.sums(qq, c, 0, lo, raw)
			scanBlock(qq, c, raw, lo, s.Allow, t, cl, false)
		}
	})
	if err != nil {
		return nil, st, err
	}
	for j := range nq {
		// The device keeps every row of its top k by lower bound, so a
		// query holds at least k rows here when k is at most the allowed
		// rows the device holds (the caller's to ensure): fewer would
		// leave τ unknown, and the answer is refused rather than guessed.
		if tops[0][j].Len() < k {
			return nil, st, fmt.Errorf("%w: query %d has %d candidates for k %d", fallback.ErrSlabShape, j, tops[0][j].Len(), k)
		}
	}
	// The device's reads of the codes and of its per-row bound data, the
	// host's of the candidates' per-row values and of the rows past the
	// device's.
	devBytes := CompressedBytes(c.Prec, c.Dim, d.Rows) - 16*int64(d.Rows)
	st.BytesRead = int64(scans)*devBytes + int64(rowScans)*16*int64(d.Rows) + 16*hostCands +
		int64(nq)*(c.Bytes()-CompressedBytes(c.Prec, c.Dim, d.Rows))
	out, err = finishQuant(ctx, s, qqs, tops, cands, k, m, workers, false, &st)
	return out, st, err
}

// ExactRangeCands is ExactRangeSums on the candidates a device selected
// for one query (cands: every allowed row of the first devRows whose
// device upper bound reaches the threshold's key): the host's bounds for
// them and for every row past devRows, then the float32 rescore of the
// rows whose upper bound reaches it; the same answer. scans and rowScans
// are as in ExactSearchCands.
func ExactRangeCands(ctx context.Context, s fallback.Slab, c *Compressed, q []float32, cands []DeviceCand, devRows, scans, rowScans int, threshold float32, m core.Metric, workers int) (hits []core.Hit, st QuantStats, err error) {
	defer parallel.Recover(&err)
	qp, err := fallback.CheckQuery(s, q, m)
	if err != nil {
		return nil, st, err
	}
	if err := c.check(s); err != nil {
		return nil, st, err
	}
	if devRows < 0 || devRows > s.Rows {
		return nil, st, fmt.Errorf("%w: %d device rows over %d rows", fallback.ErrSlabShape, devRows, s.Rows)
	}
	for _, cd := range cands {
		if int(cd.Row) >= devRows {
			return nil, st, fmt.Errorf("%w: candidate row %d is past the device's %d rows", fallback.ErrSlabShape, cd.Row, devRows)
		}
	}
	st.Queries = 1
	if s.Rows == 0 {
		return []core.Hit{}, st, nil
	}
	qq := newQuantQuery(c, qp, m)
	qq.forDevice(c)
	limit := topk.Key(m, threshold)
	var rows []int
	for _, cd := range cands {
		row := int(cd.Row)
		if !topk.Allows(s.Allow, row) {
			continue
		}
		var raw float64
		if c.Prec == core.Int8 {
			raw = float64(int32(cd.Raw)) + float64(qq.off)
		} else {
			raw = float64(math.Float32frombits(cd.Raw))
		}
		if _, hi, _ := qq.keyBounds(c, row, raw); hi >= limit {
			rows = append(rows, row)
		}
	}
	if devRows < s.Rows {
		raw := make([]float64, s.Rows-devRows)
		DeviceSums{}.sums(qq, c, 0, devRows, raw)
		rows = rangeCandidates(qq, c, raw, devRows, s.Allow, limit, rows)
	}
	slices.Sort(rows)
	hits, err = rescoreWithin(ctx, s, c, qq, rows, limit, m, workers, &st)
	devBytes := CompressedBytes(c.Prec, c.Dim, devRows) - 16*int64(devRows)
	st.BytesRead = int64(scans)*devBytes + int64(rowScans)*16*int64(devRows) + 16*int64(len(cands)) +
		(c.Bytes() - CompressedBytes(c.Prec, c.Dim, devRows)) + int64(len(rows))*int64(s.Stride)*4
	return hits, st, err
}

// DeviceKeyBounds returns the host's key interval [lo, hi] (keyBounds,
// with forDevice's widening) of every device row for every query, from
// the device's sums d: what a device's own bounds must contain (tests
// check qbounds.wgsl's lower bounds against it on a real adapter).
func DeviceKeyBounds(s fallback.Slab, c *Compressed, qs [][]float32, d DeviceSums, m core.Metric) (lo, hi [][]float32, err error) {
	qqs, err := quantQueries(s, c, qs, m)
	if err != nil {
		return nil, nil, err
	}
	if err := d.check(s, len(qs)); err != nil {
		return nil, nil, err
	}
	raw := make([]float64, d.Rows)
	lo, hi = make([][]float32, len(qs)), make([][]float32, len(qs))
	for j, qq := range qqs {
		qq.forDevice(c)
		d.sums(qq, c, j, 0, raw)
		lo[j], hi[j] = make([]float32, d.Rows), make([]float32, d.Rows)
		for i, r := range raw {
			lo[j][i], hi[j][i], _ = qq.keyBounds(c, i, r)
		}
	}
	return lo, hi, nil
}
