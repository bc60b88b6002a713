package gpuplan

import (
	"fmt"
	"math/bits"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/topk"
)

// EmptyLists is n empty hit lists: the answer of a search with nothing to
// return.
func EmptyLists(n int) [][]core.Hit {
	out := make([][]core.Hit, n)
	for i := range out {
		out[i] = []core.Hit{}
	}
	return out
}

// SearchBatches runs qs through run step queries at a time, in order, and
// returns the lists of them all.
func SearchBatches(qs [][]float32, step int, run func(part [][]float32) ([][]core.Hit, error)) ([][]core.Hit, error) {
	out := make([][]core.Hit, 0, len(qs))
	for lo := 0; lo < len(qs); lo += step {
		hits, err := run(qs[lo:min(lo+step, len(qs))])
		if err != nil {
			return nil, err
		}
		out = append(out, hits...)
	}
	return out, nil
}

// SumBatches runs qs through run step() queries at a time (asked only
// when there are rows), in order, and returns the rows sums of each, query
// j's at j*rows, and how many passes over the rows they took: one per tile
// of a part's queries (singleQT for one query, batchQT for more).
func SumBatches(qs [][]float32, rows int, step func() int, singleQT, batchQT uint32, run func(part [][]float32) ([]float32, error)) ([]float32, int, error) {
	out := make([]float32, 0, len(qs)*rows)
	if rows == 0 {
		return out, 0, nil
	}
	n, scans := step(), 0
	for lo := 0; lo < len(qs); lo += n {
		part := qs[lo:min(lo+n, len(qs))]
		all, err := run(part)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, all...)
		qt := int(singleQT)
		if len(part) > 1 {
			qt = int(batchQT)
		}
		scans += (len(part) + qt - 1) / qt
	}
	return out, scans, nil
}

// QueryWords checks that every query of Sums has want words; failed is
// the error a mismatch wraps.
func QueryWords(qs [][]float32, want int, failed error) error {
	for j, q := range qs {
		if len(q) != want {
			return fmt.Errorf("%w: query %d has %d words, the rows take %d", failed, j, len(q), want)
		}
	}
	return nil
}

// Step gives an injected fault at the named step if fault (a test's; may
// be nil) asks for one, wrapped in failed.
func Step(fault func(step string) error, name string, failed error) error {
	if fault == nil {
		return nil
	}
	if err := fault(name); err != nil {
		return fmt.Errorf("%w: %s: %v", failed, name, err)
	}
	return nil
}

// LiveMask is the allow bitmap of the first rows rows that dead (a bitmap
// of deleted rows, possibly shorter) does not mark.
func LiveMask(rows int, dead []uint64) []uint64 {
	out := make([]uint64, (rows+63)/64)
	for i := range out {
		out[i] = ^uint64(0)
		if i < len(dead) {
			out[i] &^= dead[i]
		}
	}
	if rows&63 != 0 {
		out[len(out)-1] &= 1<<(uint(rows)&63) - 1
	}
	return out
}

// WholeTiles is n queries rounded down to whole tiles of qt, where n holds
// one tile; at least 1.
func WholeTiles(n, qt int) int {
	if qt > 1 && n >= qt {
		return n / qt * qt
	}
	return max(n, 1)
}

// Allowed is how many of the first rows rows mask allows (bit r of word
// r/64); bits past rows, in mask's last word or past it, do not count:
// no search can return those rows.
func Allowed(mask []uint64, rows int) int {
	n := 0
	for i := 0; i < len(mask) && i*64 < rows; i++ {
		w := mask[i]
		if rest := rows - i*64; rest < 64 {
			w &= 1<<uint(rest) - 1
		}
		n += bits.OnesCount64(w)
	}
	return n
}

// HostSelect selects each of sub.NQ queries' sub.K best of its sub.Rows
// scores (query q's at q*sub.Rows) on the host, among the rows sub.Mask
// allows.
func HostSelect(scores []float32, sub Submission, m core.Metric) [][]core.Hit {
	hits := make([][]core.Hit, sub.NQ)
	for q := range hits {
		hits[q] = topk.SelectAllowed(scores[q*sub.Rows:(q+1)*sub.Rows], sub.K, m, sub.Mask)
	}
	return hits
}
