//go:build cgo && !nogpu

package gpu

import (
	"context"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
)

// Calibrate measures, once per device, what Auto's routing needs from the
// GPU: the latency of a search on a one-row index, and the scan rate of a
// real search on CalibrationSlab with that latency removed.
func (d *Device) Calibrate() (latency time.Duration, bytesPerSec float64, err error) {
	d.routeOnce.Do(func() {
		d.routeErr = func() error {
			ctx := context.Background()
			s := CalibrationSlab()
			tiny := packed.NewSlab(CalibrationDim)
			tiny.Append([][]float32{s.Row(0)}, false)
			for _, c := range []struct {
				slab *packed.Slab
				out  *time.Duration
			}{{tiny, &d.latency}, {s, new(time.Duration)}} {
				g, err := d.NewIndex(c.slab.Stride, core.Dot, 0)
				if err != nil {
					return err
				}
				defer g.Release()
				if err := g.Upload(ctx, c.slab, 0, nil, nil); err != nil {
					return err
				}
				q := [][]float32{c.slab.PaddedRow(0)}
				if _, err := g.Search(ctx, q, 10, c.slab.Rows, nil, nil); err != nil {
					return err
				}
				if *c.out, err = MedianOf(5, func() error {
					_, err := g.Search(ctx, q, 10, c.slab.Rows, nil, nil)
					return err
				}); err != nil {
					return err
				}
				if c.slab == s {
					scan := max(*c.out-d.latency, time.Microsecond)
					d.bytesPerSec = float64(s.Bytes()) / scan.Seconds()
				}
			}
			return nil
		}()
	})
	return d.latency, d.bytesPerSec, d.routeErr
}
