package engine

import (
	"context"
	"errors"
	"math/bits"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/topk"
)

// quantSelector is a device side that selects a compressed search's
// candidates on the device (gpu.Index.SelectSums; the isolated child does
// not, and its searches read every sum back).
type quantSelector interface {
	SelectSums(ctx context.Context, r gpu.QuantSelect, st *core.Stages) ([][]exact.DeviceCand, []int, int, int, error)
}

// selectSlots is the candidate capacity of a query's list under device
// selection for k over rows device rows, and whether the selection pays:
// a slot comes back as 8 bytes (row and sum) where every sum is 4, so the
// lists must hold fewer than half the rows. 4k slots leave room for the
// rows whose bounds straddle the k-th best; 1,024 for small k; doubled
// listShift times where lists overflowed (adaptLists).
//
// Under MaxDeviceBytes the per-row bound data the selection keeps beside
// the codes (16 bytes a row) must fit the budget with them, or the
// selection is not used: the budget is the rows' promise, and Overflow
// fills it with codes.
func (ix *Index) selectSlots(k, rows int) (int, bool) {
	if max := ix.cfg.Limits.MaxDeviceBytes; max > 0 && int64(rows)*(int64(codeWords(ix.cfg.Precision, ix.cfg.Dim))*4+16) > max {
		return 0, false
	}
	if ix.test != nil && ix.test.quantCap > 0 {
		return max(ix.test.quantCap, k), true
	}
	slots := max(4*k, 1024) << ix.listShift.Load()
	return slots, 2*slots < rows
}

// maxListShift bounds listShift: lists of 1,024 slots grow to at most
// 2^20, past which they no longer pay on any index a device holds.
const maxListShift = 10

// adaptLists sizes the next k searches' lists by the counts the device
// reported for lists of slots over rows device rows: a list that
// overflowed (its query was then searched on every sum, a second pass)
// doubles the lists until they would have held twice its count, as long
// as they still pay (selectSlots); when every list used at most an eighth
// of its room, they halve again. Searches racing here only race to a
// size, never to an answer: any size gives the exact one. Range searches
// leave it alone: how many rows pass a threshold is the caller's choice,
// not the index's spread.
func (ix *Index) adaptLists(counts []int, slots, rows int) {
	most := 0
	for _, n := range counts {
		most = max(most, n)
	}
	shift := ix.listShift.Load()
	switch {
	case most > slots:
		for shift < maxListShift && slots < 2*most && 4*slots < rows {
			slots *= 2
			shift++
		}
	case 8*most <= slots && shift > 0:
		shift--
	default:
		return
	}
	ix.listShift.Store(shift)
}

