package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/resolve"
)

// The write API is two verbs and one delete:
//
//	ids, err := ix.Add(ctx, umbra.Vectors(vs))                     // IDs assigned
//	_, err = ix.Add(ctx, umbra.Flat(data, dim), umbra.WithIDs(ids...)) // the caller's IDs
//	ids, err = ix.Upsert(ctx, umbra.Vectors(vs), umbra.WithKeys("a", "b"))
//	err = ix.Delete(ctx, umbra.WithKeys("a"))
//
// Rows come as an umbra.RowSource: Vectors (one slice per vector), Flat
// (one row-major slice) or a source read a piece at a time, such as
// host.MatrixReader over a vector file. WithIDs and WithKeys name them;
// every combination works on every source.

// memRows are the rows of an in-memory source, read in place: n of them,
// row(i) the i-th.
type memRows struct {
	n   int
	row func(i int) []float32
	vs  [][]float32 // the source's own slices, for Vectors
}

// vectors returns the rows one slice each: Vectors' own, or views into a
// Flat source's data (built only for the paths that take slices: keys and
// upserts; a plain Add packs straight from row).
func (m memRows) vectors() [][]float32 {
	if m.vs != nil || m.n == 0 {
		return m.vs
	}
	vs := make([][]float32, m.n)
	for i := range vs {
		vs[i] = m.row(i)
	}
	return vs
}

// inMemory returns the rows of an in-memory source, or ok false for a
// streamed source. A Flat source of another dimension, or whose length is
// not a whole number of rows, is an error.
func (ix *Index) inMemory(src umbra.RowSource) (m memRows, ok bool, err error) {
	switch r := src.(type) {
	case interface{ InMemory() [][]float32 }: // umbra.Vectors
		vs := r.InMemory()
		return memRows{n: len(vs), row: func(i int) []float32 { return vs[i] }, vs: vs}, true, nil
	case interface{ InMemoryFlat() ([]float32, int) }: // umbra.Flat
		data, dim := r.InMemoryFlat()
		if dim != ix.cfg.Dim {
			return m, true, fmt.Errorf("%w: Flat rows of dimension %d, index dimension is %d", umbra.ErrDimMismatch, dim, ix.cfg.Dim)
		}
		if len(data)%dim != 0 {
			return m, true, fmt.Errorf("%w: %d values is not a whole number of rows of dimension %d", umbra.ErrDimMismatch, len(data), dim)
		}
		return memRows{n: len(data) / dim, row: func(i int) []float32 { return data[i*dim : (i+1)*dim : (i+1)*dim] }}, true, nil
	}
	return m, false, nil
}

// writeOptions are a write's options as the index reads them, from
// the resolved umbra.WriteOptions.
type writeOptions struct {
	ids     []uint64
	keys    []string
	idsSet  bool
	keysSet bool
	attrs   callAttrs // WithMeta, WithPayloads (memory.go)
}

// collectWrite resolves opts for the write named verb
// (the rules of every collection), refusing the options of a cluster
// collection.
func collectWrite(verb string, opts []umbra.WriteOption) (writeOptions, error) {
	p, err := resolve.Write(verb, opts)
	if err != nil {
		return writeOptions{}, err
	}
	if err := p.Refuse(localOnly, "NoWait", "IdempotencyKey"); err != nil {
		return writeOptions{}, err
	}
	return writeOptions{
		ids: p.IDs, keys: p.Keys, idsSet: p.IDs != nil, keysSet: p.Keys != nil,
		attrs: callAttrs{meta: p.Meta, payloads: p.Payloads, metaSet: p.Meta != nil, paySet: p.Payloads != nil},
	}, nil
}

