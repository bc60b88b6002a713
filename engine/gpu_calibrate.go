//go:build cgo && !nogpu

package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/umbravec/umbra/fallback"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/shaders"
)

// calibrationRows × calibrationDim float32 is the slab Auto times both
// paths on: 32 MiB, large enough that scan rate dominates latency on a CPU
// and small enough to cost well under a second once per process.
const (
	calibrationRows = 8192
	calibrationDim  = 1024
)

var calibrationSlab = sync.OnceValue(func() *packed.Slab { return syntheticSlab(calibrationRows, calibrationDim) })

// syntheticSlab returns rows × dim values in [-1, 1) from a fixed xorshift
// sequence: data to time a device on, where only the size matters.
func syntheticSlab(rows, dim int) *packed.Slab {
	s := packed.NewSlab(dim)
	flat := make([]float32, rows*dim)
	x := uint32(2463534242)
	for i := range flat {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		flat[i] = float32(x)/float32(1<<32)*2 - 1
	}
	s.AppendFlat(flat, false)
	return s
}

// medianOf runs f n times and returns the median duration.
func medianOf(n int, f func() error) (time.Duration, error) {
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[n/2], nil
}

var cpuRate = sync.OnceValues(func() (float64, error) {
	s := calibrationSlab()
	view := fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride}
	q := s.PaddedRow(1)
	d, err := medianOf(5, func() error {
		_, err := fallback.Search(context.Background(), view, q, 10, fallback.Dot, 0)
		return err
	})
	if err != nil {
		return 0, err
	}
	return float64(s.Bytes()) / d.Seconds(), nil
})

// calibrate measures, once per device, what Routing needs: the latency of a
// search on a one-row index and the scan rate of a real search on the
// calibration slab, next to the fallback's rate on the same slab.
func (d *gpuDevice) calibrate() (*Routing, error) {
	d.routeOnce.Do(func() {
		r := &Routing{}
		d.routeErr = func() error {
			var err error
			if r.CPUBytesPerSec, err = cpuRate(); err != nil {
				return err
			}
			ctx := context.Background()
			s := calibrationSlab()
			tiny := packed.NewSlab(calibrationDim)
			tiny.Append([][]float32{s.Row(0)}, false)
			for _, c := range []struct {
				slab *packed.Slab
				out  *time.Duration
			}{{tiny, &r.GPULatency}, {s, new(time.Duration)}} {
				g, err := newGPUIndex(d, c.slab.Stride, shaders.MetricDot, 0)
				if err != nil {
					return err
				}
				defer g.release()
				if err := g.upload(ctx, c.slab, 0); err != nil {
					return err
				}
				q := [][]float32{c.slab.PaddedRow(0)}
				if _, err := g.search(ctx, q, 10, c.slab.Rows); err != nil {
					return err
				}
				if *c.out, err = medianOf(5, func() error {
					_, err := g.search(ctx, q, 10, c.slab.Rows)
					return err
				}); err != nil {
					return err
				}
				if c.slab == s {
					scan := max(*c.out-r.GPULatency, time.Microsecond)
					r.GPUBytesPerSec = float64(s.Bytes()) / scan.Seconds()
				}
			}
			return nil
		}()
		d.routing = r
	})
	return d.routing, d.routeErr
}

func (g *wgpuIndex) routing() (*Routing, error) { return g.dev.calibrate() }

func (g *wgpuIndex) floor(ctx context.Context) (time.Duration, int64, string, error) {
	return g.readFloor(ctx)
}
