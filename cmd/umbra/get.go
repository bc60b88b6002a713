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
	return `Print the vectors STORE holds under the given IDs or keys, with their
ID and key, in the order given. The vectors are as the store keeps them:
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
	}
}

type getCmd struct {
	Store string   `arg:"" optional:"" name:"store" help:"the store to read"`
	IDs   string   `name:"ids" placeholder:"LIST" help:"IDs separated by commas: --ids 4,17,230"`
	Keys  string   `name:"keys" placeholder:"LIST" help:"keys separated by commas, each as written: --keys alice/m1,alice/m7"`
	JSON  bool     `name:"json" help:"print JSON (schema: cmd/umbra/README.md)"`
	Extra []string `arg:"" optional:"" hidden:""`
}

func (c *getCmd) Validate() error {
	switch {
	case c.Store == "":
		return usagef("missing STORE: umbra get STORE --ids 1,2,3")
	case len(c.Extra) > 0:
		return usagef("unexpected argument %q", c.Extra[0])
	case c.IDs == "" && c.Keys == "":
		return usagef("missing the vectors to get: give --ids 1,2,3 or --keys a,b")
	case c.IDs != "" && c.Keys != "":
		return usagef("--ids and --keys exclude each other: give one")
	}
	if c.IDs != "" {
		if _, err := parseIDList(c.IDs); err != nil {
			return usagef("%s", err)
		}
	}
	if c.Keys != "" {
		if _, err := parseKeyList("--keys", c.Keys); err != nil {
			return usagef("%s", err)
		}
	}
	return nil
}

// getJSON is what get --json prints; README.md documents it.
type getJSON struct {
	Store   string       `json:"store"`
	Dim     int          `json:"dim"`
	Metric  string       `json:"metric"`
	Vectors []storedJSON `json:"vectors"`
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
	ix, err := openStoreReadOnly(ctx, e, c.Store, engine.Config{Device: engine.CPU})
	if err != nil {
		return err
	}
	defer closeStore(c.Store, ix, &err)
	if keys != nil {
		if missing := unstoredKeys(ix, keys); len(missing) > 0 {
			return fmt.Errorf("--keys: %s not stored in %s", someKeys(missing), c.Store)
		}
		for _, k := range keys {
			id, _ := ix.Lookup(k)
			ids = append(ids, id)
		}
	} else {
		var missing []uint64
		for _, id := range ids {
			if !ix.Has(id) {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("--ids: %s not stored in %s", someIDs(missing), c.Store)
		}
	}
	out := getJSON{Store: c.Store, Dim: ix.Dim(), Metric: ix.Metric().String(), Vectors: make([]storedJSON, len(ids))}
	for i, id := range ids {
		v, err := ix.Vector(id)
		if err != nil {
			return fmt.Errorf("store %s: %s", c.Store, cause(err))
		}
		key, _ := ix.KeyOf(id)
		out.Vectors[i] = storedJSON{ID: id, Key: key, Vector: v}
		if f, err := ix.Meta(id); err != nil {
			return fmt.Errorf("store %s: %s", c.Store, cause(err))
		} else if len(f) > 0 {
			out.Vectors[i].Meta = f.AppendJSON(nil)
		}
		p, err := ix.Payload(id)
		if err != nil {
			return fmt.Errorf("store %s: %s", c.Store, cause(err))
		}
		out.Vectors[i].Payload = payloadJSON(p)
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
	fmt.Fprintf(w, "# store %s: dimension %d, %s%s\n", r.Store, r.Dim, r.Metric, unit)
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
