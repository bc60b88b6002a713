package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/float16"
)

func (*convertCmd) Help() string {
	return `Read the matrix in IN and write it to OUT, each in the format its extension
names: .npy (2-D, float32 or float16) or .fvecs (float32); IN may also be
.bvecs (uint8). Values are copied as they are, NaN and infinities included.
OUT is replaced atomically (a temporary file beside it, fsynced, renamed),
so IN and OUT may be the same file; an existing OUT keeps its permissions
and a symlink OUT is written through.`
}

func (*convertCmd) Examples() []string {
	return []string{
		"umbra convert sift_base.fvecs sift_base.npy",
		"umbra convert embeddings.npy embeddings-f16.npy --dtype f16",
	}
}

type convertCmd struct {
	Dtype choice `name:"dtype" choices:"f32,f16" default:"f32" placeholder:"T" help:"the element type of an .npy OUT: f32 or f16; .fvecs holds only f32. Writing f16 rounds to nearest even and fails, naming the row, if a finite value is beyond float16's ±65504"`
	In    string `arg:"" optional:"" name:"in" help:"the file to read: .npy, .fvecs or .bvecs"`
	Out   string `arg:"" optional:"" name:"out" help:"the file to write: .npy or .fvecs"`
	// Extra catches a third argument, to say how many were given.
	Extra []string `arg:"" optional:"" hidden:""`
}

func (c *convertCmd) Validate() error {
	n := len(c.Extra)
	for _, a := range []string{c.In, c.Out} {
		if a != "" {
			n++
		}
	}
	if n != 2 {
		return usagef("want IN and OUT, got %s", plural(n, "argument"))
	}
	if err := checkExt(c.In, ".npy", ".fvecs", ".bvecs"); err != nil {
		return err
	}
	if err := checkExt(c.Out, ".npy", ".fvecs"); err != nil {
		return err
	}
	if c.Dtype == "f16" && strings.EqualFold(filepath.Ext(c.Out), ".fvecs") {
		return usagef("--dtype f16: .fvecs holds float32 only (write an .npy to get float16)")
	}
	return nil
}

func (c *convertCmd) Run(ctx context.Context, e *env) error {
	in, out := c.In, c.Out
	if err := notDir("OUT", out); err != nil {
		return err
	}
	m, err := loadMatrix(ctx, e, "IN", in)
	if err != nil {
		return err
	}
	npyDtype, kind := "<f4", "float32"
	if c.Dtype == "f16" {
		npyDtype, kind = "<f2", "float16"
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
	fmt.Fprintf(e.stdout, "wrote %s: %d rows of dimension %d, %s\n", out, m.Rows, m.Dim, kind)
	return nil
}

// plural says "1 argument", "3 arguments".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// checkExt refuses a file whose extension is not one of exts.
func checkExt(path string, exts ...string) error {
	if slices.Contains(exts, strings.ToLower(filepath.Ext(path))) {
		return nil
	}
	return usagef("%s: unknown file type: want a %s or %s extension", path,
		strings.Join(exts[:len(exts)-1], ", "), exts[len(exts)-1])
}

// checkFloat16Range refuses a finite value that float16 would turn into an
// infinity: a silent Inf would later fail search far from its cause.
func checkFloat16Range(m *host.Matrix) error {
	for i, x := range m.Data {
		f := float64(x)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			continue
		}
		if h := float16.Bits(x); h&0x7fff == 0x7c00 {
			return fmt.Errorf("row %d, column %d: %g is beyond float16's range (±65504); keep --dtype f32", i/m.Dim, i%m.Dim, x)
		}
	}
	return nil
}