// Add stores rows, each under a new ID: assigned by the index
// (consecutive, past every ID stored before), the caller's (WithIDs), or
// a new one for each key (WithKeys), and returns the IDs; WithIDs and
// WithKeys together store each row under its ID and name it by its key.
// It is atomic: on any error nothing is stored. An ID or key repeated in
// the call (ErrDuplicateID), already stored (ErrIDExists, ErrKeyExists)
// or, for a key, breaking the key rule (ErrInvalidKey, see WithKeys)
// fails it; Upsert replaces instead. Every row must have Dim finite components and, under
// Cosine, a non-zero norm; a refused row is named by its index and column.
// A bad row is the error whatever is wrong with the IDs or keys too: they
// are judged after the rows (only metadata that cannot be stored, counts
// that differ and the limits come first).
//
// A streamed source (anything but Vectors and Flat) is read a piece at a
// time straight into the index's storage, each piece checked and packed
// while in cache on Config.Workers goroutines: no copy of all the rows is
// held besides the index's own. A source that fails to give a row wraps
// ErrSource; one that gives another number of rows than it announced, or
// than the IDs or keys name, is an error, and nothing is stored. The IDs
// and keys of a streamed source are judged once it is read to its end (or
// to its first bad row).
//
// ctx may carry a Trace (WithTrace) and a progress function (WithProgress).
func (ix *Index) Add(ctx context.Context, rows umbra.RowSource, opts ...umbra.WriteOption) (ids []uint64, err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	o, err := collectWrite("Add", opts)
	if err != nil {
		return nil, err
	}
	if rows == nil {
		return nil, fmt.Errorf("%w: Add of nil rows", umbra.ErrSource)
	}
	m, mem, err := ix.inMemory(rows)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	a := &o.attrs
	if mem {
		if err := a.fits(m.n); err != nil {
			return nil, err
		}
	}
	switch {
	case !mem:
		if err := namesFit(rows.Rows(), o); err != nil {
			return nil, err
		}
		var keys []string
		if o.keysSet {
			keys = o.keys
		}
		return ix.addFrom(ctx, start, rows, o.ids, keys, a)
	case o.keysSet && o.idsSet:
		if err := namesFit(m.n, o); err != nil {
			return nil, err
		}
		return ix.addNamed(ctx, start, o.ids, o.keys, a, m.vectors())
	case o.keysSet:
		return ix.keyed(ctx, o.keys, m.vectors(), false, a)
	case o.idsSet:
		if err := namesFit(m.n, o); err != nil {
			return nil, err
		}
		if _, err := ix.add(ctx, start, o.ids, a, m.n, ix.packer(ctx, m.n, false, m.row)); err != nil {
			return nil, err
		}
		return o.ids, nil
	}
	return ix.add(ctx, start, nil, a, m.n, ix.packer(ctx, m.n, false, m.row))
}

// Upsert stores rows under the caller's IDs (WithIDs) or keys (WithKeys),
// one per row: a stored one's vector is replaced in place (on a GPU only
// that row is written), the others are added. It returns the rows' IDs.
// It is atomic: on any error nothing is changed. An ID or key repeated in
// the call is ErrDuplicateID, a key breaking the key rule ErrInvalidKey
// (see WithKeys); an Upsert that names no rows, or names them both ways,
// is ErrInvalidOption. A streamed source is read whole before anything is
// changed (the rows an upsert replaces are kept aside to undo it).
func (ix *Index) Upsert(ctx context.Context, rows umbra.RowSource, opts ...umbra.WriteOption) (ids []uint64, err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	o, err := collectWrite("Upsert", opts)
	if err != nil {
		return nil, err
	}
	if !o.idsSet && !o.keysSet {
		return nil, fmt.Errorf("%w: Upsert needs WithIDs or WithKeys to say which vectors it replaces", umbra.ErrInvalidOption)
	}
	if rows == nil {
		return nil, fmt.Errorf("%w: Upsert of nil rows", umbra.ErrSource)
	}
	m, mem, err := ix.inMemory(rows)
	if err != nil {
		return nil, err
	}
	vs := m.vectors()
	if !mem {
		if err := namesFit(rows.Rows(), o); err != nil {
			return nil, err
		}
		if vs, err = ix.readAll(ctx, rows); err != nil {
			return nil, err
		}
	}
	if err := o.attrs.fits(len(vs)); err != nil {
		return nil, err
	}
	if o.keysSet {
		return ix.keyed(ctx, o.keys, vs, true, &o.attrs)
	}
	if err := namesFit(len(vs), o); err != nil {
		return nil, err
	}
	if err := ix.lockWriter(); err != nil {
		return nil, err
	}
	defer ix.wmu.Unlock()
	if err := ix.upsertLocked(ctx, o.ids, vs, nil, &o.attrs, false); err != nil {
		return nil, err
	}
	return o.ids, nil
}

