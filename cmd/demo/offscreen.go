//go:build cgo && !nogpu

package main

import (
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
)

// runOffscreen renders o.frames frames into a texture, the query following
// the scripted path, and writes the last one to o.png. No window, display
// or surface is involved.
func runOffscreen(o options, stdout, stderr io.Writer) error {
	inst, err := newInstance(o.backend)
	if err != nil {
		return err
	}
	d, err := newDemo(o, inst, nil, o.width, o.height, stderr)
	if err != nil {
		return err
	}
	defer d.close()
	for f := 0; f < o.frames; f++ {
		x, y := d.path.at(d.path.frameStop(f, o.frames))
		err := guard("frame", func() error {
			enc, err := d.s.device.TryCreateCommandEncoder(nil)
			if err != nil {
				return err
			}
			defer enc.Release()
			if err := d.step(enc, x, y); err != nil {
				return err
			}
			return d.s.submit(enc)
		})
		if err != nil {
			return fmt.Errorf("frame %d: %w", f, err)
		}
	}
	img, err := d.sc.readTarget()
	if err != nil {
		return err
	}
	if err := writePNG(o.png, img); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%d×%d) · %s\n", o.png, o.width, o.height, d.summary())
	return nil
}

// writePNG writes img to path (best compression: the README carries one).
// It writes beside path and renames, so a script waiting for the file
// never reads half of it.
func writePNG(path string, img image.Image) error {
	tmp := path + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(f, img); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
