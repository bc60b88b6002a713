package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
)

func (*addCmd) Help() string {
	return `Add the vectors of --data to STORE. The change is written to the store's
log (STORE.log) and fsynced before add exits: it survives a crash whole,
or is not there at all. While add runs it holds the store's lock; another
process that has the store open makes add fail, and the other way round.

Without --ids the store assigns new IDs, each larger than any it has
assigned before, and add prints the range. With --ids every ID must be new
(an ID already stored fails the whole add: use --upsert to replace it).
With --keys each vector is named by a string key instead: new keys get new
IDs and the store remembers the keys (a key already stored fails the whole
add unless --upsert, which replaces that key's vector). Keys follow the
store's key rule: non-empty UTF-8 text of at most 4096 bytes without line
breaks, each key once.`
}

func (*addCmd) Examples() []string {
	return []string{
		"umbra add docs.umbra --data new-docs.npy",
		"umbra add docs.umbra --data edited.npy --ids edited-ids.txt --upsert",
		"umbra add notes.umbra --data notes.npy --keys paths.txt --upsert",
	}
}

type addCmd struct {
	Store        string    `arg:"" optional:"" name:"store" help:"the store to add to"`
	Data         string    `name:"data" placeholder:"FILE" help:"the vectors (required): .npy (float32, float16), .fvecs or .bvecs, of the store's dimension"`
	IDs          string    `name:"ids" placeholder:"FILE" help:"one ID per vector, in the same order: text with one decimal ID per line, or a 1-D int64/uint64 .npy"`
	Keys         string    `name:"keys" placeholder:"FILE" help:"one string key per vector, in the same order: text, one key per line (not with --ids)"`
	Upsert       bool      `name:"upsert" help:"replace the vectors of IDs (or keys) already stored, add the others (needs --ids or --keys); --meta and --payload, when given, replace theirs too"`
	Attr         attrFlags `embed:""`
	Extra        []string  `arg:"" optional:"" hidden:""`
	clusterFlags `embed:""`

	idempotencyFlag `embed:""`
}

func (c *addCmd) Validate() error {
	if err := c.checkTarget(c.Store, "umbra add STORE --data FILE", c.Extra); err != nil {
		return err
	}
	if err := c.checkKey(c.Cluster); err != nil {
		return err
	}
	switch {
	case c.Data == "":
		return usagef("missing required flag --data")
	case c.IDs != "" && c.Keys != "":
		return usagef("--ids and --keys exclude each other: with --keys the store assigns the IDs")
	case c.Upsert && c.IDs == "" && c.Keys == "":
		return usagef("--upsert needs --ids or --keys: it replaces vectors by ID or key")
	}
	return nil
}

