package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// nodeNATS are the nats.Connect options of a node's connection made by
// hand: its credentials and its inbox.
func nodeNATS(t *testing.T, creds string) []nats.Option {
	t.Helper()
	opt, err := nats.NkeyOptionFromSeed(creds)
	if err != nil {
		t.Fatal(err)
	}
	return []nats.Option{opt, nats.CustomInboxPrefix(protocol.NodeInboxPrefix)}
}

// noDenials fails the test at its end if the server refused c anything:
// what a role needs must be in its permissions.
func noDenials(t *testing.T, c *Client) {
	t.Cleanup(func() {
		if n, last := c.x.Denials(); n > 0 {
			t.Errorf("the server refused the connection %d requests, the last: %s", n, last)
		}
	})
}

// violations connects with creds and collects the permission violations
// the server reports on that connection.
type violations struct {
	nc *nats.Conn
	ch chan error
}

func connectWatched(t *testing.T, url string, opts ...nats.Option) *violations {
	t.Helper()
	v := &violations{ch: make(chan error, 64)}
	var err error
	v.nc, err = nats.Connect(url, append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case v.ch <- err:
		default:
		}
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.nc.Close)
	return v
}

// refused waits for the server's permission violation naming subject.
func (v *violations) refused(t *testing.T, what, subject string) {
	t.Helper()
	select {
	case err := <-v.ch:
		if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), `"`+subject+`"`) {
			t.Fatalf("%s: the server reported %v, want a permission violation for %q", what, err, subject)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no permission violation reported within 30 s (allowed?)", what)
	}
}

// request publishes a request to subject and waits for the violation; an
// answer instead fails the test.
func (v *violations) requestRefused(t *testing.T, what, subject string, body []byte) {
	t.Helper()
	inbox := v.nc.NewInbox()
	sub, err := v.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := v.nc.PublishRequest(subject, inbox, body); err != nil {
		t.Fatal(err)
	}
	v.refused(t, what, subject)
	if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("%s: answered: %s %s", what, m.Header, m.Data)
	}
}

func clientNATS(t *testing.T, creds string) nats.Option {
	t.Helper()
	opt, err := nats.NkeyOptionFromSeed(creds)
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

// Every server umbra starts refuses an anonymous client, and a key it
// does not know, at connect; the node's and the client's keys get in.
func TestEmbeddedRefusesAnonymous(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts NATS servers (skipped under -short)")
	}
	check := func(t *testing.T, srv *node.Embedded) {
		t.Helper()
		if nc, err := nats.Connect(srv.URL()); !errors.Is(err, nats.ErrAuthorization) {
			if nc != nil {
				nc.Close()
			}
			t.Fatalf("%s: anonymous connect: %v, want an authorization violation", srv.URL(), err)
		}
		_, err := Connect(context.Background(), srv.URL())
		if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "without credentials") || !strings.Contains(err.Error(), "creds/client.nk") {
			t.Fatalf("Connect without credentials: %v", err)
		}
		stranger := filepath.Join(t.TempDir(), "stranger.nk")
		kp, _ := nkeys.CreateUser()
		seed, _ := kp.Seed()
		if err := os.WriteFile(stranger, seed, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = Connect(context.Background(), srv.URL(), Credentials(stranger))
		if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), stranger) {
			t.Fatalf("Connect with an unknown key: %v", err)
		}
		for _, creds := range []string{srv.NodeCreds(), srv.ClientCreds()} {
			nc, err := nats.Connect(srv.URL(), clientNATS(t, creds))
			if err != nil {
				t.Fatalf("%s: %v", creds, err)
			}
			nc.Close()
		}
	}
	t.Run("single", func(t *testing.T) {
		srv, err := node.StartEmbedded(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		check(t, srv)
	})
	t.Run("routed", func(t *testing.T) {
		srvs := routedPair(t)
		for _, s := range srvs {
			check(t, s)
		}
	})
}

// routedPair starts two embedded servers routed to each other (one
// credentials directory) and waits for their route.
func routedPair(t *testing.T) []*node.Embedded {
	t.Helper()
	ports := []int{freePort(t), freePort(t)}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	creds := filepath.Join(t.TempDir(), "creds")
	var srvs []*node.Embedded
	for i, p := range ports {
		s, err := node.StartEmbedded(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: t.TempDir(), Name: fmt.Sprintf("r%d", i),
			ClusterName: "umbra-auth", ClusterListen: fmt.Sprintf("127.0.0.1:%d", p), Routes: routes, Creds: creds})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		srvs = append(srvs, s)
	}
	for deadline := time.Now().Add(time.Minute); srvs[0].Server().NumRoutes() == 0 || srvs[1].Server().NumRoutes() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the two servers did not route to each other within a minute (with the shared secret)")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return srvs
}

