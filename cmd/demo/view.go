package main

import (
	"math"
	"math/rand/v2"
	"slices"
)

// view maps layout (data) coordinates to pixels: origin top-left, y down,
// as glfw reports the cursor.
type view struct {
	width, height int
	center        [2]float32 // layout point at the middle of the image
	scale         float32    // pixels per layout unit
}

// fitView frames the layout positions pos (2 per row) in a width×height
// image. It frames the 0.5–99.5 percentile box so a few outliers do not
// shrink the picture, with a margin for the rings.
func fitView(pos []float32, width, height int) view {
	n := len(pos) / 2
	xs, ys := make([]float32, n), make([]float32, n)
	for i := 0; i < n; i++ {
		xs[i], ys[i] = pos[2*i], pos[2*i+1]
	}
	slices.Sort(xs)
	slices.Sort(ys)
	q := func(s []float32, f float64) float32 { return s[min(len(s)-1, int(f*float64(len(s)-1)+0.5))] }
	x0, x1 := q(xs, 0.005), q(xs, 0.995)
	y0, y1 := q(ys, 0.005), q(ys, 0.995)
	v := view{width: width, height: height, center: [2]float32{(x0 + x1) / 2, (y0 + y1) / 2}}
	margin := float32(0.06 * float64(min(width, height)))
	sx := (float32(width) - 2*margin) / max(x1-x0, 1e-6)
	sy := (float32(height) - 2*margin) / max(y1-y0, 1e-6)
	v.scale = min(sx, sy)
	return v
}

func (v view) toPixel(x, y float32) (float32, float32) {
	return float32(v.width)/2 + (x-v.center[0])*v.scale, float32(v.height)/2 - (y-v.center[1])*v.scale
}

func (v view) toLayout(px, py float32) (float32, float32) {
	return v.center[0] + (px-float32(v.width)/2)/v.scale, v.center[1] - (py-float32(v.height)/2)/v.scale
}

// nearestRow returns the row drawn nearest to the layout point (x, y); its
// vector is the frame's query. (A blend of several neighbours would change
// more smoothly under the cursor, but the blended rows would crowd the top k
// around the cursor; one row shows its true neighbours, which in 384
// dimensions need not be its neighbours on the map.)
func nearestRow(pos []float32, x, y float32) int {
	best, bestD := 0, float32(math.Inf(1))
	for i := 0; i < len(pos)/2; i++ {
		dx, dy := pos[2*i]-x, pos[2*i+1]-y
		if d := dx*dx + dy*dy; d < bestD {
			best, bestD = i, d
		}
	}
	return best
}

// queryPath is the scripted cursor: a smooth tour through the layout
// positions of a few rows, used for --png and while the cursor is away from
// the window.
type queryPath struct {
	stops [][2]float32
}

// newQueryPath picks stops rows, each far from the previous stop, from a
// seeded generator. pos holds 2 coordinates per row.
func newQueryPath(pos []float32, v view, stops int, seed int64) queryPath {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x70617468))
	n := len(pos) / 2
	far := 0.25 * float32(min(v.width, v.height)) / v.scale
	var p queryPath
	// density counts the rows within a few pixels of row i: stops prefer
	// the thick of a cluster.
	near := 0.03 * float32(min(v.width, v.height)) / v.scale
	density := func(i int) int {
		c := 0
		for r := 0; r < n; r++ {
			dx, dy := pos[2*r]-pos[2*i], pos[2*r+1]-pos[2*i+1]
			if dx*dx+dy*dy < near*near {
				c++
			}
		}
		return c
	}
	for len(p.stops) < stops {
		var pick [2]float32
		for try := 0; try < 32; try++ {
			i := rng.IntN(n)
			best := density(i)
			for k := 0; k < 4; k++ {
				j := rng.IntN(n)
				if d := density(j); d > best {
					i, best = j, d
				}
			}
			pick = [2]float32{pos[2*i], pos[2*i+1]}
			px, py := v.toPixel(pick[0], pick[1])
			inside := px > 0.1*float32(v.width) && px < 0.9*float32(v.width) && py > 0.1*float32(v.height) && py < 0.9*float32(v.height)
			if !inside {
				continue
			}
			if len(p.stops) == 0 {
				break
			}
			last := p.stops[len(p.stops)-1]
			if math.Hypot(float64(pick[0]-last[0]), float64(pick[1]-last[1])) > float64(far) {
				break
			}
		}
		p.stops = append(p.stops, pick)
	}
	return p
}

// at returns the layout point at u ∈ [0, stops−1]: stop ⌊u⌋ eased towards
// the next. u outside the range wraps around, returning to the first stop.
func (p queryPath) at(u float64) (float32, float32) {
	n := float64(len(p.stops))
	u = math.Mod(u, n)
	if u < 0 {
		u += n
	}
	i := int(u)
	f := float32(u - float64(i))
	f = f * f * (3 - 2*f) // smoothstep: rest at each stop
	a, b := p.stops[i], p.stops[(i+1)%len(p.stops)]
	return a[0] + (b[0]-a[0])*f, a[1] + (b[1]-a[1])*f
}

// frameStop maps frame f of frames (f from 0) to a path parameter that ends
// exactly on the last stop, so the final frame of --png rests on a row.
func (p queryPath) frameStop(f, frames int) float64 {
	if frames <= 1 {
		return float64(len(p.stops) - 1)
	}
	return float64(f) / float64(frames-1) * float64(len(p.stops)-1)
}
