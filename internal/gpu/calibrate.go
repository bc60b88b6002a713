package gpu

import (
	"context"
	"fmt"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
)

// Calibrate measures, once per device, what Auto's routing needs from the
// GPU: the latency of a search on a one-row index, and the scan rate of a
// real search on a slab past the device's last-level cache (CalibrationSlab
// on a software adapter) with that latency removed.
func (d *Device) Calibrate() (latency time.Duration, bytesPerSec float64, err error) {
	d.routeOnce.Do(func() {
		// A hardware adapter is timed on a slab past its last-level cache
		// (timingRows), or, if that cannot be allocated, on
		// CalibrationSlab as a software adapter is.
		if rows := d.timingRows(CalibrationDim, CalibrationRows); rows > CalibrationRows {
			if d.routeErr = d.calibrate(packed.Synthetic(rows, CalibrationDim)); d.routeErr == nil {
				return
			}
		}
		d.routeErr = d.calibrate(CalibrationSlab())
	})
	return d.latency, d.bytesPerSec, d.routeErr
}

// calibrate measures Calibrate's latency and scan rate with s.
func (d *Device) calibrate(s *packed.Slab) error {
	if d.failTiming != nil && d.failTiming(s.Rows) {
		return fmt.Errorf("%w: no memory for %d rows (test)", ErrFailed, s.Rows)
	}
	ctx := context.Background()
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
}
