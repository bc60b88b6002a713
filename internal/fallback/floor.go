package fallback

import (
	"context"

	"github.com/umbravec/umbra/internal/parallel"
)

// floorBlockBytes is a block of the floor's read: large enough that
// handing it out costs nothing measurable, small enough to balance.
const floorBlockBytes = 256 << 10

// ReadPass reads every float of the slab once, as a plain stream: the
// slab's bytes cut into contiguous shares of blocks on the same goroutines
// as Search (parallel.RunShares), each block read strictly in order with
// the widest vector loads the CPU has and summed, with no query, no row
// structure and no selection. Its time is what this machine takes to read
// those bytes — the memory-bandwidth floor of an exact scan — and
// benchmarks report Search as a multiple of it. The read is the machine's
// best whichever kernel set is forced (a forced set changes the search,
// not the machine). The sum is returned so the reads cannot be optimised
// away.
func ReadPass(ctx context.Context, s Slab, workers int) (sum float32, err error) {
	defer parallel.Recover(&err)
	if err := s.check(); err != nil {
		return 0, err
	}
	if s.Rows == 0 {
		return 0, nil
	}
	read := runnableKernels()[0].read
	data := s.Data[:min(len(s.Data), s.Rows*s.Stride)]
	per := floorBlockBytes / 4
	nblocks := (len(data) + per - 1) / per
	w := parallel.Workers(workers, nblocks, len(data))
	sums := make([]float32, w*16) // a cache line per worker
	err = parallel.RunShares(ctx, w, nblocks, func(wk, b int) {
		sums[wk*16] += read(data[b*per : min((b+1)*per, len(data))])
	})
	for i := 0; i < len(sums); i += 16 {
		sum += sums[i]
	}
	return sum, err
}