// Run adds --data to the store or collection through its RowSource: a
// store's Add reads it a piece at a time straight into the store's index,
// never held whole besides it; Upsert (--upsert) reads it into one buffer
// first, as it keeps the rows it replaces aside to undo. --ids and --keys
// are read whole first. The file's header is checked before the store or
// collection is opened; a bad row, or a file that turns out malformed,
// leaves it as it was.
func (c *addCmd) Run(ctx context.Context, e *env) (err error) {
	src, err := openRows(ctx, "--data", c.Data)
	if err != nil {
		return err
	}
	defer src.Close()
	if src.Rows() == 0 {
		return fmt.Errorf("--data %s holds no vectors (0 rows): nothing to add", c.Data)
	}
	var ids []uint64
	var keys []string
	switch {
	case c.IDs != "":
		if ids, err = readIDsUpTo(ctx, e, "--ids", c.IDs, src.Rows()); err != nil {
			return moreIDs(err, "--data", c.Data, src.Rows())
		}
		if src.Rows() >= 0 {
			if err := checkIDCount("--ids", c.IDs, len(ids), "--data", c.Data, src.Rows()); err != nil {
				return err
			}
		}
	case c.Keys != "":
		var at []int
		if keys, at, err = readKeys(ctx, "--keys", c.Keys, everyRowKeyed); err != nil {
			return err
		}
		if err := repeatedKey(keys, at, "lines"); err != nil {
			return fmt.Errorf("--keys %s: %s; nothing was added", c.Keys, err)
		}
		if src.Rows() >= 0 && len(keys) != src.Rows() {
			return fmt.Errorf("--keys %s holds %s, --data %s holds %s: want one key per vector",
				c.Keys, plural(len(keys), "key"), c.Data, plural(src.Rows(), "vector"))
		}
	}
	t, err := openTarget(ctx, e, c.Store, &c.clusterFlags, false, engine.Config{Device: engine.CPU})
	if err != nil {
		return err
	}
	defer t.close(&err)
	s, err := t.Summary(ctx)
	if err != nil {
		return fmt.Errorf("%s: %s", t.what(), cause(err))
	}
	if src.Dim() != s.Dim {
		return fmt.Errorf("dimension mismatch: --data %s has dimension %d, %s holds dimension %d",
			c.Data, src.Dim(), t.what(), s.Dim)
	}
	extra, err := c.Attr.options(ctx, src.Rows(), "--data "+c.Data)
	if err != nil {
		return err
	}
	extra = append(extra, t.writeOptions(e, &c.idempotencyFlag)...)
	if c.Upsert {
		return c.upsert(ctx, e, t, src, ids, keys, extra)
	}
	// IDs and keys already stored are named before anything is written,
	// unless this is the rerun of a collection write (its idempotency
	// key given), which reports the first run's outcome.
	if ids != nil && c.IdempotencyKey == "" {
		if err := storedAlready(ctx, t, "--ids", c.IDs, ids); err != nil {
			return err
		}
	}
	if keys != nil && c.IdempotencyKey == "" {
		if err := keysStoredAlready(ctx, t, c.Keys, keys); err != nil {
			return err
		}
	}
	addCtx, done := e.progress.engineStep(ctx, "adding "+src.label())
	assigned := ids
	switch {
	case ids != nil:
		_, err = t.Add(addCtx, src, append(extra, umbra.WithIDs(ids...))...)
	case keys != nil:
		assigned, err = t.Add(addCtx, src, append(extra, umbra.WithKeys(keys...))...)
	default:
		assigned, err = t.Add(addCtx, src, extra...)
	}
	done()
	if err != nil {
		if serr := src.sourceError(err); serr != nil {
			return serr
		}
		if aerr := c.Attr.attrError(err); aerr != nil {
			return aerr
		}
		return t.writeFailed(addError(c, t, err))
	}
	if len(assigned) == 0 {
		return fmt.Errorf("--data %s holds no vectors (0 rows): nothing to add", c.Data)
	}
	held, err := t.rows(ctx)
	if err != nil {
		return err
	}
	switch {
	case ids != nil:
		fmt.Fprintf(e.stdout, "added %d vectors to %s; it holds %d%s\n", len(ids), t.label, held, t.wrote())
		return nil
	case keys != nil:
		fmt.Fprintf(e.stdout, "added %d keyed vectors to %s as IDs %s; it holds %d%s\n",
			len(keys), t.label, idSpan(assigned), held, t.wrote())
		return nil
	}
	fmt.Fprintf(e.stdout, "added %d vectors to %s as IDs %d to %d; it holds %d%s\n",
		len(assigned), t.label, assigned[0], assigned[len(assigned)-1], held, t.wrote())
	return nil
}

// upsert is stream's --upsert: the rows of --data replace the vectors
// stored under their IDs or keys, or are added under them.
func (c *addCmd) upsert(ctx context.Context, e *env, t *target, src *fileRows, ids []uint64, keys []string, extra []umbra.WriteOption) error {
	name := umbra.WithIDs(ids...)
	sel := umbra.Selection{IDs: ids}
	if keys != nil {
		name, sel = umbra.WithKeys(keys...), umbra.Selection{Keys: keys}
	}
	stored, err := t.Get(ctx, sel)
	if err != nil {
		return fmt.Errorf("%s: %s", t.what(), cause(err))
	}
	replaced := len(stored)
	addCtx, done := e.progress.engineStep(ctx, "upserting "+src.label())
	got, err := t.Upsert(addCtx, src, append(extra, name)...)
	done()
	if err != nil {
		if serr := src.sourceError(err); serr != nil {
			return serr
		}
		if aerr := c.Attr.attrError(err); aerr != nil {
			return aerr
		}
		return t.writeFailed(addError(c, t, err))
	}
	what := "vectors"
	if keys != nil {
		what = "keyed vectors"
	}
	held, err := t.rows(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "upserted %d %s into %s (%d replaced, %d added); it holds %d%s\n",
		len(got), what, t.label, replaced, len(got)-replaced, held, t.wrote())
	return nil
}

// idSpan words the IDs the store assigned to new keys (consecutive):
// "4 to 9".
func idSpan(ids []uint64) string {
	return fmt.Sprintf("%d to %d", slices.Min(ids), slices.Max(ids))
}

// keysStoredAlready refuses an add (not an upsert) of keys the store
// already holds, naming a few.
func keysStoredAlready(ctx context.Context, t *target, file string, keys []string) error {
	held, err := storedKeys(ctx, t, keys)
	if err != nil {
		return fmt.Errorf("%s: %s", t.what(), cause(err))
	}
	var dup []string
	for _, k := range keys {
		if _, ok := held[k]; ok {
			dup = append(dup, strconv.Quote(k))
		}
	}
	if len(dup) == 0 {
		return nil
	}
	what := "key " + dup[0] + " is"
	if len(dup) > 1 {
		what = fmt.Sprintf("%d keys (%s", len(dup), strings.Join(dup[:min(3, len(dup))], ", "))
		if len(dup) > 3 {
			what += ", …"
		}
		what += ") are"
	}
	return fmt.Errorf("--keys %s: %s already stored in %s; nothing was added (use --upsert to replace stored vectors)",
		file, what, t.label)
}