// searchQuantSelect is searchQuantGPU with the candidates selected on the
// device: only they come back, and the host bounds and rescores them
// (exact.ExactSearchCands), the same answer as from every sum. A query
// whose candidates overflow its list, or that the device cannot bound,
// is searched on its sums (searchQuantSums). done is false where the
// selection does not apply (the device side lacks it, k passes the rows
// the device holds and the mask allows, it would not pay, or it does not
// fit the device): then nothing was searched. The caller holds ix.mu.
func (ix *Index) searchQuantSelect(ctx context.Context, qs [][]float32, k int, mask []uint64) (all [][]umbra.Hit, done bool, err error) {
	sel, ok := ix.dev.(quantSelector)
	rows := ix.deviceRows(ix.slab.Rows)
	if !ok || rows == 0 || k < 1 || len(qs) == 0 {
		return nil, false, nil
	}
	allowed := rows
	if mask != nil {
		allowed = 0
		for i, w := range mask[:min(len(mask), (rows+63)/64)] {
			if n := rows - 64*i; n < 64 {
				w &= 1<<uint(n) - 1
			}
			allowed += bits.OnesCount64(w)
		}
	}
	slots, pays := ix.selectSlots(k, rows)
	if k > allowed || !pays {
		return nil, false, nil
	}
	t := traceFrom(ctx)
	view := ix.view()
	view.Allow = mask
	c := ix.quant.c
	coefs, bounded, err := exact.DeviceBoundCoefs(view, c, qs, ix.cfg.Metric)
	if err != nil {
		return nil, true, hostError{err}
	}
	dq := make([][]float32, len(qs))
	for j, q := range qs {
		dq[j] = exact.DeviceQuery(c, q)
	}
	var st *core.Stages
	if t != nil {
		st = &core.Stages{}
	}
	cands, counts, scans, rowScans, err := sel.SelectSums(ctx, gpu.QuantSelect{Queries: dq, Coefs: coefs, Rows: rows, K: k, Cap: slots, Mask: mask,
		RowData: func(from, to int) []float32 { return exact.DeviceRowData(c, from, to) }}, st)
	addStages(t, st)
	if errors.Is(err, gpu.ErrSelectUnfit) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, gpuError(err)
	}
	if ix.test == nil || ix.test.quantCap == 0 {
		ix.adaptLists(counts, slots, rows)
	}
	var good, rest []int
	for j := range qs {
		if bounded[j] && cands[j] != nil {
			good = append(good, j)
		} else {
			rest = append(rest, j)
		}
	}
	all = make([][]umbra.Hit, len(qs))
	if len(good) > 0 {
		start := time.Now()
		gq, gc := make([][]float32, len(good)), make([][]exact.DeviceCand, len(good))
		for i, j := range good {
			gq[i], gc[i] = qs[j], cands[j]
		}
		res, qst, err := exact.ExactSearchCands(ctx, view, c, gq, exact.DeviceCands{Cands: gc, Rows: rows}, scans, rowScans, k, ix.cfg.Metric, ix.cfg.Workers)
		if err != nil {
			return nil, true, hostError{err}
		}
		addQuantGPU(t, qst, start)
		for i, j := range good {
			all[j] = ix.toHits(res[i])
		}
	}
	if len(rest) > 0 {
		rq := make([][]float32, len(rest))
		for i, j := range rest {
			rq[i] = qs[j]
		}
		res, err := ix.searchQuantSums(ctx, rq, k, mask, false)
		if err != nil {
			return nil, true, err
		}
		for i, j := range rest {
			all[j] = res[i]
		}
	}
	return all, true, nil
}

// rangeQuantSelect is rangeQuant with the candidates selected on the
// device: the allowed rows whose device upper bound reaches the
// threshold, with their sums; the host bounds and rescores only those
// (exact.ExactRangeCands). done is false where it does not apply (as
// searchQuantSelect, with k's slots 1,024) or the list overflowed: the
// caller reads the sums back. The caller holds ix.mu.
func (ix *Index) rangeQuantSelect(ctx context.Context, q []float32, threshold float32, mask []uint64) (found []core.Hit, done bool, err error) {
	sel, ok := ix.dev.(quantSelector)
	rows := ix.deviceRows(ix.slab.Rows)
	if !ok || rows == 0 {
		return nil, false, nil
	}
	slots, pays := ix.selectSlots(1, rows)
	if !pays {
		return nil, false, nil
	}
	t := traceFrom(ctx)
	view := ix.view()
	view.Allow = mask
	c := ix.quant.c
	coefs, bounded, err := exact.DeviceBoundCoefs(view, c, [][]float32{q}, ix.cfg.Metric)
	if err != nil {
		return nil, true, hostError{err}
	}
	if !bounded[0] {
		return nil, false, nil
	}
	var st *core.Stages
	if t != nil {
		st = &core.Stages{}
	}
	cands, _, scans, rowScans, err := sel.SelectSums(ctx, gpu.QuantSelect{Queries: [][]float32{exact.DeviceQuery(c, q)}, Coefs: coefs, Rows: rows,
		Cap: slots, Mask: mask, Range: true, Limit: topk.Key(ix.cfg.Metric, threshold),
		RowData: func(from, to int) []float32 { return exact.DeviceRowData(c, from, to) }}, st)
	addStages(t, st)
	if errors.Is(err, gpu.ErrSelectUnfit) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, gpuError(err)
	}
	if cands[0] == nil {
		return nil, false, nil // overflowed: every sum, then
	}
	start := time.Now()
	found, qst, err := exact.ExactRangeCands(ctx, view, c, q, cands[0], rows, scans, rowScans, threshold, ix.cfg.Metric, ix.cfg.Workers)
	if err != nil {
		return nil, true, hostError{err}
	}
	addQuantGPU(t, qst, start)
	return found, true, nil
}
