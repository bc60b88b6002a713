package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/topk"
)

// Overflow: with Limits.Overflow and Limits.MaxDeviceBytes, the device holds the
// first devCap rows and the fallback the rest. A search runs both parts at
// once — the device over its rows, the CPU over the others, each with its
// slice of the allow bitmap — and merges them exactly: each part's k best
// by the one ordering every path shares (score, then lower ID; ties.go),
// merged by it, are the top k of all rows. A range search takes every row
// within the threshold from both. devCap is a multiple of 64, so the bitmap splits on
// a word boundary.

// overflowCap returns the rows the device may hold under cfg, or 0 for no
// cap; an Overflow budget below 64 rows is a configuration error.
func overflowCap(cfg Config) (int, error) {
	if !cfg.Limits.Overflow {
		return 0, nil
	}
	if cfg.Limits.MaxDeviceBytes <= 0 {
		return 0, fmt.Errorf("%w: Overflow needs MaxDeviceBytes, the device's share", umbra.ErrInvalidConfig)
	}
	rowBytes := int64(packed.StrideFor(cfg.Dim)) * 4
	if cfg.Precision != umbra.F32 {
		// The device holds the codes alone; the float32 rows stay on the
		// host.
		rowBytes = int64(codeWords(cfg.Precision, cfg.Dim)) * 4
	}
	rows := cfg.Limits.MaxDeviceBytes / rowBytes &^ 63
	if rows < 64 {
		return 0, fmt.Errorf("%w: MaxDeviceBytes %d holds fewer than 64 rows of %d bytes; Overflow needs at least %d",
			umbra.ErrInvalidConfig, cfg.Limits.MaxDeviceBytes, rowBytes, 64*rowBytes)
	}
	return int(min(rows, int64(^uint(0)>>1))), nil
}

// deviceRows is how many of rows rows the device holds.
func (ix *Index) deviceRows(rows int) int {
	if ix.devCap > 0 {
		return min(rows, ix.devCap)
	}
	return rows
}

// deviceView is what the device holds of s, cut to the rows it holds: s
// itself, or, for a compressed precision, the codes c of s's rows (as
// words carried in float32 elements).
func (ix *Index) deviceView(s *packed.Slab, c *exact.Compressed) *packed.Slab {
	if c != nil {
		w := c.WordsPerRow()
		s = &packed.Slab{Dim: w, Stride: w, Rows: c.Rows, Data: c.Words()}
	}
	n := ix.deviceRows(s.Rows)
	if n == s.Rows {
		return s
	}
	return s.Part(0, n)
}

// overflowing reports whether some rows live on the CPU only. The caller
// holds ix.mu.
func (ix *Index) overflowing() bool { return ix.devCap > 0 && ix.slab.Rows > ix.devCap }

// hostPart is the fallback's view of the rows past the device's, with
// their part of mask (nil: every row); a hit's row in it plus devCap is its
// row in the slab.
func (ix *Index) hostPart(mask []uint64) fallback.Slab {
	v := ix.view()
	d := ix.devCap
	v.Data, v.Rows = v.Data[d*v.Stride:], v.Rows-d
	if mask != nil {
		v.Allow = mask[d/64:]
	}
	if v.IDs != nil {
		v.IDs = v.IDs[d:]
	}
	return v
}

// searchSplit searches the device's rows and the CPU's at once and merges
// the answers. A device error is returned as it is (the caller decides
// what it means). The caller holds ix.mu.
func (ix *Index) searchSplit(ctx context.Context, qs [][]float32, k int, mask []uint64, st *core.Stages) ([][]core.Hit, error) {
	var dev [][]core.Hit
	var derr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer ix.recoverInto(&derr, ix.watchFaults())
		dev, derr = ix.deviceTopK(ctx, qs, k, ix.devCap, mask, st)
	}()
	view := ix.hostPart(mask)
	host, herr := fallback.SearchBatch(ctx, view, qs, k, ix.cfg.Metric, ix.cfg.Workers)
	<-done
	if derr != nil {
		return nil, derr
	}
	if herr != nil {
		return nil, herr
	}
	if st != nil {
		// The CPU's passes over its rows, beside the device's (counted in
		// st by deviceTopK, whose goroutine is done).
		qb := fallback.QueryBlock(view.Stride)
		st.BytesRead += int64(view.Rows) * int64(view.Stride) * 4 * int64((len(qs)+qb-1)/qb)
	}
	out := make([][]core.Hit, len(qs))
	for i := range qs {
		out[i] = ix.merge(dev[i], host[i], k)
	}
	return out, nil
}

// merge returns the best k of a (device rows) and b (rows past them,
// numbered from devCap), each ranked best first, ties by lower ID.
func (ix *Index) merge(a, b []core.Hit, k int) []core.Hit {
	return mergeHits(a, b, ix.devCap, k, ix.cfg.Metric, ix.rid.tieIDs())
}

// rangeSplit is SearchRange's device part from the read-back scores and
// the CPU's over the rest, merged. The caller holds ix.mu.
func (ix *Index) rangeSplit(ctx context.Context, q []float32, threshold float32, mask []uint64) ([]core.Hit, error) {
	scores, err := ix.dev.Scores(ctx, q, ix.deviceRows(ix.slab.Rows))
	if err != nil {
		return nil, err
	}
	ids := ix.rid.tieIDs()
	found := topk.Within(scores, threshold, ix.cfg.Metric, mask, ids)
	if !ix.overflowing() {
		return found, nil
	}
	rest, err := fallback.Range(ctx, ix.hostPart(mask), q, threshold, ix.cfg.Metric, ix.cfg.Workers)
	if err != nil {
		return nil, err
	}
	for _, h := range rest {
		h.Row += ix.devCap
		found = append(found, h)
	}
	m := ix.cfg.Metric
	slices.SortFunc(found, func(a, b core.Hit) int {
		if topk.Worse(b, a, m, ids) {
			return -1
		}
		return 1
	})
	return found, nil
}
