package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/atomicfile"
	"github.com/umbravec/umbra/internal/keyrule"
	"github.com/umbravec/umbra/meta"
)

func (*exportCmd) Help() string {
	return `Write every vector STORE (or, with --cluster, the collection) holds to
--out as a 2-D float32 .npy, in
ascending ID order; with --ids-out their IDs, in the same order, as a 1-D
uint64 .npy; and with --keys-out their keys, in the same order, as text,
one key per line, an empty line for a vector without a key (no key is
empty, so the two cannot be confused). The vectors are as the store keeps
them: under cosine each is scaled to unit length, so an export is not the
file that was added. 'umbra build --data OUT --ids IDS --keys KEYS
--metric M' rebuilds a store with the same IDs, keys and answers.

Every file is written atomically (a temporary file beside each, fsynced,
renamed). Export opens the store read-only, without its lock, so it
works while another process writes the store, and exports what that
process had acknowledged by the time export read it.`
}

func (*exportCmd) Examples() []string {
	return []string{
		"umbra export docs.umbra --out docs-vectors.npy --ids-out docs-ids.npy",
		"umbra export notes.umbra --out v.npy --ids-out ids.npy --keys-out keys.txt",
		"umbra export --cluster nats://127.0.0.1:4222 --creds node1/creds/client.nk --collection docs --out docs.npy --ids-out ids.npy",
	}
}

type exportCmd struct {
	Store        string `arg:"" optional:"" name:"store" help:"the store to export"`
	clusterFlags `embed:""`
	Out          string   `name:"out" placeholder:"FILE.npy" help:"the vectors (required)"`
	IDsOut       string   `name:"ids-out" placeholder:"FILE.npy" help:"the IDs"`
	KeysOut      string   `name:"keys-out" placeholder:"FILE" help:"the keys: text, one line per vector, empty for a vector without a key"`
	MetaOut      string   `name:"meta-out" placeholder:"FILE.jsonl" help:"the metadata: JSON Lines, one object per vector ({} for none), as 'build --meta' reads it"`
	PayOut       string   `name:"payload-out" placeholder:"FILE.jsonl" help:"the payloads: JSON Lines, one value per vector (null for none), as 'build --payload' reads it"`
	Extra        []string `arg:"" optional:"" hidden:""`
}

// outputs are export's output flags and their files, the given ones.
func (c *exportCmd) outputs() [][2]string {
	var outs [][2]string
	for _, f := range [][2]string{{"--out", c.Out}, {"--ids-out", c.IDsOut}, {"--keys-out", c.KeysOut}, {"--meta-out", c.MetaOut}, {"--payload-out", c.PayOut}} {
		if f[1] != "" {
			outs = append(outs, f)
		}
	}
	return outs
}

func (c *exportCmd) Validate() error {
	if err := c.checkTarget(c.Store, "umbra export STORE --out FILE.npy", c.Extra); err != nil {
		return err
	}
	switch {
	case c.Out == "":
		return usagef("missing required flag --out")
	}
	outs := c.outputs()
	for i, f := range outs {
		for _, g := range outs[:i] {
			if f[1] == g[1] {
				return usagef("%s and %s name the same file", g[0], f[0])
			}
		}
	}
	for _, f := range [][2]string{{"--out", c.Out}, {"--ids-out", c.IDsOut}} {
		if f[1] != "" && !strings.EqualFold(filepath.Ext(f[1]), ".npy") {
			return usagef("%s %s: export writes .npy files: want a .npy extension", f[0], f[1])
		}
	}
	return nil
}

// exportPage is how many rows export reads at once.
const exportPage = 4096

