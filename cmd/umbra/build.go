package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/cluster"
	"github.com/umbravec/umbra/engine"
)

func (*buildCmd) Help() string {
	return `Read the vectors of --data and write them as a store at --out: the base
file that 'umbra add', 'delete', 'info', 'export' and 'search --store' use
(they keep their changes in STORE.log beside it, and lock STORE.lock while
they run). The store is written atomically (a temporary file, fsynced,
renamed): an existing store at --out is replaced whole, or not at all, and
its old log is removed. Building refuses while another process has the
store open, and refuses to overwrite a file that is not a store.

Without --ids the vectors get IDs 0, 1, 2, … in file order. --keys names
them by string keys too, one line per vector; an empty line leaves that
vector without a key, as 'umbra export --keys-out' writes one. --ids and
--keys together rebuild an exported store with the same IDs and keys.
Keys follow the store's key rule: non-empty UTF-8 text of at most 4096
bytes without line breaks, each key once.`
}

func (*buildCmd) Examples() []string {
	return []string{
		"umbra build --data docs.npy --out docs.umbra",
		"umbra build --data docs.npy --ids doc-ids.txt --metric dot --out docs.umbra",
		"umbra build --data docs.npy --precision int8 --out docs.umbra",
		"umbra build --data export.npy --ids export-ids.npy --keys export-keys.txt --out notes.umbra",
	}
}

type buildCmd struct {
	Data         string    `name:"data" placeholder:"FILE" help:"the vectors (required): .npy (float32, float16), .fvecs or .bvecs"`
	IDs          string    `name:"ids" placeholder:"FILE" help:"one ID per vector, in the same order: text with one decimal ID per line, or a 1-D int64/uint64 .npy"`
	Keys         string    `name:"keys" placeholder:"FILE" help:"one string key per vector, in the same order: text, one key per line (an empty line: a vector without a key); the store remembers the keys"`
	Metric       choice    `name:"metric" choices:"cosine,dot,l2" default:"cosine" placeholder:"M" help:"cosine, dot or l2: what the store ranks by. Under cosine the store keeps each vector scaled to unit length"`
	Prec         choice    `name:"precision" choices:"f32,f16,int8" default:"f32" placeholder:"P" help:"f32, f16 or int8: the copy of the vectors that searches scan. f16 and int8 read 2x and about 4x fewer bytes and still return the exact float32 answers (the store keeps the float32 vectors; rows the compressed scan cannot rule out are scored again in float32). On a GPU the device holds only the compressed copy"`
	Out          string    `name:"out" placeholder:"STORE" help:"the store to write (required)"`
	Attr         attrFlags `embed:""`
	Args         []string  `arg:"" optional:"" hidden:""`
	Shards       int       `name:"shards" default:"1" placeholder:"S" help:"with --cluster: the collection's shards, fixed at creation"`
	NodeReplicas int       `name:"node-replicas" default:"0" placeholder:"R" help:"with --cluster: how many nodes hold each shard when the nodes run with --placement (0: 3; at most the live nodes)"`
	clusterFlags `embed:""`

	idempotencyFlag `embed:""`
}

func (b *buildCmd) Validate() error {
	if err := b.clusterOnly(); err != nil {
		return err
	}
	if err := b.checkKey(b.Cluster); err != nil {
		return err
	}
	switch {
	case b.NodeReplicas < 0:
		return usagef("--node-replicas %d: want 0 (the default, 3) or more", b.NodeReplicas)
	case b.Cluster != "" && b.Prec != "" && b.Prec != "f32":
		return usagef("--precision %s needs a store: a cluster collection's replicas scan float32 rows", b.Prec)
	case b.Cluster != "":
		if err := b.validateCluster(b.Out); err != nil {
			return err
		}
		if err := noArguments(b.Args); err != nil {
			return err
		}
		if b.Data == "" {
			return usagef("missing required flag --data")
		}
		return nil
	case b.NodeReplicas != 0:
		return usagef("--node-replicas needs --cluster")
	case b.Shards != 1:
		return usagef("--shards needs --cluster: a store is one file")
	}
	if err := noArguments(b.Args); err != nil {
		return err
	}
	switch {
	case b.Data == "":
		return usagef("missing required flag --data")
	case b.Out == "":
		return usagef("missing required flag --out")
	}
	return nil
}

