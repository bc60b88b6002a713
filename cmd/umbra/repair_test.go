package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
)

// A shard stopped at a message of a newer format, from the command line:
// searches fail naming the message and 'umbra repair'; repair shows the
// message (text and --json); a skip of a readable message is refused;
// --skip records it (again: already recorded), and both nodes' replicas
// move on to the same sequence, the searches answering as a store built from the same file (the same
// scores; the cluster assigns IDs of its own).
func TestRepairFromTheCommandLine(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS server (skipped under -short)")
	}
	// Two nodes, each holding a replica of every shard.
	dir, srv, c, nodes := testCluster(t, 2)
	ctx := context.Background()

	rng := testkit.Rand(t)
	const n, dim = 50, 4
	data := writeMatrix(t, dir, "v.npy", randomMatrix(rng, n, dim), "")
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 3, dim), "")
	store := filepath.Join(dir, "ref.umbra")
	ok(t, runUmbra(t, "build", "--data", data, "--out", store))
	url := srv.URL()
	app, op := srv.ClientCreds(), srv.NodeCreds() // applications write and search; the operator repairs
	ok(t, runUmbra(t, "build", "--cluster", url, "--creds", app, "--collection", "fix", "--data", data))

	// A write of the next format version: checksummed, unknown here.
	body := []byte("a write in a format to come")
	msg := append([]byte{4, 0, 0, 0, 0}, body...)
	crc := crc32.Update(crc32.Checksum(msg[:1], crc32.MakeTable(crc32.Castagnoli)), crc32.MakeTable(crc32.Castagnoli), body)
	binary.LittleEndian.PutUint32(msg[1:5], crc)
	js, err := jetstream.New(c.Conn())
	require.NoError(t, err)
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: "umbra.w.fix.0", Data: msg})
	require.NoError(t, err)
	bad := ack.Sequence

	r := runUmbra(t, "search", "--cluster", url, "--creds", app, "--collection", "fix", "--queries", queries, "--k", "5")
	require.Equal(t, exitFailure, r.code, "%s", r)
	line := requireErrorLine(t, r)
	for _, want := range []string{fmt.Sprintf("stopped at stream message %d", bad), "format version 4", fmt.Sprintf("--shard 0 --skip %d", bad)} {
		require.Contains(t, line, want)
	}

	// An application's credentials may not read the stream or record a skip.
	r = runUmbra(t, "repair", "--cluster", url, "--creds", app, "--collection", "fix", "--shard", "0")
	require.Equal(t, exitFailure, r.code, r.String())
	require.Contains(t, r.stderr, "refused", r.String())
	out := ok(t, runUmbra(t, "repair", "--cluster", url, "--creds", op, "--collection", "fix", "--shard", "0")).stdout
	t.Logf("umbra repair:\n%s", out)
	for _, want := range []string{fmt.Sprintf("applied through message %d", bad-1), fmt.Sprintf("message %d (%d bytes, format version 4): replicas of this build stop at it", bad, len(msg)),
		fmt.Sprintf("first bytes: %x", msg), fmt.Sprintf("umbra repair --cluster %s --collection fix --shard 0 --skip %d", url, bad)} {
		require.Contains(t, out, want)
	}
	var rep protocol.ShardRepair
	require.NoError(t, json.Unmarshal([]byte(ok(t, runUmbra(t, "repair", "--cluster", url, "--creds", op, "--collection", "fix", "--shard", "0", "--json")).stdout), &rep))
	require.True(t, rep.Answered)
	require.Equal(t, bad-1, rep.Applied)
	require.NotNil(t, rep.Stop)
	require.Equal(t, [4]any{bad, len(msg), 4, protocol.VerdictStops}, [4]any{rep.Stop.Seq, rep.Stop.Size, rep.Stop.Version, rep.Stop.Verdict})
	require.Nil(t, rep.Stop.Skip)

	r = runUmbra(t, "repair", "--cluster", url, "--creds", op, "--collection", "fix", "--shard", "0", "--skip", fmt.Sprint(bad-1))
	require.Equal(t, exitFailure, r.code, "%s", r)
	require.Contains(t, requireErrorLine(t, r), "a readable write")
	r = runUmbra(t, "repair", "--cluster", url, "--creds", op, "--collection", "fix", "--shard", "1")
	require.Equal(t, exitUsage, r.code, "%s", r)
	require.Contains(t, requireErrorLine(t, r), "--shard 1: collection fix has shards 0 to 0")
	r = runUmbra(t, "repair", "--cluster", url, "--creds", op, "--shard", "0")
	require.Equal(t, exitUsage, r.code, "%s", r)
	require.Contains(t, requireErrorLine(t, r), "--collection")

	require.Contains(t, ok(t, runUmbra(t, "repair", "--cluster", url, "--creds", op, "--collection", "fix", "--shard", "0", "--skip", fmt.Sprint(bad))).stdout,
		fmt.Sprintf("recorded: every replica of shard 0 of fix skips message %d", bad))
	var again repairSkipJSON
	require.NoError(t, json.Unmarshal([]byte(ok(t, runUmbra(t, "repair", "--cluster", url, "--creds", op, "--collection", "fix", "--shard", "0", "--skip", fmt.Sprint(bad), "--json")).stdout), &again))
	require.False(t, again.Recorded)
	require.Equal(t, bad, again.Message.Skip.Seq)

	// Both replicas pass it, to the same sequence (the stream's last).
	deadline := time.Now().Add(30 * time.Second)
	for _, node := range nodes {
		for {
			if a, _ := node.Applied("fix", 0); a >= bad {
				break
			}
			require.True(t, time.Now().Before(deadline), "a node did not pass the skipped message")
			time.Sleep(50 * time.Millisecond)
		}
	}
	a0, _ := nodes[0].Applied("fix", 0)
	a1, _ := nodes[1].Applied("fix", 0)
	require.Equal(t, [2]uint64{bad, bad}, [2]uint64{a0, a1}, "the replicas' applied sequences")
	require.Contains(t, ok(t, runUmbra(t, "repair", "--cluster", url, "--creds", op, "--collection", "fix", "--shard", "0")).stdout, "the shard is not stopped")
	want := ok(t, runUmbra(t, "search", "--store", store, "--queries", queries, "--k", "5", "--json")).stdout
	got := ok(t, runUmbra(t, "search", "--cluster", url, "--creds", app, "--collection", "fix", "--queries", queries, "--k", "5", "--json")).stdout
	require.Equal(t, hitsOf(t, want), hitsOf(t, got))
	r = runUmbra(t, "repair", "--cluster", url, "--creds", op, "--collection", "fix", "--shard", "0", "--seq", fmt.Sprint(bad))
	require.Contains(t, ok(t, r).stdout, "a skip is recorded for it")
}

// hitsOf is the scores of search --json's output (a cluster assigns IDs
// of its own).
func hitsOf(t *testing.T, s string) [][]string {
	t.Helper()
	var out searchJSON
	require.NoError(t, json.Unmarshal([]byte(s), &out))
	var all [][]string
	for _, r := range out.Results {
		var hs []string
		for _, h := range r.Hits {
			hs = append(hs, fmt.Sprint(h.Score))
		}
		all = append(all, hs)
	}
	return all
}
