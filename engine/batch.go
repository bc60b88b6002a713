package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/packed"
)

// Coalescing concurrent searches.
//
// A search that finds the index idle runs at once, alone: no caller ever
// waits for company. Searches that arrive while one is running queue; when
// it finishes, the queued ones with the same k run as one batch (at most
// Config.Coalesce.MaxQueries, after at most Coalesce.Wait for more), so the
// device takes them in one pass and the fallback reads every row once for
// all of them rather than once each. A batch answers every query exactly as
// a lone search would: the batch path returns the same hits as the single
// path (the tests compare them), and each caller gets its own slice.
//
// The caller that started a run returns as soon as its own answer is ready;
// a goroutine of the index's own drains whatever queued meanwhile, so no
// caller's latency includes other callers' batches. A caller whose context
// ends returns its context's error at once; its query leaves the queue, or,
// if its batch is already running, the batch goes on for the others (and is
// cancelled when every caller in it has gone).

// coalescer is an index's queue of single searches.
type coalescer struct {
	mu      sync.Mutex
	running bool
	queue   []*request
	// batches and queries count the searches run, and the queries they
	// answered together.
	batches, queries atomic.Int64
}

// request is one queued search.
type request struct {
	ctx  context.Context
	q    []float32 // prepared: normalised (cosine) and padded
	k    int
	gone atomic.Bool // the caller returned (its context ended)
	done chan result // buffered: the runner never blocks on a caller
}

type result struct {
	hits []umbra.Hit
	err  error
}

// batchLimit is the most queries one coalesced batch holds; 1 means
// coalescing is off.
func (ix *Index) batchLimit() int {
	if ix.cfg.Coalesce.MaxQueries == 0 {
		return defaultBatchQueries
	}
	return ix.cfg.Coalesce.MaxQueries
}

// coalesce reports whether a single search with these options and context
// may share a batch: not when it is filtered (its allow set is its own),
// traced or reporting progress (those describe one call), or when
// coalescing is off.
func (ix *Index) coalesce(ctx context.Context, o *searchOptions) bool {
	if ix.batchLimit() <= 1 || o.filtered() || o.approximate || o.payload {
		return false
	}
	if traceFrom(ctx) != nil {
		return false
	}
	if p, ok := ctx.Value(progressKey{}).(progress); ok && p != nil {
		return false
	}
	return true
}

// searchCoalesced is Search through the queue.
func (ix *Index) searchCoalesced(ctx context.Context, query []float32, k int) ([]umbra.Hit, error) {
	if k <= 0 {
		return nil, fmt.Errorf("%w: got k=%d", umbra.ErrInvalidK, k)
	}
	// Validation needs nothing the writers change: the configuration only.
	if err := ix.checkVector(query, input{"query", -1}); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stride := packed.StrideFor(ix.cfg.Dim)
	var q []float32
	if ix.cfg.Metric == umbra.Cosine {
		q = packed.Normalized(query, stride)
	} else {
		q = packed.Padded(query, stride)
	}
	req := &request{ctx: ctx, q: q, k: k, done: make(chan result, 1)}
	c := &ix.batch
	c.mu.Lock()
	if c.running {
		c.queue = append(c.queue, req)
		c.mu.Unlock()
		select {
		case r := <-req.done:
			return req.answer(r)
		case <-ctx.Done():
			req.gone.Store(true)
			// The answer may have arrived at the same moment: prefer it.
			select {
			case r := <-req.done:
				return req.answer(r)
			default:
			}
			return nil, ctx.Err()
		}
	}
	c.running = true
	c.mu.Unlock()
	ix.runBatch([]*request{req})
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.running = false
		c.mu.Unlock()
	} else {
		c.mu.Unlock()
		go ix.drain()
	}
	return req.answer(<-req.done)
}

// answer is what the caller returns for r: its own context's error when
// that ended (a batch cancelled once every caller had gone says so with
// its own error).
func (r *request) answer(res result) ([]umbra.Hit, error) {
	if res.err != nil {
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
	}
	return res.hits, res.err
}

// drain runs the queued searches, batch by batch, until none is left.
func (ix *Index) drain() {
	c := &ix.batch
	limit := ix.batchLimit()
	for {
		c.mu.Lock()
		if wait := ix.cfg.Coalesce.Wait; wait > 0 && len(c.queue) < limit {
			c.mu.Unlock()
			time.Sleep(wait)
			c.mu.Lock()
		}
		batch, rest := takeBatch(c.queue, limit)
		c.queue = rest
		if len(batch) == 0 && len(rest) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if len(batch) > 0 {
			ix.runBatch(batch)
		}
	}
}

// takeBatch takes from queue, in order, up to limit live requests with the
// first live request's k and select path (gpu.WithSelectPath); it drops
// requests whose caller has gone and returns the rest, order kept.
func takeBatch(queue []*request, limit int) (batch, rest []*request) {
	k, path := 0, gpu.SelectAuto
	for _, r := range queue {
		switch {
		case r.gone.Load():
		case k == 0 || (r.k == k && gpu.SelectPathOf(r.ctx) == path && len(batch) < limit):
			k, path = r.k, gpu.SelectPathOf(r.ctx)
			batch = append(batch, r)
		default:
			rest = append(rest, r)
		}
	}
	return batch, rest
}

// runBatch answers a batch of requests with one batched search and hands
// each caller its own hits. The search's context ends when every caller's
// has.
func (ix *Index) runBatch(batch []*request) {
	c := &ix.batch
	if ix.test != nil && ix.test.beforeBatch != nil {
		ix.test.beforeBatch(len(batch))
	}
	c.batches.Add(1)
	c.queries.Add(int64(len(batch)))
	// The batch's callers share a select path (takeBatch), which it keeps.
	ctx, cancel := context.WithCancel(gpu.WithSelectPath(context.Background(), gpu.SelectPathOf(batch[0].ctx)))
	defer cancel()
	left := atomic.Int32{}
	left.Store(int32(len(batch)))
	qs := make([][]float32, len(batch))
	for i, r := range batch {
		qs[i] = r.q
		stop := context.AfterFunc(r.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	all, err := ix.searchPrepared(ctx, qs, batch[0].k)
	for i, r := range batch {
		if err != nil {
			r.done <- result{err: err}
			continue
		}
		r.done <- result{hits: all[i]}
	}
}

// searchPrepared searches prepared queries (unfiltered) under the read
// lock; a panic below becomes an error.
func (ix *Index) searchPrepared(ctx context.Context, qs [][]float32, k int) (all [][]umbra.Hit, err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return nil, umbra.ErrClosed
	}
	if err := ix.mapped.check(); err != nil {
		return nil, err
	}
	mask, _ := ix.rid.mask(&searchOptions{}, nil)
	return ix.mappedAnswer(ix.searchMany(ctx, qs, k, mask, false))
}
