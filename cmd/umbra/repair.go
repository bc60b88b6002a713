package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/umbravec/umbra/internal/cluster/protocol"
)

type repairCmd struct {
	Shard        int    `name:"shard" required:"" placeholder:"S" help:"the shard (0 to the collection's shards - 1)"`
	Seq          uint64 `name:"seq" placeholder:"SEQ" help:"say what a replica does with message SEQ of the shard's stream, rather than find where the shard stopped"`
	Skip         uint64 `name:"skip" placeholder:"SEQ" help:"record that every replica of the shard skips message SEQ: one whose checksum holds and whose format version is newer than this build's (the message the shard stopped at)"`
	JSON         bool   `name:"json" help:"print the same as JSON (schema: cmd/umbra/README.md)"`
	clusterFlags `embed:""`
}

func (*repairCmd) Help() string {
	return `Inspect and repair a cluster shard that stopped at a stream message.

Every message in a shard's stream carries a format version and a CRC-32C.
A message no build can read (too short, a checksum that fails, a body that
does not decode) is skipped by every replica on its own and needs nothing
here. A message whose checksum holds but whose format version is newer
than the node's was written by a newer umbra: the shard's replicas stop
there (searches and writes on the shard fail naming it), because skipping
it on some replicas and applying it on upgraded ones would make them
differ. The way out is to upgrade umbra on the nodes, or to skip it here.

Without --seq or --skip, repair asks a replica of the shard how far it
applied, reads the shard's stream from there, and prints the first message
a replica stops at (sequence, size, format version, why, its first bytes,
and whether a skip is recorded), or says none does. --seq SEQ inspects
one message. --skip SEQ records, in the cluster's KV bucket umbra_repairs,
that every replica skips exactly that message (named by its sequence,
length and checksum): a replica stopped there moves on within a second,
and one that reaches it later skips it too, so all of them keep the same
rows. A skip is refused for a message replicas apply or skip on their own.
Use the repair command of the build the nodes run: a message is judged by
the format versions this build reads. Skip only while no node holding the
shard reads the message's format: a node of a newer build applies it, and
the replicas would then differ; once one does, upgrade the others.`
}

func (*repairCmd) Examples() []string {
	return []string{
		"umbra repair --cluster nats://127.0.0.1:4222 --collection docs --shard 2",
		"umbra repair --cluster nats://127.0.0.1:4222 --collection docs --shard 2 --skip 1841",
		"umbra repair --cluster nats://127.0.0.1:4222 --collection docs --shard 2 --seq 1841 --json",
	}
}

func (c *repairCmd) Validate() error {
	switch {
	case c.Cluster == "":
		return usagef("repair needs --cluster URL and --collection NAME")
	case c.Collection == "":
		return usagef("--cluster needs --collection NAME")
	case c.Shard < 0:
		return usagef("--shard %d: a shard is 0 or more", c.Shard)
	case c.Seq != 0 && c.Skip != 0:
		return usagef("--seq and --skip exclude each other")
	}
	return nil
}

// repairSkipJSON is what repair --skip --json prints.
type repairSkipJSON struct {
	Recorded bool                    `json:"recorded"` // false: the skip was recorded before
	Message  *protocol.MessageReport `json:"message"`
}

