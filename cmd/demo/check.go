package main

import (
	"fmt"
	"image"
	"image/color"
	_ "image/png"
	"os"
)

// ringColor is the colour of the top-k rings in draw.wgsl (RING): exact in
// 8 bits and absent from the colour map, so a screenshot can be checked for
// the rings.
var ringColor = color.NRGBA{R: 0, G: 255, B: 255, A: 255}

// pictureStats is what a check of a screenshot looks at.
type pictureStats struct {
	width, height int
	colours       int     // distinct RGB colours
	ringPixels    int     // pixels of exactly ringColor
	commonShare   float64 // share of the most common colour (the background)
}

func (s pictureStats) String() string {
	return fmt.Sprintf("%d×%d, %d colours, %d ring pixels, %.1f%% background", s.width, s.height, s.colours, s.ringPixels, 100*s.commonShare)
}

// Thresholds of a good picture: many colours (the colour map over thousands
// of points), not mostly one colour, and at least one whole ring.
const (
	minColours    = 64
	minRingPixels = 40
	maxCommon     = 0.97
)

func measure(img image.Image) pictureStats {
	b := img.Bounds()
	counts := map[uint32]int{}
	s := pictureStats{width: b.Dx(), height: b.Dy()}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			counts[uint32(c.R)<<16|uint32(c.G)<<8|uint32(c.B)]++
			if c.R == ringColor.R && c.G == ringColor.G && c.B == ringColor.B {
				s.ringPixels++
			}
		}
	}
	s.colours = len(counts)
	most := 0
	for _, n := range counts {
		most = max(most, n)
	}
	if n := s.width * s.height; n > 0 {
		s.commonShare = float64(most) / float64(n)
	}
	return s
}

// checkPicture says what is wrong with a screenshot, or nil.
func checkPicture(s pictureStats) error {
	switch {
	case s.colours < minColours:
		return fmt.Errorf("blank or nearly so: %s (want at least %d colours)", s, minColours)
	case s.commonShare > maxCommon:
		return fmt.Errorf("mostly one colour: %s", s)
	case s.ringPixels < minRingPixels:
		return fmt.Errorf("no top-k ring colour #00ffff: %s (want at least %d ring pixels)", s, minRingPixels)
	}
	return nil
}

// checkFile runs checkPicture on an image file (PNG).
func checkFile(path string) (pictureStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return pictureStats{}, err
	}
	defer f.Close()
	img, _, err := image.Decode(f)
	if err != nil {
		return pictureStats{}, fmt.Errorf("%s: %w", path, err)
	}
	s := measure(img)
	if err := checkPicture(s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
