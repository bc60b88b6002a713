package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"text/tabwriter"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/umbravec/umbra"
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
	if c.Cluster != "" && c.Collection == "" {
		return c.runNodes(ctx, e)
	}
	t, err := openTarget(ctx, e, c.Store, &c.clusterFlags, true, engine.Config{Device: engine.CPU})
	if err != nil {
		return err
	}
	defer func() {
		if t != nil {
			t.close(&err)
		}
	}()
	s, err := t.Summary(ctx)
	if err != nil {
		return fmt.Errorf("%s: %s", t.what(), cause(err))
	}
	if t.col != nil {
		return c.writeCollection(ctx, e, t, s)
	}
	out := infoJSON{Path: c.Store, Dim: s.Dim, Metric: s.Metric.String(), Precision: s.Precision.String(), Count: s.Rows,
		DeadRows: t.store.Info().DeadRows}
	rows, err := t.Get(ctx, umbra.Selection{})
	if err != nil {
		return fmt.Errorf("%s: %s", t.what(), cause(err))
	}
	if len(rows) > 0 {
		lo, hi := rows[0].ID, rows[len(rows)-1].ID
		out.MinID, out.MaxID = &lo, &hi
	}
	for _, r := range rows {
		if r.Key != "" {
			out.Keys++
		}
	}
	t.close(&err)
	t = nil
	if err != nil {
		return err
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

// writeCollection is info's report of a collection: its summary, each
// shard's rows and stream, and every node's request counts.
func (c *infoCmd) writeCollection(ctx context.Context, e *env, t *target, s umbra.Summary) error {
	cl := t.client
	js, err := jetstream.New(cl.Conn())
	if err != nil {
		return err
	}
	out := clusterInfoJSON{Collection: s.Name, Dim: s.Dim, Metric: s.Metric.String(), Precision: s.Precision.String(), Shards: s.Shards,
		NodeReplicas: t.col.NodeReplicas(), Rows: s.Rows, Count: s.Rows, Backend: s.Backend}
	rows, err := t.col.ShardRows(ctx)
	if err != nil {
		return err
	}
	for sh := range s.Shards {
		n := rows[sh]
		st, err := js.Stream(ctx, fmt.Sprintf("UMBRA_%s_%d", s.Name, sh))
		if err != nil {
			return fmt.Errorf("shard %d: %w", sh, err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			return fmt.Errorf("shard %d: %w", sh, err)
		}
		out.Streams = append(out.Streams, clusterShardLog{Shard: sh, Rows: n, Messages: info.State.Msgs, Bytes: info.State.Bytes,
			FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq, Replicas: info.Config.Replicas})
	}
	if out.Nodes, err = clusterNodes(ctx, cl); err != nil {
		return err
	}
	if c.JSON {
		return json.NewEncoder(e.stdout).Encode(out)
	}
	fmt.Fprintf(e.stdout, "collection %s: %d rows, dimension %d, %s, %d shards", out.Collection, out.Rows, out.Dim, out.Metric, out.Shards)
	if out.NodeReplicas > 0 {
		fmt.Fprintf(e.stdout, ", %d nodes each under placement", out.NodeReplicas)
	}
	fmt.Fprintln(e.stdout)
	fmt.Fprintf(e.stdout, "  backend: %s\n", out.Backend)
	for _, s := range out.Streams {
		fmt.Fprintf(e.stdout, "  shard %d: %d rows; stream: %d messages, %d bytes, sequences %d–%d, R%d\n", s.Shard, s.Rows, s.Messages, s.Bytes, s.FirstSeq, s.LastSeq, s.Replicas)
	}
	writeNodes(e.stdout, out.Nodes)
	return nil
}
