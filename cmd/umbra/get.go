package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
)

func (*getCmd) Help() string {
	return `Print the vectors STORE (or, with --cluster, the collection) holds under
the given IDs or keys, with their ID, key, metadata and payload, in the
order given. The vectors are as the store keeps them:
under cosine each is scaled to unit length. An ID or key that is not
stored, or one given twice, is an error naming it, and nothing is printed.

Get opens the store read-only, without its lock, so it works while
another process writes the store, and sees what that process had
acknowledged when get read it.

A --keys list takes each key as written between the commas (spaces are
part of a key).`
}

func (*getCmd) Examples() []string {
	return []string{
		"umbra get docs.umbra --ids 4,17",
		"umbra get notes.umbra --keys alice/m1,alice/m7 --json",
		"umbra get --cluster nats://127.0.0.1:4222 --creds node1/creds/client.nk --collection docs --ids 4,17",
	}
}

type getCmd struct {
	Store        string   `arg:"" optional:"" name:"store" help:"the store to read"`
	IDs          string   `name:"ids" placeholder:"LIST" help:"IDs separated by commas: --ids 4,17,230"`
	Keys         string   `name:"keys" placeholder:"LIST" help:"keys separated by commas, each as written: --keys alice/m1,alice/m7"`
	JSON         bool     `name:"json" help:"print JSON (schema: cmd/umbra/README.md)"`
	Extra        []string `arg:"" optional:"" hidden:""`
	clusterFlags `embed:""`
}

func (c *getCmd) Validate() error {
	if err := c.checkTarget(c.Store, "umbra get STORE --ids 1,2,3", c.Extra); err != nil {
		return err
	}
	switch {
	case c.IDs == "" && c.Keys == "":
		return usagef("missing the vectors to get: give --ids 1,2,3 or --keys a,b")
	case c.IDs != "" && c.Keys != "":
		return usagef("--ids and --keys exclude each other: give one")
	}
	return checkLists(c.IDs, c.Keys)
}

// getJSON is what get --json prints; README.md documents it.
type getJSON struct {
	Store      string       `json:"store"`                // the store's path ("" for a collection)
	Collection string       `json:"collection,omitempty"` // with --cluster: the collection
	Dim        int          `json:"dim"`
	Metric     string       `json:"metric"`
	Vectors    []storedJSON `json:"vectors"`
}

type storedJSON struct {
	ID      uint64          `json:"id"`
	Key     string          `json:"key,omitempty"` // only where the row has one
	Vector  []float32       `json:"vector"`
	Meta    json.RawMessage `json:"meta,omitempty"`    // only where the row has metadata
	Payload json.RawMessage `json:"payload,omitempty"` // only where the row has a payload
}

func (c *getCmd) Run(ctx context.Context, e *env) (err error) {
	// The lists are checked (Validate) and looked at again here for
	// repeats, before the store is opened.
	var ids []uint64
	var keys []string
	if c.IDs != "" {
		ids, _ = parseIDList(c.IDs)
		seen := make(map[uint64]int, len(ids))
		for i, id := range ids {
			if j, ok := seen[id]; ok {
				return fmt.Errorf("--ids: ID %d is given twice (entries %d and %d)", id, j+1, i+1)
			}
			seen[id] = i
		}
	} else {
		keys, _ = parseKeyList("--keys", c.Keys)
		if err := repeatedKey(keys, positions(len(keys)), "entries"); err != nil {
			return fmt.Errorf("--keys: %s", err)
		}
	}
	t, err := openTarget(ctx, e, c.Store, &c.clusterFlags, true, engine.Config{Device: engine.CPU})
	if err != nil {
		return err
	}
	defer t.close(&err)
	sel := umbra.Selection{IDs: ids, Keys: keys, Vectors: true, Meta: true, Payloads: true}
	recs, err := t.Get(ctx, sel)
	if err != nil {
		return fmt.Errorf("%s: %s", t.what(), cause(err))
	}
	// Get answers in ID order, without what is not stored: the rows go
	// back in the order given, and a missing one is named.
	byID := make(map[uint64]umbra.Record, len(recs))
	byKey := make(map[string]umbra.Record, len(recs))
	for _, r := range recs {
		byID[r.ID], byKey[r.Key] = r, r
	}
	var order []umbra.Record
	if keys != nil {
		var missing []string
		for _, k := range keys {
			r, ok := byKey[k]
			if !ok {
				missing = append(missing, k)
			}
			order = append(order, r)
		}
		if len(missing) > 0 {
			return fmt.Errorf("--keys: %s not stored in %s", someKeys(missing), t.label)
		}
	} else {
		var missing []uint64
		for _, id := range ids {
			r, ok := byID[id]
			if !ok {
				missing = append(missing, id)
			}
			order = append(order, r)
		}
		if len(missing) > 0 {
			return fmt.Errorf("--ids: %s not stored in %s", someIDs(missing), t.label)
		}
	}
	s, err := t.Summary(ctx)
	if err != nil {
		return fmt.Errorf("%s: %s", t.what(), cause(err))
	}
	out := getJSON{Store: c.Store, Collection: c.Collection, Dim: s.Dim, Metric: s.Metric.String(), Vectors: make([]storedJSON, len(order))}
	for i, r := range order {
		out.Vectors[i] = storedJSON{ID: r.ID, Key: r.Key, Vector: r.Vector, Payload: payloadJSON(r.Payload)}
		if len(r.Meta) > 0 {
			out.Vectors[i].Meta = r.Meta.AppendJSON(nil)
		}
	}
	if c.JSON {
		// One line: a vector may have thousands of components.
		return json.NewEncoder(e.stdout).Encode(out)
	}
	return writeGetText(e.stdout, out)
}

func writeGetText(w io.Writer, r getJSON) error {
	unit := ""
	if r.Metric == umbra.Cosine.String() {
		unit = ", each kept at unit length"
	}
	what := "store " + r.Store
	if r.Collection != "" {
		what = "collection " + r.Collection
	}
	fmt.Fprintf(w, "# %s: dimension %d, %s%s\n", what, r.Dim, r.Metric, unit)
	keyed, attrs := false, false
	for _, v := range r.Vectors {
		keyed = keyed || v.Key != ""
		attrs = attrs || v.Meta != nil || v.Payload != nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if keyed {
		fmt.Fprintln(tw, "id\tkey\tvector")
	} else {
		fmt.Fprintln(tw, "id\tvector")
	}
	if attrs {
		// Metadata and payloads go on lines of their own under their
		// vector: they are JSON of any length.
		defer func() {
			for _, v := range r.Vectors {
				if v.Meta != nil {
					fmt.Fprintf(w, "# %d meta %s\n", v.ID, v.Meta)
				}
				if v.Payload != nil {
					fmt.Fprintf(w, "# %d payload %s\n", v.ID, v.Payload)
				}
			}
		}()
	}
	var b strings.Builder
	for _, v := range r.Vectors {
		b.Reset()
		for j, x := range v.Vector {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.FormatFloat(float64(x), 'g', -1, 32))
		}
		if keyed {
			fmt.Fprintf(tw, "%d\t%s\t%s\n", v.ID, textKey(v.Key), b.String())
		} else {
			fmt.Fprintf(tw, "%d\t%s\n", v.ID, b.String())
		}
	}
	return tw.Flush()
}
