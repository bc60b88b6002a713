package fallback

import (
	"context"

	"github.com/umbravec/umbra/internal/parallel"
)

// ReadPass reads every float of the slab once, with the same kernel shape
// as Search (four rows walked in step, the widest vector loads the CPU
// has), the same blocks and the same goroutines, but no query and no
// arithmetic beyond a running sum per row.
// Its time is the memory-bandwidth floor of an exact scan on this machine;
// benchmarks report Search as a multiple of it. The sum is returned so the
// reads cannot be optimised away.
func ReadPass(ctx context.Context, s Slab, workers int) (sum float32, err error) {
	defer parallel.Recover(&err)
	if err := s.check(); err != nil {
		return 0, err
	}
	if s.Rows == 0 {
		return 0, nil
	}
	kern := active.sumRows
	p := newPlan(s, rowsFor(blockBytes, s.Stride, 8))
	w := parallel.Workers(workers, p.nblocks, len(s.Data))
	sums := make([]float32, w)
	bufs := make([][]float32, w)
	for i := range bufs {
		bufs[i] = make([]float32, p.blockRows)
	}
	length := make([]float32, p.stride)
	err = parallel.Run(ctx, w, p.nblocks, func(wk, blk int) {
		_, rows, n := p.block(blk)
		buf := bufs[wk][:n]
		kern(buf, length, rows, p.stride)
		for _, x := range buf {
			sums[wk] += x
		}
	})
	for _, x := range sums {
		sum += x
	}
	return sum, err
}
