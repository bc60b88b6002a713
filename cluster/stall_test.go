package cluster

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/testkit"
)

// lossyProxy forwards NATS client connections to a server. While it is
// cut, it drops every message in both directions (PUB/HPUB from the
// client, MSG/HMSG from the server) and forwards the rest of the protocol
// (PING, PONG, SUB, INFO…), so the connection stays up while nothing gets
// through: what a client sees of a server that stopped (SIGSTOP) and lost
// what it was sent meanwhile, or of a route that dropped deliveries.
type lossyProxy struct {
	ln     net.Listener
	target string
	cut    atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newLossyProxy(t *testing.T, target string) *lossyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{ln: ln, target: target}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Go(func() { p.pump(s, c, "PUB", "HPUB"); c.Close(); s.Close() })
			p.wg.Go(func() { p.pump(c, s, "MSG", "HMSG"); c.Close(); s.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.dropConns()
		p.wg.Wait()
	})
	return p
}

func (p *lossyProxy) url() string { return "nats://" + p.ln.Addr().String() }

// dropConns closes every proxied connection (the client reconnects
// through the proxy).
func (p *lossyProxy) dropConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// pump copies src to dst one protocol line (and its payload) at a time,
// dropping the messages whose verb is one of msgVerbs while cut.
func (p *lossyProxy) pump(dst io.Writer, src io.Reader, msgVerbs ...string) {
	br := bufio.NewReaderSize(src, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		verb, _, _ := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
		isMsg := false
		for _, v := range msgVerbs {
			if string(bytes.ToUpper(verb)) == v {
				isMsg = true
			}
		}
		drop := isMsg && p.cut.Load()
		out := line
		if isMsg {
			// The last field is the size of what follows (headers and
			// body), then CRLF.
			fields := bytes.Fields(line)
			size, err := strconv.Atoi(string(fields[len(fields)-1]))
			if err != nil {
				return
			}
			body := make([]byte, size+2)
			if _, err := io.ReadFull(br, body); err != nil {
				return
			}
			out = append(line, body...)
		}
		if drop {
			continue
		}
		if _, err := dst.Write(out); err != nil {
			return
		}
	}
}

// A node whose connection stays up while nothing gets through for a few
// seconds (its server stopped and lost what it was sent, deliveries to it
// included) resumes after, without a further write to show it a gap:
// missing heartbeats end its consumer and it follows again from what it
// applied. Then the same with the connection dropped right after the
// deliveries were lost: the reconnect ends its consumer. Before, the
// node's ordered consumer noticed nothing in either case (its heartbeats
// came again, the lost messages counted as delivered) and the node stayed
// behind until the next write.
func TestClusterNodeResumesAfterLostDeliveries(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS server (skipped under -short)")
	}
	for _, tc := range []struct {
		name      string
		reconnect bool
	}{{"silent", false}, {"reconnect", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			dir := t.TempDir()
			srv, err := node.StartEmbedded(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			c, err := Connect(ctx, srv.URL(), Credentials(srv.NodeCreds()), Timeout(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			px := newLossyProxy(t, srv.URL()[len("nats://"):])
			nc, err := nats.Connect(px.url(), append(nodeNATS(t, srv.NodeCreds()), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))...)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			cNode, err := NewClient(ctx, nc, AsNode())
			if err != nil {
				t.Fatal(err)
			}
			const dim = 5
			col, err := c.Create(ctx, "l", CollectionConfig{Dim: dim, Shards: 2})
			if err != nil {
				t.Fatal(err)
			}
			node, err := node.Start(ctx, cNode.x, node.Config{Dir: t.TempDir(), Device: engine.CPU, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			defer node.Close()
			r := testkit.Rand(t)
			ref := newMirror(t, dim, umbra.Cosine)
			next := uint64(1)
			write := func(opts ...umbra.WriteOption) {
				t.Helper()
				vs := make([][]float32, 6)
				ids := make([]uint64, len(vs))
				for i := range vs {
					vs[i] = testkit.Grid(r, dim)
					vs[i][0] += 1.0 / 64
					ids[i] = next
					next++
				}
				if _, err := col.Add(ctx, umbra.Vectors(vs), append(opts, umbra.WithIDs(ids...))...); err != nil {
					t.Fatal(err)
				}
				if _, err := ref.ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...)); err != nil {
					t.Fatal(err)
				}
			}
			// Applied by the node (the write waits for it).
			write()
			before := node.AppliedAll("l", 2)
			px.cut.Store(true)
			// Delivered to the node by the server, lost on the way.
			write(umbra.NoWait())
			write(umbra.NoWait())
			tok := col.Token()
			if tc.reconnect {
				// Lost, then the connection drops at once (well
				// within two heartbeats).
				time.Sleep(100 * time.Millisecond)
			} else {
				// Long enough for the heartbeats to be missed.
				time.Sleep(3 * time.Second)
			}
			if got := node.AppliedAll("l", 2); !slices.Equal(got, before) {
				t.Fatalf("the node applied %v while cut (from %v): the proxy let messages through", got, before)
			}
			px.cut.Store(false)
			if tc.reconnect {
				px.dropConns()
			}
			q := testkit.Grid(r, dim)
			k := int(next) + 5
			got, err := col.Search(ctx, q, k, umbra.AfterToken(tok))
			if err != nil {
				t.Fatalf("after the lost deliveries (applied %v, token %v): %v", node.AppliedAll("l", 2), tok, err)
			}
			want, _ := ref.ix.Search(ctx, q, k)
			sameHits(t, "after the lost deliveries", want, got)
		})
	}
}
