package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/umbravec/umbra/engine"
)

// checkpoint and compact are the store's upkeep: every add and delete
// appends to STORE.log, which every open replays, and a delete only marks
// its rows, which stay in memory and in the base file.

func (*checkpointCmd) Help() string {
	return `Fold STORE's log (STORE.log) into a new base file, so that the next open
reads one file and replays nothing, and print the rows and the sizes
before and after. The new base is written atomically: a crash at any
point leaves the old store or the new one, whole. Deleted rows stay in
the base, marked (see 'umbra compact'). It holds the store's lock while
it runs, as add does.`
}

func (*checkpointCmd) Examples() []string { return []string{"umbra checkpoint docs.umbra"} }

type checkpointCmd struct {
	Store string   `arg:"" optional:"" name:"store" help:"the store to checkpoint"`
	Extra []string `arg:"" optional:"" hidden:""`
}

func (c *checkpointCmd) Validate() error {
	if c.Store == "" {
		return usagef("missing STORE: umbra checkpoint STORE")
	}
	return noArguments(c.Extra)
}

func (c *checkpointCmd) Run(ctx context.Context, e *env) error {
	return upkeep(ctx, e, c.Store, false)
}

func (*compactCmd) Help() string {
	return `Drop STORE's deleted rows for good, then checkpoint it: the base file is
rewritten with the live rows only and the log is emptied. It prints the
rows kept, the deleted rows reclaimed and the sizes before and after. A
crash at any point leaves the old store or the new one, whole. It holds
the store's lock while it runs, as delete does.`
}

func (*compactCmd) Examples() []string { return []string{"umbra compact docs.umbra"} }

type compactCmd struct {
	Store string   `arg:"" optional:"" name:"store" help:"the store to compact"`
	Extra []string `arg:"" optional:"" hidden:""`
}

func (c *compactCmd) Validate() error {
	if c.Store == "" {
		return usagef("missing STORE: umbra compact STORE")
	}
	return noArguments(c.Extra)
}

func (c *compactCmd) Run(ctx context.Context, e *env) error {
	return upkeep(ctx, e, c.Store, true)
}

// upkeep checkpoints the store at path, compacting it first when compact
// is set, and says what it did.
func upkeep(ctx context.Context, e *env, path string, compact bool) (err error) {
	ix, err := openStore(ctx, e, path, engine.Config{Device: engine.CPU})
	if err != nil {
		return err
	}
	defer func() {
		if ix != nil {
			closeStore(path, ix, &err)
		}
	}()
	// Sizes with the store open (and locked): no other writer changes them.
	baseBefore, logBefore, err := storeSizes(path)
	if err != nil {
		return err
	}
	dead := ix.Info().DeadRows
	if compact {
		done := e.progress.step("compacting " + path)
		err = ix.Compact(ctx)
		done()
		if err != nil {
			return storeError(path, err)
		}
	}
	done := e.progress.step("checkpointing " + path)
	err = ix.Checkpoint(ctx)
	done()
	if err != nil {
		return storeError(path, err)
	}
	rows, left := ix.Len(), ix.Info().DeadRows
	closeStore(path, ix, &err)
	ix = nil
	if err != nil {
		return err
	}
	baseAfter, logAfter, err := storeSizes(path)
	if err != nil {
		return err
	}
	sizes := fmt.Sprintf("base %d → %d bytes, log %d → %d bytes", baseBefore, baseAfter, logBefore, logAfter)
	if compact {
		fmt.Fprintf(e.stdout, "compacted %s: %s kept, %s reclaimed; %s\n",
			path, plural(rows, "vector"), plural(dead-left, "deleted row"), sizes)
		return nil
	}
	kept := ""
	if left > 0 {
		kept = fmt.Sprintf(" (and %s, which 'umbra compact' reclaims)", plural(left, "deleted row"))
	}
	fmt.Fprintf(e.stdout, "checkpointed %s: %s%s; %s\n", path, plural(rows, "vector"), kept, sizes)
	return nil
}

// storeSizes returns the sizes of the store's base file and of its log,
// which lies beside the real file when the store is a link to it (0 for a
// log that is not there).
func storeSizes(path string) (base, log int64, err error) {
	if base, err = fileSize(path); err != nil {
		return 0, 0, err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return 0, 0, fmt.Errorf("store %s: %s", path, cause(err))
	}
	if log, err = fileSize(real + ".log"); err != nil {
		return 0, 0, err
	}
	return base, log, nil
}
