package gpu

import (
	"context"
	"time"

	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/shaders"
)

// Floor times one pass of read.wgsl over every resident chunk: the
// device's memory-bandwidth floor for a scan of this slab, as the time, the
// bytes read and the clock. A first pass warms the pipeline and caches; the
// second is timed with GPU timestamps around its dispatches where the
// device has them (clock "gpu", as a traced search's kernels are), else on
// the wall clock from submit to done ("wall").
func (g *Index) Floor(ctx context.Context) (time.Duration, int64, string, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, "", err
	}
	g.dev.mu.Lock()
	defer g.dev.mu.Unlock()
	var took time.Duration
	var bytes int64
	clock := "wall"
	var bufs []gpuplan.Buffer
	defer func() {
		for _, b := range bufs {
			g.free(b)
		}
	}()
	err := g.dev.scoped("read floor", func() error {
		p, err := g.dev.readPipeline()
		if err != nil {
			return err
		}
		sums, err := g.alloc("umbra floor sums", shaders.ReadGroups*16, gpuplan.Storage)
		if err != nil {
			return err
		}
		bufs = append(bufs, sums)
		var list []gpuplan.Dispatch
		for _, ch := range g.chunks {
			if ch.rows == 0 {
				continue
			}
			words := uint64(ch.rows) * g.rowBytes() / 16
			params, err := g.alloc("umbra floor params", shaders.ReadParamsBytes, gpuplan.Uniform|gpuplan.CopyDst)
			if err != nil {
				return err
			}
			bufs = append(bufs, params)
			if err := g.api().Write(params, 0, shaders.ReadParams(uint32(words))); err != nil {
				return err
			}
			list = append(list, gpuplan.Dispatch{Pipe: p, Buffers: []gpuplan.Buffer{ch.data, sums, params}, X: shaders.ReadGroups, Y: 1, Z: 1})
			bytes += int64(words) * 16
		}
		if _, err := g.api().Submit(gpuplan.Work{Pass: list, Wait: true}, false); err != nil {
			return err
		}
		start := time.Now()
		done, err := g.api().Submit(gpuplan.Work{Pass: list, Wait: true, Time: g.dev.timestamps}, false)
		if err != nil {
			return err
		}
		took = time.Since(start)
		if d := done.GPU; d > 0 && d <= took {
			took, clock = d, "gpu"
		}
		return nil
	})
	return took, bytes, clock, err
}
