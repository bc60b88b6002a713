package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/umbravec/umbra/host"
)

var convertCommand = &command{
	name:     "convert",
	summary:  "convert a vector file between .npy (float32, float16) and .fvecs",
	synopsis: "convert IN OUT [--dtype f32|f16]",
	help: `
Read the matrix in IN and write it to OUT, each in the format its extension
names: .npy (2-D, float32 or float16) or .fvecs (float32). Values are copied
as they are, NaN and infinities included. OUT is replaced atomically, so IN
and OUT may be the same file.

Flags:
  --dtype T   the element type of an .npy OUT: f32 (default) or f16; .fvecs
              holds only f32. Writing f16 rounds to nearest even and fails,
              naming the row, if a finite value is beyond float16's ±65504.`,
	example: `
umbra convert sift_base.fvecs sift_base.npy
umbra convert embeddings.npy embeddings-f16.npy --dtype f16`,
	setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
		dtype := newChoice("f32", "f32", "f16")
		fs.Var(dtype, "dtype", "element type")
		return func(ctx context.Context, e *env, args []string) error {
			if len(args) != 2 {
				return usagef("want IN and OUT, got %d arguments", len(args))
			}
			in, out := args[0], args[1]
			for _, p := range args {
				if err := checkExt(p); err != nil {
					return err
				}
			}
			isFvecs := strings.EqualFold(filepath.Ext(out), ".fvecs")
			if dtype.value == "f16" && isFvecs {
				return usagef("--dtype f16: .fvecs holds float32 only (write an .npy to get float16)")
			}
			m, err := loadMatrix(e, "IN", in)
			if err != nil {
				return err
			}
			npyDtype := "<f4"
			if dtype.value == "f16" {
				npyDtype = "<f2"
				if err := checkFloat16Range(m); err != nil {
					return fmt.Errorf("%s: %v", in, err)
				}
			}
			done := e.progress.step("writing " + out)
			err = host.WriteMatrixFile(out, m, npyDtype)
			done()
			if err != nil {
				return fmt.Errorf("OUT: %s", cause(err))
			}
			kind := "float32"
			if dtype.value == "f16" {
				kind = "float16"
			}
			fmt.Fprintf(e.stdout, "wrote %s: %d rows of dimension %d, %s\n", out, m.Rows, m.Dim, kind)
			return nil
		}
	},
}

func checkExt(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy", ".fvecs":
		return nil
	}
	return usagef("%s: unknown file type: want a .npy or .fvecs extension", path)
}

// checkFloat16Range refuses a finite value that float16 would turn into an
// infinity: a silent Inf would later fail search far from its cause.
func checkFloat16Range(m *host.Matrix) error {
	for i, x := range m.Data {
		f := float64(x)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			continue
		}
		if h := host.Float16Bits(x); h&0x7fff == 0x7c00 {
			return fmt.Errorf("row %d, column %d: %g is beyond float16's range (±65504); keep --dtype f32", i/m.Dim, i%m.Dim, x)
		}
	}
	return nil
}