func (b *buildCmd) Run(ctx context.Context, e *env) (err error) {
	metric, err := umbra.ParseMetric(string(b.Metric))
	if err != nil {
		return usagef("%s", cause(err))
	}
	prec, err := umbra.ParsePrecision(string(b.Prec))
	if err != nil {
		return usagef("%s", cause(err))
	}
	if b.Cluster == "" {
		if err := replaceable(b.Out); err != nil {
			return err
		}
	}
	t, rows, dim, err := b.stream(ctx, e, metric, prec)
	if err != nil {
		return err
	}
	defer t.close(&err)
	if t.col != nil {
		fmt.Fprintf(e.stdout, "wrote %d vectors to %s%s\n", rows, t.label, t.wrote())
		return nil
	}
	done := e.progress.step("writing " + b.Out)
	err = t.store.Save(ctx, b.Out)
	done()
	if err != nil {
		return storeError(b.Out, err)
	}
	fmt.Fprintf(e.stdout, "wrote %s: %d vectors of dimension %d, %s, precision %s\n", b.Out, rows, dim, metric, prec)
	return nil
}

// create makes what build writes into: an index in memory, which Run
// saves as --out, or, with --cluster, the collection.
func (b *buildCmd) create(ctx context.Context, dim int, metric umbra.Metric, prec umbra.Precision) (*target, error) {
	if b.Cluster == "" {
		ix, err := engine.New(ctx, engine.Config{Dim: dim, Metric: metric, Device: engine.CPU, Precision: prec})
		if err != nil {
			return nil, fmt.Errorf("--data %s: %s", b.Data, cause(err))
		}
		return indexTarget(ix, b.Out), nil
	}
	c, err := b.connect(ctx, b.Cluster, false)
	if err != nil {
		return nil, err
	}
	col, err := c.Create(ctx, b.Collection, cluster.CollectionConfig{Dim: dim, Metric: metric, Shards: b.Shards,
		NodeReplicas: b.NodeReplicas})
	if err != nil {
		c.Close()
		return nil, err
	}
	return &target{Collection: col, label: "collection " + b.Collection, col: col, client: c}, nil
}

