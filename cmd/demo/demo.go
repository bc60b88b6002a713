//go:build cgo && !nogpu

package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/engine/ondevice"
)

// demo is what both modes share: the vectors, the device, the umbra index
// on that device, the scene drawn with it, and the layout.
type demo struct {
	o        options
	set      *memorySet
	s        *session
	ix       *ondevice.Index
	sc       *scene
	view     view
	path     queryPath
	q        []float32
	layout   time.Duration // fitting the projection, passes and readbacks
	searches []time.Duration
	log      io.Writer
}

// newDemo builds everything for a width×height picture. surface, when not
// nil, restricts the adapter to those that can present to it.
func newDemo(o options, inst *wgpu.Instance, surface *wgpu.Surface, width, height int, log io.Writer) (d *demo, err error) {
	d = &demo{o: o, log: log}
	defer func() {
		if err != nil {
			d.close()
			d = nil
		}
	}()
	start := time.Now()
	if o.data != "" {
		if d.set, err = loadSet(o.data, o.n); err != nil {
			return d, err
		}
	} else {
		d.set = syntheticSet(o.n, o.dim, o.seed)
	}
	d.logf("vectors: %d × %d, %s (%v)", d.set.rows, d.set.dim, d.set.source, time.Since(start).Round(time.Millisecond))
	d.q = make([]float32, d.set.dim)

	if d.s, err = openSession(inst, o, surface); err != nil {
		return d, err
	}
	d.logf("adapter: %s, driver %s", d.s.info.String(), d.s.info.Driver)
	if err = checkSceneSize(d.s, d.set); err != nil {
		return d, err
	}

	start = time.Now()
	if d.ix, err = ondevice.New(context.Background(), engine.Config{Dim: d.set.dim, Metric: umbra.Cosine}, d.s.adapter, d.s.device, &d.s.limits); err != nil {
		return d, fmt.Errorf("umbra index on %s: %w", d.s.info.String(), err)
	}
	if _, err = d.ix.Add(context.Background(), umbra.Flat(d.set.data, d.ix.Dim())); err != nil {
		return d, fmt.Errorf("adding the vectors to the index: %w", err)
	}
	d.logf("index: %d rows resident on the device (%v)", d.ix.Len(), time.Since(start).Round(time.Millisecond))

	if d.sc, err = newScene(d.s, d.set, d.ix, width, height, max(o.k, 1)); err != nil {
		return d, err
	}
	d.logf("scene: drawing from the index's %d resident chunk(s)", len(d.sc.chunks))
	start = time.Now()
	if _, err = fitProjection(d.sc, d.set.rows, d.set.dim, o.iters, o.seed); err != nil {
		return d, fmt.Errorf("2-D layout: %w", err)
	}
	if err = d.sc.readPositions(); err != nil {
		return d, err
	}
	d.layout = time.Since(start)
	d.logf("layout: %d power-iteration steps on the GPU (%v)", o.iters, d.layout.Round(time.Millisecond))
	return d, d.relayout(width, height)
}

func (d *demo) logf(format string, args ...any) {
	if d.o.verbose && d.log != nil {
		fmt.Fprintf(d.log, "demo: "+format+"\n", args...)
	}
}

// relayout fits the picture to a new target size.
func (d *demo) relayout(width, height int) error {
	if err := d.sc.resize(width, height); err != nil {
		return err
	}
	d.view = fitView(d.sc.pos, width, height)
	d.path = newQueryPath(d.sc.pos, d.view, 6, d.o.seed)
	return nil
}

// step forms the query at layout point (x, y), searches the index for its
// k nearest, has the index score every row for the colouring (left on the
// device) and records the frame's drawing into enc.
func (d *demo) step(enc *wgpu.CommandEncoder, x, y float32) error {
	copy(d.q, d.set.row(nearestRow(d.sc.pos, x, y)))
	// Wait for the previous frame so the search is timed on its own.
	if err := guard("wait for the device", func() error { d.s.device.Poll(true, nil); return nil }); err != nil {
		return err
	}
	start := time.Now()
	hits, err := d.ix.Search(context.Background(), d.q, d.o.k)
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	d.searches = append(d.searches, time.Since(start))
	scores, err := d.ix.ScoreInto(context.Background(), d.q)
	if err != nil {
		return fmt.Errorf("scoring every row: %w", err)
	}
	rings := make([]int, len(hits))
	for i, h := range hits {
		rings[i] = int(h.ID)
	}
	px, py := d.view.toPixel(x, y)
	return guard("record frame", func() error {
		return d.sc.encode(enc, frameInput{scores: scores, rings: rings, view: d.view, cursor: [2]float32{px, py}})
	})
}

// searchStats returns the median and minimum of the last n search times
// (all when n is 0).
func (d *demo) searchStats(n int) (median, least time.Duration) {
	s := d.searches
	if n > 0 && len(s) > n {
		s = s[len(s)-n:]
	}
	if len(s) == 0 {
		return 0, 0
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return s[len(s)/2], s[0]
}

// close releases the scene before the index whose buffers it binds.
func (d *demo) close() {
	if d.sc != nil {
		d.sc.release()
	}
	if d.ix != nil {
		d.ix.Close()
	}
	if d.s != nil {
		d.s.release()
	}
}

func (d *demo) summary() string {
	med, least := d.searchStats(0)
	return fmt.Sprintf("%s · %d × %d · k=%d · %d frames · search median %.2f ms (min %.2f) · layout %d steps in %v",
		d.s.info.String(), d.set.rows, d.set.dim, d.o.k, len(d.searches), ms(med), ms(least), d.o.iters, d.layout.Round(time.Millisecond))
}

func ms(t time.Duration) float64 { return float64(t) / float64(time.Millisecond) }