func (c *repairCmd) Run(ctx context.Context, e *env) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Minute)
		defer cancel()
	}
	x, err := c.dial(ctx, c.Cluster, false)
	if err != nil {
		return err
	}
	defer x.Close()
	col, err := protocol.NewRepairer(ctx, x, c.Collection, 3*time.Second)
	if err != nil {
		return err
	}
	if c.Shard >= col.Shards() {
		return usagef("--shard %d: collection %s has shards 0 to %d", c.Shard, c.Collection, col.Shards()-1)
	}
	switch {
	case c.Skip != 0:
		m, created, err := col.Skip(ctx, c.Shard, c.Skip)
		if err != nil {
			return fmt.Errorf("--skip %d: %w", c.Skip, err)
		}
		if c.JSON {
			return json.NewEncoder(e.stdout).Encode(repairSkipJSON{Recorded: created, Message: m})
		}
		if created {
			fmt.Fprintf(e.stdout, "recorded: every replica of shard %d of %s skips message %d (%d bytes, format version %d, crc32c %08x); a replica stopped there moves on within a second\n",
				c.Shard, c.Collection, m.Seq, m.Size, m.Version, m.Skip.CRC32C)
		} else {
			fmt.Fprintf(e.stdout, "already recorded at %s: every replica of shard %d of %s skips message %d\n", m.Skip.At.Format(time.RFC3339), c.Shard, c.Collection, m.Seq)
		}
		return nil
	case c.Seq != 0:
		m, err := col.Inspect(ctx, c.Shard, c.Seq)
		if err != nil {
			return fmt.Errorf("--seq %d: %w", c.Seq, err)
		}
		if c.JSON {
			return json.NewEncoder(e.stdout).Encode(m)
		}
		writeMessageReport(e.stdout, c, m)
		return nil
	}
	rep, err := col.FindStop(ctx, c.Shard)
	if err != nil {
		return err
	}
	if c.JSON {
		return json.NewEncoder(e.stdout).Encode(rep)
	}
	w := e.stdout
	fmt.Fprintf(w, "collection %s, shard %d: stream %s holds messages %d to %d\n", rep.Collection, rep.Shard, rep.Stream, rep.FirstSeq, rep.LastSeq)
	if rep.Answered {
		fmt.Fprintf(w, "a replica says it applied through message %d\n", rep.Applied)
		if rep.ReplicaSays != "" {
			fmt.Fprintf(w, "  and answers: %s\n", rep.ReplicaSays)
		}
	} else {
		fmt.Fprintln(w, "no replica answered: reading the stream from its first message")
	}
	if len(rep.Unreadable) > 0 {
		fmt.Fprintf(w, "unreadable messages, which every replica skips on its own: %v\n", rep.Unreadable)
	}
	if rep.Stop == nil {
		if rep.ScannedFrom > rep.LastSeq {
			fmt.Fprintln(w, "no message after that: the shard is not stopped")
		} else {
			fmt.Fprintf(w, "messages %d to %d read: none stops a replica of this build\n", rep.ScannedFrom, rep.LastSeq)
		}
		return nil
	}
	writeMessageReport(w, c, rep.Stop)
	return nil
}

func writeMessageReport(w io.Writer, c *repairCmd, m *protocol.MessageReport) {
	verdict := map[string]string{protocol.VerdictApplies: "a readable write, which replicas apply",
		protocol.VerdictUnreadable: "unreadable", protocol.VerdictStops: "replicas of this build stop at it"}[m.Verdict]
	first := fmt.Sprintf("format version %d", m.Version)
	switch {
	case m.Version < 0:
		first = "empty"
	case m.Verdict == protocol.VerdictUnreadable:
		first = fmt.Sprintf("first byte %d", m.Version)
	}
	fmt.Fprintf(w, "message %d (%d bytes, %s): %s", m.Seq, m.Size, first, verdict)
	if m.Reason != "" {
		fmt.Fprintf(w, ": %s", m.Reason)
	}
	fmt.Fprintf(w, "\n  first bytes: %s\n", m.Head)
	switch {
	case m.Skip != nil:
		fmt.Fprintf(w, "  a skip is recorded for it (at %s): every replica passes it\n", m.Skip.At.Format(time.RFC3339))
	case m.Verdict == protocol.VerdictStops:
		fmt.Fprintf(w, "  way out: upgrade umbra on the nodes holding the shard, or skip it on every replica with\n"+
			"  umbra repair --cluster %s --collection %s --shard %d --skip %d\n", c.Cluster, c.Collection, c.Shard, m.Seq)
	case m.Verdict == protocol.VerdictUnreadable:
		fmt.Fprintln(w, "  every replica skips it on its own, recording it as refused")
	}
}
