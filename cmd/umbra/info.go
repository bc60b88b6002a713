package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"text/tabwriter"

	"github.com/umbravec/umbra/engine"
)

func (*infoCmd) Help() string {
	return `Open STORE (replaying its log) and print its dimension, metric, how many
vectors it holds, its lowest and highest ID, how many vectors have a key,
how many deleted rows it still holds ('umbra compact' reclaims them), and
the sizes of its base file and of its log (STORE.log: 'umbra checkpoint'
folds it into the base). It opens the
store read-only, without its lock: while another process writes the store,
info shows what that process had acknowledged when info read it.`
}

func (*infoCmd) Examples() []string {
	return []string{
		"umbra info docs.umbra",
		"umbra info docs.umbra --json | jq .count",
	}
}

type infoCmd struct {
	Store        string   `arg:"" optional:"" name:"store" help:"the store to describe"`
	JSON         bool     `name:"json" help:"print the same as JSON (schema: cmd/umbra/README.md)"`
	Extra        []string `arg:"" optional:"" hidden:""`
	clusterFlags `embed:""`
}

func (c *infoCmd) Validate() error {
	if err := c.clusterOnly(); err != nil {
		return err
	}
	if c.Cluster != "" && c.Collection == "" && c.Store == "" {
		return noArguments(c.Extra) // the nodes alone
	}
	if c.Cluster != "" {
		return c.validateCluster(c.Store)
	}
	if c.Store == "" {
		return usagef("missing STORE: umbra info STORE")
	}
	return noArguments(c.Extra)
}

// infoJSON is what info --json prints; README.md documents it.
type infoJSON struct {
	Path      string  `json:"path"`
	Dim       int     `json:"dim"`
	Metric    string  `json:"metric"`
	Precision string  `json:"precision"`
	Count     int     `json:"count"`
	MinID     *uint64 `json:"min_id"` // null for an empty store
	MaxID     *uint64 `json:"max_id"`
	Keys      int     `json:"keys"`
	DeadRows  int     `json:"dead_rows"`
	BaseBytes int64   `json:"base_bytes"`
	LogBytes  int64   `json:"log_bytes"`
}

func (c *infoCmd) Run(ctx context.Context, e *env) (err error) {
	if c.Cluster != "" {
		return c.runCluster(ctx, e)
	}
	ix, err := openStoreReadOnly(ctx, e, c.Store, engine.Config{Device: engine.CPU})
	if err != nil {
		return err
	}
	info := ix.Info()
	out := infoJSON{Path: c.Store, Dim: ix.Dim(), Metric: ix.Metric().String(), Precision: info.Precision.String(), Count: ix.Len(), DeadRows: info.DeadRows}
	ids := ix.IDs()
	if len(ids) > 0 {
		lo, hi := ids[0], ids[len(ids)-1]
		out.MinID, out.MaxID = &lo, &hi
	}
	for _, id := range ids {
		if _, ok := ix.KeyOf(id); ok {
			out.Keys++
		}
	}
	if err := ix.Close(); err != nil {
		return fmt.Errorf("store %s: closing: %s", c.Store, cause(err))
	}
	// Sizes after Close: what is on disk once the store is released.
	if out.BaseBytes, out.LogBytes, err = storeSizes(c.Store); err != nil {
		return err
	}
	if c.JSON {
		return writeJSON(e.stdout, out)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "store\t%s\n", out.Path)
	fmt.Fprintf(tw, "dim\t%d\n", out.Dim)
	fmt.Fprintf(tw, "metric\t%s\n", out.Metric)
	fmt.Fprintf(tw, "precision\t%s\n", out.Precision)
	fmt.Fprintf(tw, "count\t%d\n", out.Count)
	if out.MinID != nil {
		fmt.Fprintf(tw, "ids\t%d to %d\n", *out.MinID, *out.MaxID)
	} else {
		fmt.Fprintf(tw, "ids\tnone\n")
	}
	fmt.Fprintf(tw, "keys\t%d\n", out.Keys)
	fmt.Fprintf(tw, "deleted\t%d rows not yet reclaimed\n", out.DeadRows)
	fmt.Fprintf(tw, "base\t%s (%d bytes)\n", c.Store, out.BaseBytes)
	fmt.Fprintf(tw, "log\t%s.log (%d bytes)\n", c.Store, out.LogBytes)
	return tw.Flush()
}

// fileSize is the size of the file at path, 0 when there is none.
func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("%s: %s", path, cause(err))
	}
	return fi.Size(), nil
}
