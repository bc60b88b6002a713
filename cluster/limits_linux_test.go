//go:build linux

package cluster

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
)

// Many large requests that ask to wait 49 days, sent at once to a node in
// its own process, leave it within the memory bound its limits document
// (Limits.MemoryBound); each is answered, behind after the clamped wait
// or refused as busy, the refusals are counted in its stats, and searches
// work right after. (Before the limits, 200 such requests held 1.9 GB.)
func TestNodeBoundedUnderFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server and a node process (skipped under -short)")
	}
	dir, srv, c := serverAndClient(t, Timeout(30*time.Second))
	ctx := context.Background()
	const dim = 8
	flood := 200
	if raceBuild {
		// The bound is not checked under the race detector (below), so
		// fewer rounds: enough in flight together to meet the node's
		// limits, not 800 MB through an instrumented server (32 s).
		flood = 48
	}
	col, err := c.Create(ctx, "flood", CollectionConfig{Dim: dim, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := testkit.Rand(t)
	vs := make([][]float32, 100)
	for i := range vs {
		vs[i] = testkit.Grid(r, dim)
		vs[i][0] += 1.0 / 64
	}
	if _, err := col.Add(ctx, umbra.Vectors(vs), umbra.NoWait()); err != nil {
		t.Fatal(err)
	}
	proc, _ := startChildNode(t, srv, dir+"/node")
	q := testkit.Grid(r, dim)
	q[1] += 1.0 / 64
	before, err := col.Search(ctx, q, 10)
	if err != nil {
		t.Fatal(err)
	}
	rest := procKiB(t, proc.Pid, "VmRSS")
	// ~4 MiB each (an allow list of 512Ki IDs), a token far past the
	// stream's end, the longest wait the wire can say.
	body := (&protocol.Request{Kind: protocol.KindSearch, MinSeq: 1 << 62, WaitMs: math.MaxUint32, K: 10, Allow: make([]uint64, 1<<19), Dim: dim, Queries: q}).Encode()
	inbox := nats.NewInbox()
	ch := make(chan *nats.Msg, 2*flood)
	sub, err := c.x.NC.ChanSubscribe(inbox+".*", ch)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// Published back to back, in rounds of 4 (16 MiB), each followed by
	// a row count on the same connection and subscription, answered once
	// the node's callback has taken the round: what the NATS server holds
	// for the node stays under its max_pending (64 MB; past it the server
	// disconnects the node as a slow consumer, which no limit of the
	// node's can help), and what NATS buffers in the node under
	// PendingBytes. The rounds take far less than the clamped wait, so
	// the requests are in flight together.
	pacingRefused := 0
	for i := range flood {
		if err := c.x.NC.PublishMsg(&nats.Msg{Subject: protocol.QuerySubject("flood", 0), Reply: fmt.Sprintf("%s.%d", inbox, i), Data: body}); err != nil {
			t.Fatal(err)
		}
		if i%4 == 3 {
			m, err := c.x.NC.Request(protocol.QuerySubject("flood", 0), (&protocol.Request{Kind: protocol.KindRows, WaitMs: 500}).Encode(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if p, err := protocol.DecodeReply(m.Data, protocol.KindRows); err != nil || p.Status != protocol.StatusOK {
				pacingRefused++
			}
		}
	}
	behind, busy := 0, 0
	seen := map[string]bool{}
	deadline := time.After(3 * time.Minute)
	for behind+busy < flood {
		select {
		case m := <-ch:
			if seen[m.Subject] {
				t.Fatalf("two answers to %s", m.Subject)
			}
			seen[m.Subject] = true
			p, err := protocol.DecodeReply(m.Data, protocol.KindSearch)
			switch {
			case err != nil:
				t.Fatalf("reply %s %v %q: %v", m.Subject, m.Header, m.Data, err)
			case p.Status == protocol.StatusBehind:
				behind++
			case p.Status == protocol.StatusError && strings.HasPrefix(p.Msg, "node busy: "):
				busy++
			default:
				t.Fatalf("reply status %d %q: want behind or busy", p.Status, p.Msg)
			}
		case <-deadline:
			t.Fatalf("%d of %d requests answered (%d behind, %d busy); the node holds %d MiB", behind+busy, flood, behind, busy, procKiB(t, proc.Pid, "VmRSS")>>10)
		}
	}
	peak := procKiB(t, proc.Pid, "VmHWM")
	bound := protocol.Limits{}.MemoryBound(1)
	t.Logf("%d requests of %d bytes: %d answered behind after the clamped wait, %d refused as busy; node VmRSS %d MiB at rest, VmHWM %d MiB after (bound: rest + %d MiB)",
		flood, len(body), behind, busy, rest>>10, peak>>10, bound>>20)
	if raceBuild {
		t.Logf("under the race detector: the bound is not checked (its shadow memory is several times what the node holds); .ci/run checks it without -race")
	} else if (peak-rest)<<10 > bound {
		t.Fatalf("the node's peak RSS %d MiB is over %d MiB at rest + the bound %d MiB", peak>>10, rest>>10, bound>>20)
	}
	stats, err := protocol.FetchStats(ctx, c.Conn(), 2*time.Second)
	if err != nil || len(stats) != 1 {
		t.Fatalf("stats of %d nodes: %v", len(stats), err)
	}
	s := stats[0]
	if refused := uint64(busy + pacingRefused); s.Refused.Total() != refused || s.Refused.InFlight+s.Refused.InFlightBytes != refused || s.Behind != uint64(behind) || s.ClampedWaits != uint64(behind) {
		t.Fatalf("stats %+v: want %d refused as busy (%d of them row counts between rounds), %d behind after clamped waits", s, refused, pacingRefused, behind)
	}
	if s.Dropped != 0 {
		t.Fatalf("stats %+v: NATS dropped requests", s)
	}
	after, err := col.Search(ctx, q, 10)
	if err != nil {
		t.Fatal(err)
	}
	sameHits(t, "after the flood", before, after)
}

// procKiB reads a field of /proc/PID/status, in KiB.
func procKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kib); err != nil {
				t.Fatalf("%s: %q: %v", field, l, err)
			}
			return kib
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