// addError words a refused add: the engine's checks of IDs name --ids
// (or --keys), its checks of values (NaN, zero rows under cosine) name
// --data.
func addError(c *addCmd, t *target, err error) error {
	if c.Keys != "" && (errors.Is(err, umbra.ErrDuplicateID) || errors.Is(err, umbra.ErrKeyExists) || errors.Is(err, umbra.ErrInvalidKey)) {
		return fmt.Errorf("--keys %s: %s", c.Keys, cause(err))
	}
	switch {
	case errors.Is(err, umbra.ErrIDCount):
		return fmt.Errorf("--ids %s: %s", c.IDs, cause(err))
	case errors.Is(err, umbra.ErrDuplicateID), errors.Is(err, umbra.ErrIDExists),
		errors.Is(err, engine.ErrLocked), errors.Is(err, engine.ErrBadStore):
		return writeError(t.label, "--ids "+c.IDs, err)
	case errors.Is(err, umbra.ErrNonFinite), errors.Is(err, umbra.ErrZeroVector),
		errors.Is(err, umbra.ErrDimMismatch), errors.Is(err, umbra.ErrTooLarge):
		return fmt.Errorf("--data %s: %s", c.Data, cause(err))
	}
	return fmt.Errorf("%s: %s", t.what(), cause(err))
}

func (*deleteCmd) Help() string {
	return `Delete the vectors with the given IDs or keys from STORE, all or none: an
ID or key that is not stored, or one given twice, fails the whole delete,
naming it. The change is written to the store's log and fsynced before
delete exits. Give exactly one of --ids, --ids-file, --keys and
--keys-file.

A --keys list takes each key as written between the commas (spaces are
part of a key); a key holding a comma needs --keys-file, which holds one
key per line (empty lines are skipped). Keys follow the store's key rule:
non-empty UTF-8 text of at most 4096 bytes without line breaks.`
}

func (*deleteCmd) Examples() []string {
	return []string{
		"umbra delete docs.umbra --ids 4,17,230",
		"umbra delete docs.umbra --ids-file stale.txt",
		"umbra delete notes.umbra --keys alice/m1,alice/m7",
		"umbra delete notes.umbra --keys-file forgotten.txt",
	}
}

type deleteCmd struct {
	Store        string   `arg:"" optional:"" name:"store" help:"the store to delete from"`
	IDs          string   `name:"ids" placeholder:"LIST" help:"IDs separated by commas: --ids 4,17,230"`
	IDsFile      string   `name:"ids-file" placeholder:"FILE" help:"an ID file: text with one decimal ID per line, or a 1-D int64/uint64 .npy"`
	Keys         string   `name:"keys" placeholder:"LIST" help:"keys separated by commas, each as written: --keys alice/m1,alice/m7"`
	KeysFile     string   `name:"keys-file" placeholder:"FILE" help:"a key file: text, one key per line (empty lines skipped)"`
	Extra        []string `arg:"" optional:"" hidden:""`
	clusterFlags `embed:""`

	idempotencyFlag `embed:""`
}

func (c *deleteCmd) Validate() error {
	if err := c.checkTarget(c.Store, "umbra delete STORE --ids 1,2,3", c.Extra); err != nil {
		return err
	}
	if err := c.checkKey(c.Cluster); err != nil {
		return err
	}
	given := 0
	for _, f := range []string{c.IDs, c.IDsFile, c.Keys, c.KeysFile} {
		if f != "" {
			given++
		}
	}
	switch {
	case given == 0:
		return usagef("missing the vectors to delete: give --ids 1,2,3 or --ids-file FILE, or --keys a,b or --keys-file FILE")
	case given > 1 && c.IDs != "" && c.IDsFile != "":
		return usagef("--ids and --ids-file exclude each other: give one")
	case given > 1:
		return usagef("--ids, --ids-file, --keys and --keys-file exclude each other: give one (delete by ID or by key)")
	}
	return checkLists(c.IDs, c.Keys)
}

// checkLists checks an --ids and a --keys list, either "" when not given.
func checkLists(ids, keys string) error {
	if ids != "" {
		if _, err := parseIDList(ids); err != nil {
			return usagef("%s", err)
		}
	}
	if keys != "" {
		if _, err := parseKeyList("--keys", keys); err != nil {
			return usagef("%s", err)
		}
	}
	return nil
}