func (c *exportCmd) Run(ctx context.Context, e *env) (err error) {
	for _, f := range c.outputs() {
		if err := notDir(f[0], f[1]); err != nil {
			return err
		}
		if c.Store != "" {
			if err := notStoreFile(f[0], f[1], c.Store); err != nil {
				return err
			}
		}
	}
	t, err := openTarget(ctx, e, c.Store, &c.clusterFlags, true, engine.Config{Device: engine.CPU})
	if err != nil {
		return err
	}
	defer t.close(&err)
	sum, err := t.Summary(ctx)
	if err != nil {
		return fmt.Errorf("%s: %s", t.what(), cause(err))
	}
	// Every row, a page at a time in ID order (a collection answers each
	// page within its nodes' bounds), before any file is written.
	var ids []uint64
	var keys []string
	var metas []meta.Fields
	var pays [][]byte
	keyless := 0
	m := &host.Matrix{Dim: sum.Dim, Data: make([]float32, 0, sum.Rows*sum.Dim)}
	for from := uint64(0); ; {
		recs, err := t.Get(ctx, umbra.Selection{From: from, Limit: exportPage, Vectors: true, Meta: c.MetaOut != "", Payloads: c.PayOut != ""})
		if err != nil {
			return fmt.Errorf("%s: %s", t.what(), cause(err))
		}
		for _, r := range recs {
			ids = append(ids, r.ID)
			m.Data = append(m.Data, r.Vector...)
			if c.KeysOut != "" {
				// Every key is checked before any file is written: a
				// store written before the key rule may hold one that a
				// line cannot.
				if r.Key == "" {
					keyless++
				} else if err := keyrule.Check(r.Key); err != nil {
					return fmt.Errorf("--keys-out: ID %d of %s has a key a key file cannot hold: %s; nothing was written", r.ID, t.what(), err)
				}
				keys = append(keys, r.Key)
			}
			if c.MetaOut != "" {
				metas = append(metas, r.Meta)
			}
			if c.PayOut != "" {
				// One line of JSON Lines holds a JSON value, and only that.
				if r.Payload != nil && !jsonText(r.Payload) {
					return fmt.Errorf("--payload-out: the payload of ID %d in %s is not JSON, which a JSON Lines file cannot hold; nothing was written", r.ID, t.what())
				}
				pays = append(pays, r.Payload)
			}
		}
		if len(recs) < exportPage {
			break
		}
		from = recs[len(recs)-1].ID + 1
	}
	m.Rows = len(ids)
	done := e.progress.step("writing " + c.Out)
	err = host.WriteMatrixFile(c.Out, m, "<f4")
	done()
	if err != nil {
		return fmt.Errorf("--out: %s", cause(err))
	}
	if c.IDsOut != "" {
		err := atomicfile.Write(c.IDsOut, 0o644, func(w io.Writer) error { return writeIDsNPY(w, ids) })
		if err != nil {
			return fmt.Errorf("--ids-out: %s", cause(err))
		}
	}
	if c.KeysOut != "" {
		err := atomicfile.Write(c.KeysOut, 0o644, func(w io.Writer) error {
			bw := bufio.NewWriter(w)
			for _, key := range keys {
				bw.WriteString(key)
				bw.WriteByte('\n')
			}
			return bw.Flush()
		})
		if err != nil {
			return fmt.Errorf("--keys-out: %s", cause(err))
		}
	}
	if c.MetaOut != "" {
		if err := writeJSONLines(c.MetaOut, len(metas), func(i int, b []byte) []byte {
			if len(metas[i]) == 0 {
				return append(b, "{}"...)
			}
			return metas[i].AppendJSON(b)
		}); err != nil {
			return fmt.Errorf("--meta-out: %s", cause(err))
		}
	}
	if c.PayOut != "" {
		if err := writeJSONLines(c.PayOut, len(pays), func(i int, b []byte) []byte {
			if pays[i] == nil {
				return append(b, "null"...)
			}
			return append(b, payloadJSON(pays[i])...)
		}); err != nil {
			return fmt.Errorf("--payload-out: %s", cause(err))
		}
	}
	fmt.Fprintf(e.stdout, "wrote %s: %d vectors of dimension %d, float32", c.Out, m.Rows, m.Dim)
	if sum.Metric == umbra.Cosine {
		fmt.Fprint(e.stdout, " (unit length: the store keeps cosine vectors normalised)")
	}
	fmt.Fprintln(e.stdout)
	if c.IDsOut != "" {
		fmt.Fprintf(e.stdout, "wrote %s: %d IDs, uint64\n", c.IDsOut, len(ids))
	}
	if c.MetaOut != "" {
		fmt.Fprintf(e.stdout, "wrote %s: metadata of %d vectors, one JSON object per line\n", c.MetaOut, len(ids))
	}
	if c.PayOut != "" {
		fmt.Fprintf(e.stdout, "wrote %s: payloads of %d vectors, one JSON value per line\n", c.PayOut, len(ids))
	}
	if c.KeysOut != "" {
		fmt.Fprintf(e.stdout, "wrote %s: %d keys, one per line", c.KeysOut, len(ids)-keyless)
		if keyless > 0 {
			fmt.Fprintf(e.stdout, " (%s without a key: an empty line each)", plural(keyless, "vector"))
		}
		fmt.Fprintln(e.stdout)
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
