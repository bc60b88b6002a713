package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Colours: a palette that stays distinct for colour-blind readers (Okabe–Ito).
var palette = []color.RGBA{
	{0x00, 0x72, 0xb2, 0xff}, // blue
	{0xe6, 0x9f, 0x00, 0xff}, // orange
	{0x00, 0x9e, 0x73, 0xff}, // green
	{0xcc, 0x79, 0xa7, 0xff}, // purple
	{0x56, 0xb4, 0xe9, 0xff}, // sky
	{0xd5, 0x5e, 0x00, 0xff}, // vermilion
}

// WritePlot draws the report as a PNG at path: the group times of every
// tier that ran (a box over the points, log scale, ms) and, with a
// breakdown, its stages as a stacked bar.
func WritePlot(path string, r *Report) error {
	if !strings.EqualFold(filepath.Ext(path), ".png") {
		return fmt.Errorf("plot %q: the file name must end in .png", path)
	}
	times, err := timesPlot(r)
	if err != nil {
		return err
	}
	row := []*plot.Plot{times}
	width := vg.Points(720)
	if r.Breakdown != nil {
		bp, err := breakdownPlot(r.Breakdown)
		if err != nil {
			return err
		}
		row = append(row, bp)
		width = vg.Points(1040)
	}
	height := vg.Points(460)
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(144), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	pad := vg.Points(12)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: pad, PadX: vg.Points(28)}
	if len(row) == 2 {
		// The times panel gets the wider share.
		left := dc
		left.Max.X = dc.Min.X + width*0.64
		right := dc
		right.Min.X = left.Max.X
		row[0].Draw(draw.Crop(left, pad, -pad/2, pad, -pad))
		row[1].Draw(draw.Crop(right, pad, -pad, pad, -pad))
	} else {
		canvases := plot.Align([][]*plot.Plot{row}, tiles, dc)
		row[0].Draw(canvases[0][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot %q: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot %q: %w", path, err)
	}
	return nil
}

// styled sets sans-serif text at sizes that stay readable when the PNG is
// shown scaled down, and a monospaced legend so its columns line up.
func styled(p *plot.Plot) {
	sans := func(f *font.Font, size float64) {
		f.Typeface, f.Variant, f.Size = "Liberation", "Sans", vg.Points(size)
	}
	sans(&p.Title.TextStyle.Font, 11)
	p.Title.Padding = vg.Points(8)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		sans(&a.Label.TextStyle.Font, 10)
		sans(&a.Tick.Label.Font, 9)
	}
	p.Legend.TextStyle.Font.Typeface = "Liberation"
	p.Legend.TextStyle.Font.Variant = "Mono"
	p.Legend.TextStyle.Font.Size = vg.Points(8.5)
}