// stream writes --data, read a piece at a time, into a new store's index
// (or collection), under --ids when given (read whole first: 8 bytes a
// row): the file is never held whole besides the index's rows.
func (b *buildCmd) stream(ctx context.Context, e *env, metric umbra.Metric, prec umbra.Precision) (_ *target, rows, dim int, err error) {
	src, err := openRows(ctx, "--data", b.Data)
	if err != nil {
		return nil, 0, 0, err
	}
	defer src.Close()
	if src.Rows() == 0 {
		return nil, 0, 0, fmt.Errorf("--data %s holds no vectors (0 rows): nothing to build", b.Data)
	}
	var given []uint64
	var keys []string
	if b.IDs != "" {
		if given, err = readIDsUpTo(ctx, e, "--ids", b.IDs, src.Rows()); err != nil {
			return nil, 0, 0, moreIDs(err, "--data", b.Data, src.Rows())
		}
		if src.Rows() >= 0 {
			if err := checkIDCount("--ids", b.IDs, len(given), "--data", b.Data, src.Rows()); err != nil {
				return nil, 0, 0, err
			}
		}
	}
	if b.Keys != "" {
		if keys, err = b.readKeys(ctx, src.Rows(), given); err != nil {
			return nil, 0, 0, err
		}
		if given == nil && slices.Contains(keys, "") {
			// Rows without a key get the IDs an Add by key would give
			// them in a new index: their row numbers.
			given = make([]uint64, len(keys))
			for i := range given {
				given[i] = uint64(i)
			}
		}
	}
	extra, err := b.Attr.options(ctx, src.Rows(), "--data "+b.Data)
	if err != nil {
		return nil, 0, 0, err
	}
	t, err := b.create(ctx, src.Dim(), metric, prec)
	if err != nil {
		return nil, 0, 0, err
	}
	extra = append(extra, t.writeOptions(e, &b.idempotencyFlag)...)
	addCtx, done := e.progress.engineStep(ctx, "indexing "+src.label())
	var ids []uint64
	switch {
	case given != nil && keys != nil:
		if _, err = t.Add(addCtx, src, append(extra, umbra.WithIDs(given...), umbra.WithKeys(keys...))...); err == nil {
			ids = given
		}
	case given != nil:
		if _, err = t.Add(addCtx, src, append(extra, umbra.WithIDs(given...))...); err == nil {
			ids = given
		}
	case keys != nil:
		ids, err = t.Add(addCtx, src, append(extra, umbra.WithKeys(keys...))...)
	default:
		ids, err = t.Add(addCtx, src, extra...)
	}
	done()
	if err == nil && len(ids) == 0 {
		err = fmt.Errorf("--data %s holds no vectors (0 rows): nothing to build", b.Data)
	} else if err != nil {
		if serr := src.sourceError(err); serr != nil {
			err = serr
		} else if aerr := b.Attr.attrError(err); aerr != nil {
			err = aerr
		} else if b.IDs == "" && (errors.Is(err, umbra.ErrDuplicateID) || errors.Is(err, umbra.ErrIDCount)) ||
			errors.Is(err, umbra.ErrInvalidKey) {
			err = fmt.Errorf("--keys %s: %s", b.Keys, cause(err))
		} else if errors.Is(err, umbra.ErrDuplicateID) || errors.Is(err, umbra.ErrIDCount) {
			err = fmt.Errorf("--ids %s: %s", b.IDs, cause(err))
		} else {
			err = t.writeFailed(fmt.Errorf("--data %s: %s", b.Data, cause(err)))
		}
	}
	if err != nil {
		t.close(&err)
		return nil, 0, 0, err
	}
	return t, len(ids), src.Dim(), nil
}

// readKeys reads --keys: one line per row, an empty line a row without a
// key. A count that is not the rows' or the IDs' (rows < 0: not known
// before the end) is refused, then a key given twice, by its lines.
func (b *buildCmd) readKeys(ctx context.Context, rows int, ids []uint64) ([]string, error) {
	keys, at, err := readKeys(ctx, "--keys", b.Keys, rowKeys)
	if err != nil {
		return nil, err
	}
	held := plural(len(keys), "key")
	if n := countEmpty(keys); n > 0 {
		held = fmt.Sprintf("%d lines (%d of them empty: rows without a key)", len(keys), n)
	}
	switch {
	case rows >= 0 && len(keys) != rows:
		return nil, fmt.Errorf("--keys %s holds %s, --data %s holds %s: want one line per vector",
			b.Keys, held, b.Data, plural(rows, "vector"))
	case ids != nil && len(keys) != len(ids):
		return nil, fmt.Errorf("--keys %s holds %s, --ids %s holds %s: want one line per ID",
			b.Keys, held, b.IDs, plural(len(ids), "ID"))
	}
	if err := repeatedKey(keys, at, "lines"); err != nil {
		return nil, fmt.Errorf("--keys %s: %s", b.Keys, err)
	}
	return keys, nil
}

// replaceable refuses an --out that build must not overwrite: a directory,
// or an existing file that is not a store.
func replaceable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--out %s: %s", path, cause(err))
	case fi.IsDir():
		return fmt.Errorf("--out %s is a directory: want a store file", path)
	case fi.Size() == 0:
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--out %s: %s", path, cause(err))
	}
	defer f.Close()
	head := make([]byte, len(storeMagic))
	if _, err := io.ReadFull(f, head); err != nil || string(head) != storeMagic {
		return fmt.Errorf("--out %s exists and is not an umbra store: not replacing it (remove it first, or choose another --out)", path)
	}
	return nil
}