// Delete removes the vectors named by WithIDs or WithKeys. One that is not
// stored (ErrNotFound) or named twice (ErrDuplicateID) fails the whole
// call with nothing removed; the error names the ID or key. A delete marks rows dead — no data moves, on
// the GPU neither; Compact reclaims their space, and runs by itself once
// dead rows are at least 1,024 and a quarter of the index. Keys are looked
// up under the writers' lock, so a delete by key removes what the keys
// named at one instant.
func (ix *Index) Delete(ctx context.Context, opts ...umbra.WriteOption) (err error) {
	defer ix.recoverInto(&err, ix.watchFaults())
	o, err := collectWrite("Delete", opts)
	if err != nil {
		return err
	}
	if !o.idsSet && !o.keysSet {
		return fmt.Errorf("%w: Delete needs WithIDs or WithKeys to say what it deletes", umbra.ErrInvalidOption)
	}
	if err := ix.lockWriter(); err != nil {
		return err
	}
	defer ix.wmu.Unlock()
	ids := o.ids
	if o.keysSet {
		if ids, err = ix.idsOfKeys(o.keys); err != nil {
			return err
		}
	}
	return ix.deleteLocked(ctx, ids)
}

// addNamed is an Add of in-memory rows under ids and keys together: each
// row is stored under its ID and, unless its key is empty, named by its
// key. The keys are checked against the key rule and, with the IDs, new
// here, under the writers' lock, before a row is packed; when one is
// refused, the metadata and rows are checked first (refusal).
func (ix *Index) addNamed(ctx context.Context, start time.Time, ids []uint64, keys []string, a *callAttrs, vs [][]float32) ([]uint64, error) {
	if err := ix.lockWriter(); err != nil {
		return nil, err
	}
	defer ix.wmu.Unlock()
	if err := checkKeys(keys, true); err != nil {
		return nil, ix.refusal(vs, a, err)
	}
	if err := ix.rid.checkNew(ids, false); err != nil {
		return nil, ix.refusal(vs, a, err)
	}
	if err := ix.keysNew(keys); err != nil {
		return nil, ix.refusal(vs, a, err)
	}
	return ix.addLocked(ctx, start, ids, true, keys, a, len(vs), ix.packer(ctx, len(vs), false, func(i int) []float32 { return vs[i] }))
}

// namesFit refuses IDs or keys that cannot pair one to one with n rows (n
// < 0: a source that does not know its count, checked once it is read).
func namesFit(n int, o writeOptions) error {
	switch {
	case n < 0:
	case o.idsSet && len(o.ids) != n:
		return fmt.Errorf("%w: %d IDs for %d vectors", umbra.ErrIDCount, len(o.ids), n)
	case o.keysSet && len(o.keys) != n:
		return fmt.Errorf("%w: %d keys for %d vectors", umbra.ErrIDCount, len(o.keys), n)
	}
	return o.attrs.fits(n)
}

// readAll reads a streamed source's rows into memory, one slice per row
// over one allocation, checking their dimension and count as Add does.
func (ix *Index) readAll(ctx context.Context, src umbra.RowSource) ([][]float32, error) {
	if err := ix.sourceFits(src); err != nil {
		return nil, err
	}
	dim := ix.cfg.Dim
	n := src.Rows()
	data := make([]float32, 0, max(n, 0)*dim)
	piece := max(1, streamPieceBytes/(4*dim))
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		at := len(data)
		data = append(data, make([]float32, piece*dim)...)
		got, err := src.ReadRows(data[at:])
		data = data[:at+got*dim]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", umbra.ErrSource, err)
		}
		if got == 0 {
			return nil, fmt.Errorf("%w: the source gave no rows and no end", umbra.ErrSource)
		}
	}
	rows := len(data) / dim
	if n >= 0 && rows != n {
		return nil, fmt.Errorf("%w: the source announced %d rows and gave %d", umbra.ErrSource, n, rows)
	}
	vs := make([][]float32, rows)
	for i := range vs {
		vs[i] = data[i*dim : (i+1)*dim : (i+1)*dim]
	}
	return vs, nil
}