// parseIDList reads --ids 1,2,3.
func parseIDList(s string) ([]uint64, error) {
	parts := strings.Split(s, ",")
	ids := make([]uint64, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		id, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			if p == "" {
				return nil, fmt.Errorf("--ids: entry %d is empty: want IDs separated by commas, like --ids 4,17,230", i+1)
			}
			return nil, fmt.Errorf("--ids: entry %d: %s", i+1, strings.Replace(badID(p), " per line (or a 1-D int64/uint64 .npy)", "", 1))
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Run deletes the rows --ids, --ids-file, --keys or --keys-file name:
// every ID or key is read and checked (the rule, repeats) before the store
// or collection is opened, and looked up before anything is deleted.
func (c *deleteCmd) Run(ctx context.Context, e *env) (err error) {
	flag, ids, keys, err := c.names(ctx, e)
	if err != nil {
		return err
	}
	t, err := openTarget(ctx, e, c.Store, &c.clusterFlags, false, engine.Config{Device: engine.CPU})
	if err != nil {
		return err
	}
	defer t.close(&err)
	name, what := umbra.WithIDs(ids...), "vectors"
	if keys != nil {
		name, what = umbra.WithKeys(keys...), "keyed vectors"
	}
	if c.IdempotencyKey == "" { // (a rerun reports the first run's outcome)
		stored, err := t.Get(ctx, umbra.Selection{IDs: ids, Keys: keys})
		if err != nil {
			return fmt.Errorf("%s: %s", t.what(), cause(err))
		}
		// Get returns a row named twice once: count what is missing, not
		// what came back (a repeated name is the delete's own error).
		if missing := missingOf(stored, ids, keys); missing != "" {
			return fmt.Errorf("%s: %s not stored in %s; nothing was deleted", flag, missing, t.label)
		}
	}
	if err := t.Delete(ctx, append(t.writeOptions(e, &c.idempotencyFlag), name)...); err != nil {
		return t.writeFailed(deleteError(t, flag, err))
	}
	rows, err := t.rows(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "deleted %d %s from %s; it holds %d%s\n", len(ids)+len(keys), what, t.label, rows, t.wrote())
	return nil
}

// names reads the rows delete names, and says which flag gave them.
func (c *deleteCmd) names(ctx context.Context, e *env) (flag string, ids []uint64, keys []string, err error) {
	switch {
	case c.IDsFile != "":
		if ids, err = readIDs(ctx, e, "--ids-file", c.IDsFile); err != nil {
			return "", nil, nil, err
		}
		if len(ids) == 0 {
			return "", nil, nil, fmt.Errorf("--ids-file %s holds no IDs: nothing to delete", c.IDsFile)
		}
		return "--ids-file " + c.IDsFile, ids, nil, nil
	case c.IDs != "":
		if ids, err = parseIDList(c.IDs); err != nil {
			return "", nil, nil, usagef("%s", err)
		}
		return "--ids", ids, nil, nil
	}
	var at []int
	flag, unit := "--keys", "entries"
	if c.KeysFile != "" {
		flag, unit = "--keys-file "+c.KeysFile, "lines"
		if keys, at, err = readKeys(ctx, "--keys-file", c.KeysFile, keySet); err != nil {
			return "", nil, nil, err
		}
		if len(keys) == 0 {
			return "", nil, nil, fmt.Errorf("--keys-file %s holds no keys: nothing to delete", c.KeysFile)
		}
	} else {
		if keys, err = parseKeyList("--keys", c.Keys); err != nil {
			return "", nil, nil, usagef("%s", err)
		}
		at = positions(len(keys))
	}
	if err := repeatedKey(keys, at, unit); err != nil {
		return "", nil, nil, fmt.Errorf("%s: %s; nothing was deleted", flag, err)
	}
	return flag, nil, keys, nil
}

// missingOf names the IDs or keys (whichever were asked) that stored,
// what Get found of them, lacks; "" when none is missing.
func missingOf(stored []umbra.Record, ids []uint64, keys []string) string {
	if keys != nil {
		held := make(map[string]bool, len(stored))
		for _, r := range stored {
			held[r.Key] = true
		}
		var missing []string
		for _, k := range keys {
			if !held[k] {
				missing = append(missing, k)
			}
		}
		if missing == nil {
			return ""
		}
		return someKeys(missing)
	}
	held := make(map[uint64]bool, len(stored))
	for _, r := range stored {
		held[r.ID] = true
	}
	var missing []uint64
	for _, id := range ids {
		if !held[id] {
			missing = append(missing, id)
		}
	}
	if missing == nil {
		return ""
	}
	return someIDs(missing)
}

// deleteError words the engine's refusal of a delete named by flag.
func deleteError(t *target, flag string, err error) error {
	if errors.Is(err, umbra.ErrDuplicateID) || errors.Is(err, umbra.ErrNotFound) {
		return fmt.Errorf("%s: %s; nothing was deleted", flag, cause(err))
	}
	return writeError(t.label, flag, err)
}