// A route connection that does not give the route secret is refused: a
// local user cannot join an embedded cluster as a server.
func TestEmbeddedRouteNeedsSecret(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts NATS servers (skipped under -short)")
	}
	srvs := routedPair(t)
	addr := srvs[0].Server().ClusterAddr().String()
	for _, tc := range []struct{ name, connect string }{
		{"no credentials", `{"verbose":false,"pedantic":false,"name":"intruder","cluster":"umbra-auth"}`},
		{"a wrong secret", `{"verbose":false,"pedantic":false,"user":"umbra-route","pass":"0123456789abcdef0123456789abcdef","name":"intruder","cluster":"umbra-auth"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			r := bufio.NewReader(conn)
			info, err := r.ReadString('\n')
			if err != nil || !strings.HasPrefix(info, "INFO ") {
				t.Fatalf("the route port said %q, %v; want its INFO", info, err)
			}
			if !strings.Contains(info, `"auth_required":true`) {
				t.Errorf("the route port's INFO does not ask for credentials: %s", info)
			}
			fmt.Fprintf(conn, "CONNECT %s\r\nPING\r\n", tc.connect)
			line, err := r.ReadString('\n')
			if err != nil || !strings.Contains(strings.ToLower(line), "authorization violation") {
				t.Fatalf("after a CONNECT %s the route port said %q, %v; want an authorization violation", tc.name, line, err)
			}
		})
	}
	// Every route the server holds is the other server's (pooled routes
	// may still be joining; an intruder's would name itself).
	rz, err := srvs[0].Server().Routez(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rz.Routes {
		if r.RemoteID != srvs[1].Server().ID() {
			t.Fatalf("a route from %q (%s), not from the other server %s", r.RemoteName, r.RemoteID, srvs[1].Server().ID())
		}
	}
}

// The credentials files are 0600 in a 0700 directory, kept across
// restarts; a file or directory others may read is refused, naming it.
func TestCredsFiles(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "creds")
	a, err := node.LoadCreds(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %04o, want 0700", dir, fi.Mode().Perm())
	}
	for _, f := range []string{node.NodeCredsFile, node.ClientCredsFile, node.RouteSecretFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", f, fi.Mode().Perm())
		}
	}
	if _, err := nats.NkeyOptionFromSeed(a.ClientFile()); err != nil {
		t.Fatalf("nats.go cannot read %s: %v", a.ClientFile(), err)
	}
	b, err := node.LoadCreds(dir)
	if err != nil {
		t.Fatal(err)
	}
	if *a != *b {
		t.Fatalf("read again, the credentials changed: %+v then %+v", a, b)
	}
	if a.NodePublicKey() == a.ClientPublicKey() || !nkeys.IsValidPublicUserKey(a.NodePublicKey()) || !nkeys.IsValidPublicUserKey(a.ClientPublicKey()) {
		t.Fatalf("public keys %q and %q", a.NodePublicKey(), a.ClientPublicKey())
	}
	// Readable by the group: refused, naming the file.
	if err := os.Chmod(a.ClientFile(), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := node.LoadCreds(dir); err == nil || !strings.Contains(err.Error(), a.ClientFile()) || !strings.Contains(err.Error(), "0640") {
		t.Fatalf("a 0640 file: %v", err)
	}
	if _, err := node.StartEmbedded(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: t.TempDir(), Creds: dir}); err == nil || !strings.Contains(err.Error(), a.ClientFile()) {
		t.Fatalf("StartEmbedded with a 0640 file: %v", err)
	}
	if err := os.Chmod(a.ClientFile(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := node.LoadCreds(dir); err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("a 0755 directory: %v", err)
	}
}

// A server restarted on the same directory takes the same keys: a client
// file read before the restart still gets in.
func TestEmbeddedCredsKeptAcrossRestarts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts NATS servers (skipped under -short)")
	}
	dir := t.TempDir()
	srv, err := node.StartEmbedded(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "creds", node.ClientCredsFile); srv.ClientCreds() != want {
		t.Fatalf("client credentials at %s, want %s", srv.ClientCreds(), want)
	}
	before, err := os.ReadFile(srv.ClientCreds())
	if err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(t.TempDir(), "client.nk")
	if err := os.WriteFile(saved, before, 0o600); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	srv, err = node.StartEmbedded(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	nc, err := nats.Connect(srv.URL(), clientNATS(t, saved))
	if err != nil {
		t.Fatalf("the client file from before the restart: %v", err)
	}
	nc.Close()
}

// Rotating makes new keys; a server started after refuses the old ones.
func TestEmbeddedRotateCreds(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts NATS servers (skipped under -short)")
	}
	dir := t.TempDir()
	srv, err := node.StartEmbedded(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	old := srv.Creds()
	oldFiles := map[string]string{}
	for _, f := range []string{old.NodeFile(), old.ClientFile()} {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		oldFiles[f] = filepath.Join(t.TempDir(), filepath.Base(f))
		if err := os.WriteFile(oldFiles[f], body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv.Close()
	rotated, err := node.RotateCreds(old.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if rotated.NodePublicKey() == old.NodePublicKey() || rotated.ClientPublicKey() == old.ClientPublicKey() || rotated.RouteSecret == old.RouteSecret {
		t.Fatal("rotation kept a key")
	}
	srv, err = node.StartEmbedded(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, f := range oldFiles {
		if _, err := Connect(context.Background(), srv.URL(), Credentials(f)); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("old credentials %s after rotation: %v, want ErrUnauthorized", f, err)
		}
	}
	for _, f := range []string{srv.NodeCreds(), srv.ClientCreds()} {
		nc, err := nats.Connect(srv.URL(), clientNATS(t, f))
		if err != nil {
			t.Fatalf("new credentials %s: %v", f, err)
		}
		nc.Close()
	}
}

// A client with the client credentials does everything an application
// does — create a collection (through a node), add with metadata, search,
// look up, count, read its streams' state, delete — and nothing else:
// every attempt to reach the streams or buckets around umbra's
// operations is refused by the server.
func TestClusterClientRole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	c, err := Connect(ctx, h.srv.URL(), Credentials(h.srv.ClientCreds()), Timeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	noDenials(t, c)
	r := testkit.Rand(t)
	const dim, n = 4, 60
	col, err := c.Create(ctx, "app", CollectionConfig{Dim: dim, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.Create(ctx, "app", CollectionConfig{Dim: dim, Shards: 2}); err != nil || again.meta.Shards != 2 {
		t.Fatalf("Create again: %v", err)
	}
	if _, err := c.Create(ctx, "app", CollectionConfig{Dim: dim, Shards: 3}); !errors.Is(err, ErrCollectionExists) {
		t.Fatalf("Create with other shards: %v, want ErrCollectionExists", err)
	}
	if _, err := c.Create(ctx, "huge", CollectionConfig{Dim: dim, MaxBytes: node.DefaultMaxStreamBytes + 1}); !errors.Is(err, umbra.ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxBytes") {
		t.Fatalf("Create over the node's byte limit: %v, want ErrInvalidConfig naming MaxBytes", err)
	}
	vs := make([][]float32, n)
	keys := make([]string, n)
	fields := make([]meta.Fields, n)
	for i := range vs {
		vs[i] = testkit.Grid(r, dim)
		vs[i][0] += 1.0 / 64
		keys[i] = fmt.Sprintf("doc-%d", i)
		fields[i] = meta.Fields{"user": meta.KeywordOf([]string{"ann", "bob"}[i%2])}
	}
	ids, err := col.Add(ctx, umbra.Vectors(vs), umbra.WithKeys(keys...), umbra.WithMeta(fields...))
	if err != nil {
		t.Fatal(err)
	}
	// A new field goes into the record through a node; a kind conflict
	// with it is refused.
	if _, err := col.Add(ctx, umbra.Vectors(vs[:1]), umbra.WithKeys("late"), umbra.WithMeta(meta.Fields{"n": meta.IntOf(3)})); err != nil {
		t.Fatal(err)
	}
	if _, err := col.Add(ctx, umbra.Vectors(vs[:1]), umbra.WithKeys("later"), umbra.WithMeta(meta.Fields{"user": meta.IntOf(3)})); !errors.Is(err, umbra.ErrInvalidMeta) {
		t.Fatalf("a kind conflict: %v", err)
	}
	f, err := meta.ParseWhere([]byte(`{"user": "` + []string{"ann", "bob"}[5%2] + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	hits, err := col.Search(ctx, vs[5], 3, umbra.Where(f))
	if err != nil || len(hits) != 3 || hits[0].ID != ids[5] && hits[0].Score < 0.99999 {
		t.Fatalf("search: %v, %v", hits, err)
	}
	held, err := col.Lookup(ctx, keys[:10]...)
	if err != nil || len(held) != 10 {
		t.Fatalf("lookup: %v, %v", held, err)
	}
	rows, err := col.ShardRows(ctx)
	if err != nil || rows[0]+rows[1] != n+1 {
		t.Fatalf("rows: %v, %v", rows, err)
	}
	js, _ := jetstream.New(c.Conn())
	st, err := js.Stream(ctx, protocol.StreamName("app", 0))
	if err != nil {
		t.Fatalf("stream info (umbra info): %v", err)
	}
	if err := col.Delete(ctx, umbra.WithKeys(keys[0])); err != nil {
		t.Fatal(err)
	}
	// A snapshot, so that the object store exists.
	if _, err := h.node.Snapshot(ctx, "app", 0); err != nil {
		t.Fatal(err)
	}

	v := connectWatched(t, h.srv.URL(), clientNATS(t, h.srv.ClientCreds()))
	s0 := protocol.StreamName("app", 0)
	for _, tc := range []struct{ what, subject, body string }{
		{"purge a stream", "$JS.API.STREAM.PURGE." + s0, ""},
		{"delete a stream", "$JS.API.STREAM.DELETE." + s0, ""},
		{"update a stream", "$JS.API.STREAM.UPDATE." + s0, `{"name":"` + s0 + `","subjects":["umbra.w.app.0"],"max_bytes":1}`},
		{"create a stream", "$JS.API.STREAM.CREATE.MINE", `{"name":"MINE","subjects":["umbra.w.>"]}`},
		{"create a consumer on a shard's stream", "$JS.API.CONSUMER.CREATE." + s0, `{"stream_name":"` + s0 + `","config":{"deliver_policy":"all","ack_policy":"none"}}`},
		{"create a named consumer on a shard's stream", "$JS.API.CONSUMER.CREATE." + s0 + ".spy", `{"stream_name":"` + s0 + `","config":{"name":"spy","deliver_policy":"all","ack_policy":"none"}}`},
		{"create a durable consumer on a shard's stream", "$JS.API.CONSUMER.DURABLE.CREATE." + s0 + ".spy", `{"stream_name":"` + s0 + `","config":{"durable_name":"spy","ack_policy":"none"}}`},
		{"read a shard's stream", "$JS.API.STREAM.MSG.GET." + s0, `{"seq":1}`},
		{"direct-read a shard's stream", "$JS.API.DIRECT.GET." + s0, `{"seq":1}`},
		{"direct-read a shard's stream by subject", "$JS.API.DIRECT.GET." + s0 + ".umbra.w.app.0", ``},
		{"list the streams", "$JS.API.STREAM.LIST", `{}`},
		{"list the stream names", "$JS.API.STREAM.NAMES", `{}`},
		{"read the snapshots", "$JS.API.CONSUMER.CREATE.OBJ_" + protocol.ObjectSnapshots, `{"stream_name":"OBJ_umbra_snapshots","config":{"deliver_policy":"all","ack_policy":"none"}}`},
		{"direct-read the snapshots", "$JS.API.DIRECT.GET.OBJ_" + protocol.ObjectSnapshots, `{"seq":1}`},
		{"read the snapshots' stream", "$JS.API.STREAM.MSG.GET.OBJ_" + protocol.ObjectSnapshots, `{"seq":1}`},
		{"purge a bucket", "$JS.API.STREAM.PURGE.KV_" + protocol.BucketCollections, ""},
		{"delete a consumer", "$JS.API.CONSUMER.DELETE." + s0 + ".x", ""},
		{"read the snapshot manifests", "$JS.API.DIRECT.GET.KV_" + protocol.BucketSnapshots + ".$KV.umbra_snapshots.app.0", ""},
	} {
		v.requestRefused(t, tc.what, tc.subject, []byte(tc.body))
	}
	for _, tc := range []struct{ what, subject string }{
		{"write the placement bucket", "$KV." + node.BucketPlacement + ".controller"},
		{"write the nodes bucket", "$KV." + node.BucketNodes + ".me"},
		{"write the snapshot manifests", "$KV." + protocol.BucketSnapshots + ".app.0"},
		{"write a collection record", "$KV." + protocol.BucketCollections + ".app"},
		{"write the snapshot store", "$O." + protocol.ObjectSnapshots + ".M.x"},
		{"answer another client's request", "_INBOX.someone.1.1"},
		{"answer a node's request", protocol.NodeInboxPrefix + ".x"},
		{"ack a message", "$JS.ACK.x"},
	} {
		if err := v.nc.Publish(tc.subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		v.refused(t, tc.what, tc.subject)
	}
	for _, subject := range []string{"umbra.q.>", "umbra.q.app.0", "umbra.w.>", "umbra.admin.>", "umbra.>", protocol.NodeInboxPrefix + ".>", ">", "$KV.>"} {
		if _, err := v.nc.Subscribe(subject, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		v.refused(t, "subscribe to "+subject, subject)
	}
	if _, err := v.nc.QueueSubscribe("umbra.q.app.0", protocol.QueueGroup("app", 0), func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	v.refused(t, "join a shard's queue group", "umbra.q.app.0")

	// The collection is whole after all that.
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs == 0 || info.Config.MaxBytes != 1<<30 {
		t.Fatalf("stream after the refused attempts: %+v, %v", info, err)
	}
	hits, err = col.Search(ctx, vs[7], 1)
	if err != nil || len(hits) != 1 || hits[0].ID != ids[7] && hits[0].Score < 0.99999 {
		t.Fatalf("search after: %v, %v", hits, err)
	}
}

// Without a node, a client's credentials cannot create a collection
// themselves, and say so; the node's can (the direct path, as before
// nodes answered creates).
func TestClusterClientCreateNeedsANode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS server (skipped under -short)")
	}
	_, srv, nodeC := serverAndClient(t, Timeout(20*time.Second))
	ctx := context.Background()
	c, err := Connect(ctx, srv.URL(), Credentials(srv.ClientCreds()), Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Create(ctx, "x", CollectionConfig{Dim: 3})
	if err == nil || !strings.Contains(err.Error(), "no umbra node answered") || !strings.Contains(err.Error(), "$JS.API.STREAM.CREATE.UMBRA_x_0") {
		t.Fatalf("client Create without a node: %v", err)
	}
	t.Log(err)
	if _, err := nodeC.Create(ctx, "x", CollectionConfig{Dim: 3}); err != nil {
		t.Fatalf("node Create without a node: %v", err)
	}
	// Before any node made the buckets, a client cannot open them.
	dir := t.TempDir()
	fresh, err := node.StartEmbedded(node.EmbeddedConfig{Listen: "127.0.0.1:0", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	_, err = Connect(ctx, fresh.URL(), Credentials(fresh.ClientCreds()), Timeout(5*time.Second))
	if err == nil || !strings.Contains(err.Error(), "start an umbra node") {
		t.Fatalf("client Connect before any node: %v", err)
	}
	t.Log(err)
}

// Concurrent creates of one name through the nodes end the same: one
// layout stands, the same record for all that asked it, the others
// ErrCollectionExists.
func TestClusterConcurrentCreates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	var clients []*Client
	for range 4 {
		c, err := Connect(ctx, h.srv.URL(), Credentials(h.srv.ClientCreds()), Timeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		noDenials(t, c)
		clients = append(clients, c)
	}
	for round, shards := range [][]int{{2, 2, 2, 2}, {1, 3, 1, 3}} {
		name := fmt.Sprintf("race%d", round)
		cols := make([]*Collection, len(clients))
		errs := make([]error, len(clients))
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Go(func() {
				cols[i], errs[i] = c.Create(ctx, name, CollectionConfig{Dim: 3, Shards: shards[i], MaxBytes: int64(1+i) << 20})
			})
		}
		wg.Wait()
		var won []int
		for i, err := range errs {
			switch {
			case err == nil:
				won = append(won, cols[i].meta.Shards)
			case !errors.Is(err, ErrCollectionExists):
				t.Fatalf("%s: client %d: %v", name, i, err)
			}
		}
		if len(won) == 0 || slices.Min(won) != slices.Max(won) {
			t.Fatalf("%s: the creates that succeeded have shards %v", name, won)
		}
		stored, err := h.c.Open(ctx, name)
		if err != nil || stored.meta.Shards != won[0] {
			t.Fatalf("%s: stored %v, %v; the winners have %d shards", name, stored, err, won[0])
		}
		for i, s := range shards {
			if s == won[0] && errs[i] != nil {
				t.Fatalf("%s: client %d asked for the layout that stands and got %v", name, i, errs[i])
			}
		}
	}
}

var _ = json.Marshal
