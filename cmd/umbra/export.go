package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
)

func (*exportCmd) Help() string {
	return `Write every vector STORE holds to --out as a 2-D float32 .npy, in
ascending ID order, and with --ids-out their IDs, in the same order, as a
1-D uint64 .npy. The vectors are as the store keeps them: under cosine
each is scaled to unit length, so an export is not the file that was added.
Both files are written atomically (a temporary file beside each, fsynced,
renamed). Export opens the store read-only, without its lock, so it
works while another process writes the store, and exports what that
process had acknowledged by the time export read it.`
}

func (*exportCmd) Examples() []string {
	return []string{"umbra export docs.umbra --out docs-vectors.npy --ids-out docs-ids.npy"}
}

type exportCmd struct {
	Store  string   `arg:"" optional:"" name:"store" help:"the store to export"`
	Out    string   `name:"out" placeholder:"FILE.npy" help:"the vectors (required)"`
	IDsOut string   `name:"ids-out" placeholder:"FILE.npy" help:"the IDs"`
	Extra  []string `arg:"" optional:"" hidden:""`
}

func (c *exportCmd) Validate() error {
	switch {
	case c.Store == "":
		return usagef("missing STORE: umbra export STORE --out FILE.npy")
	case len(c.Extra) > 0:
		return usagef("unexpected argument %q", c.Extra[0])
	case c.Out == "":
		return usagef("missing required flag --out")
	case c.IDsOut != "" && c.IDsOut == c.Out:
		return usagef("--out and --ids-out name the same file")
	}
	for _, f := range [][2]string{{"--out", c.Out}, {"--ids-out", c.IDsOut}} {
		if f[1] != "" && !strings.EqualFold(filepath.Ext(f[1]), ".npy") {
			return usagef("%s %s: export writes .npy files: want a .npy extension", f[0], f[1])
		}
	}
	return nil
}

func (c *exportCmd) Run(ctx context.Context, e *env) (err error) {
	for _, f := range [][2]string{{"--out", c.Out}, {"--ids-out", c.IDsOut}} {
		if f[1] == "" {
			continue
		}
		if err := notDir(f[0], f[1]); err != nil {
			return err
		}
		if err := notStoreFile(f[0], f[1], c.Store); err != nil {
			return err
		}
	}
	ix, err := openStoreReadOnly(ctx, e, c.Store, engine.Config{Device: engine.CPU})
	if err != nil {
		return err
	}
	defer closeStore(c.Store, ix, &err)
	ids := ix.IDs()
	m := &host.Matrix{Rows: len(ids), Dim: ix.Dim(), Data: make([]float32, 0, len(ids)*ix.Dim())}
	for _, id := range ids {
		v, err := ix.Get(id)
		if err != nil {
			return fmt.Errorf("store %s: %s", c.Store, cause(err))
		}
		m.Data = append(m.Data, v...)
	}
	done := e.progress.step("writing " + c.Out)
	err = host.WriteMatrixFile(c.Out, m, "<f4")
	done()
	if err != nil {
		return fmt.Errorf("--out: %s", cause(err))
	}
	if c.IDsOut != "" {
		err := host.WriteFileAtomic(c.IDsOut, 0o644, func(w io.Writer) error { return writeIDsNPY(w, ids) })
		if err != nil {
			return fmt.Errorf("--ids-out: %s", cause(err))
		}
	}
	fmt.Fprintf(e.stdout, "wrote %s: %d vectors of dimension %d, float32", c.Out, m.Rows, m.Dim)
	if ix.Metric() == engine.Cosine {
		fmt.Fprint(e.stdout, " (unit length: the store keeps cosine vectors normalised)")
	}
	fmt.Fprintln(e.stdout)
	if c.IDsOut != "" {
		fmt.Fprintf(e.stdout, "wrote %s: %d IDs, uint64\n", c.IDsOut, len(ids))
	}
	return nil
}

// writeIDsNPY writes ids as a version 1.0, 1-D '<u8' .npy, the header
// padded as numpy.save pads it so that the payload starts 64-byte aligned.
func writeIDsNPY(w io.Writer, ids []uint64) error {
	header := fmt.Sprintf("{'descr': '<u8', 'fortran_order': False, 'shape': (%d,), }", len(ids))
	pad := (64 - (10+len(header)+1)%64) % 64
	header += strings.Repeat(" ", pad) + "\n"
	b := []byte("\x93NUMPY\x01\x00")
	b = binary.LittleEndian.AppendUint16(b, uint16(len(header)))
	b = append(b, header...)
	if _, err := w.Write(b); err != nil {
		return err
	}
	const chunk = 8 << 10
	buf := make([]byte, 0, 8*min(len(ids), chunk))
	for lo := 0; lo < len(ids); lo += chunk {
		buf = buf[:0]
		for _, id := range ids[lo:min(lo+chunk, len(ids))] {
			buf = binary.LittleEndian.AppendUint64(buf, id)
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// notStoreFile refuses an output path that is the store's own base file,
// log or lock (through any link): export replaces its outputs, and must
// never replace the store it reads.
func notStoreFile(flag, out, store string) error {
	outFI, err := os.Stat(out)
	if err != nil {
		return nil // not there yet: it cannot be one of the store's files
	}
	real, err := filepath.EvalSymlinks(store)
	if err != nil {
		real = store // opening it will say what is wrong
	}
	for _, f := range []string{real, real + ".log", real + ".lock"} {
		if fi, err := os.Stat(f); err == nil && os.SameFile(fi, outFI) {
			return fmt.Errorf("%s %s is the store's own file %s: export would overwrite what it reads; name another file", flag, out, f)
		}
	}
	return nil
}
