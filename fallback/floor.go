package fallback

import "context"

// ReadPass reads every float of the slab once, with the same vector loads,
// blocks and goroutines as Search but no arithmetic beyond a running sum.
// Its time is the memory-bandwidth floor of an exact scan on this machine;
// benchmarks report Search as a multiple of it. The sum is returned so the
// reads cannot be optimised away.
func ReadPass(ctx context.Context, s Slab, workers int) (sum float32, err error) {
	defer guard(&err)
	if err := s.check(); err != nil {
		return 0, err
	}
	if s.Rows == 0 {
		return 0, nil
	}
	p := newPlan(s, rowsFor(blockBytes, s.Stride, 8))
	w := workerCount(workers, p.nblocks, len(s.Data))
	sums := make([]float32, w)
	err = parallel(ctx, w, p.nblocks, func(wk, blk int) {
		_, rows, _ := p.block(blk)
		sums[wk] += readPass(rows)
	})
	for _, x := range sums {
		sum += x
	}
	return sum, err
}