// timesPlot shows each tier's group times: every group a point, spread
// sideways so equal times stay visible, over a box of their quartiles.
func timesPlot(r *Report) (*plot.Plot, error) {
	p := plot.New()
	styled(p)
	p.Title.Text = fmt.Sprintf("%d×%d %s, k=%d · %d groups, each the min of %d repeats",
		r.N, r.Dim, r.Metric, r.K, r.Runs, r.Repeat)
	p.Y.Label.Text = "time per call (ms, log scale)"
	p.X.Label.Text = "tier · median speed-up over the fallback · median time"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.TickerFunc(logTicks)
	p.Add(plotter.NewGrid())

	var names []string
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, t := range r.Tiers {
		if !t.Ran() || len(t.GroupsMS) == 0 {
			continue
		}
		x := float64(len(names))
		c := palette[len(names)%len(palette)]
		name := t.Name
		if s := t.SpeedupVsFallback; s != nil {
			name += fmt.Sprintf("\n%s× fallback", ratio(s.Median))
		}
		name += fmt.Sprintf("\n%s ms", ms(*t.MedianMS))
		names = append(names, name)
		box, err := plotter.NewBoxPlot(vg.Points(34), x, plotter.Values(t.GroupsMS))
		if err != nil {
			return nil, fmt.Errorf("plot: %w", err)
		}
		box.FillColor = color.NRGBA{c.R, c.G, c.B, 0x38}
		box.BoxStyle.Color = c
		box.WhiskerStyle.Color = c
		box.MedianStyle.Color = c
		box.MedianStyle.Width = vg.Points(1.5)
		box.GlyphStyle.Radius = 0 // the points below show outliers
		pts := make(plotter.XYs, len(t.GroupsMS))
		for i, v := range t.GroupsMS {
			// A fixed spread (golden-ratio sequence): the same report
			// draws the same picture.
			off := math.Mod(float64(i)*0.618033988749895, 1) - 0.5
			pts[i] = plotter.XY{X: x + 0.28*off, Y: v}
			lo, hi = min(lo, v), max(hi, v)
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, fmt.Errorf("plot: %w", err)
		}
		sc.GlyphStyle.Color = c
		sc.GlyphStyle.Radius = vg.Points(2.2)
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		p.Add(box, sc)
	}
	if len(names) == 0 {
		p.Title.Text += "\n(no tier ran)"
		p.Y.Scale = plot.LinearScale{}
		p.Y.Tick.Marker = plot.DefaultTicks{}
		return p, nil
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	// Pad the log range so points never sit on the frame.
	p.Y.Min, p.Y.Max = lo/1.25, hi*1.25
	return p, nil
}

// logTicks labels 1, 2 and 5 times each power of ten in range (every
// integer multiple when the range is narrow) and marks the rest as minor
// ticks, so a range inside one decade still has labels.
func logTicks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	narrow := hi/lo < 4
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		base := math.Pow(10, e)
		for m := 1; m <= 9; m++ {
			v := base * float64(m)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 || narrow {
				t.Label = tickLabel(v)
			}
			ticks = append(ticks, t)
		}
	}
	labelled := 0
	for _, t := range ticks {
		if t.Label != "" {
			labelled++
		}
	}
	if labelled < 2 {
		// Narrower than the gap between two labels: label the ends.
		ticks = append(ticks, plot.Tick{Value: lo, Label: tickLabel(lo)}, plot.Tick{Value: hi, Label: tickLabel(hi)})
	}
	return ticks
}

// tickLabel prints a time in ms without exponents: 1000, 20, 0.05.
func tickLabel(v float64) string {
	s := strconv.FormatFloat(v, 'g', 3, 64)
	if strings.ContainsRune(s, 'e') && v >= 1 {
		s = strconv.FormatFloat(v, 'f', 0, 64)
	}
	return s
}

// breakdownPlot stacks the breakdown's stage medians in one bar, bottom up
// in the order the path runs them.
func breakdownPlot(b *Breakdown) (*plot.Plot, error) {
	p := plot.New()
	styled(p)
	p.Title.Text = fmt.Sprintf("where the %s path's time goes (%s)\nmedians of %d traced calls", b.Tier, strings.ToUpper(b.Backend), b.Reps)
	p.Y.Label.Text = "ms per call"
	p.Add(plotter.NewGrid())
	var prev *plotter.BarChart
	stages := b.stages()
	for i, s := range stages {
		bar, err := plotter.NewBarChart(plotter.Values{s.MS}, vg.Points(70))
		if err != nil {
			return nil, fmt.Errorf("plot: %w", err)
		}
		bar.Color = palette[i%len(palette)]
		bar.LineStyle.Width = vg.Points(0.5)
		bar.LineStyle.Color = color.White
		if prev != nil {
			bar.StackOn(prev)
		}
		prev = bar
		p.Add(bar)
	}
	// Legend top to bottom in the order the bar shows the stages.
	for i := len(stages) - 1; i >= 0; i-- {
		s := stages[i]
		thumb, _ := plotter.NewBarChart(plotter.Values{1}, vg.Points(10))
		thumb.Color = palette[i%len(palette)]
		thumb.LineStyle.Width = 0
		p.Legend.Add(fmt.Sprintf("%-8s %8s ms %7s", s.Name, ms(s.MS), pct(b.Percent[s.Name])), thumb)
	}
	p.Legend.Top = true
	p.Legend.Left = false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(6), -vg.Points(4)
	p.Legend.ThumbnailWidth = vg.Points(10)
	p.NominalX(fmt.Sprintf("%s ms end to end", ms(b.TotalMS)))
	p.X.Min, p.X.Max = -0.5, 2.6 // room on the right for the legend
	p.Y.Min = 0
	return p, nil
}
