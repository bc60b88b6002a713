package cluster

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/cluster/node"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
)

// The example public keys of docs/nats/auth.conf (their seeds were thrown
// away).
const (
	docNodeKey   = "UBW2KTYZS5T3MTUXCYW3RRXWQ2KPHCKB5LS6Q2PEBCRGXO5OJ3UQSKHI"
	docClientKey = "UBBY3YUN25WJU6ZXYN2UE35UT5ZZSLH7QSDDUPRFXSAV3TTSX5GXKGPV"
)

// testCA writes a certificate authority and a server certificate it
// signed (for 127.0.0.1, localhost and host1..3, usable by servers and
// clients) under dir, as ca.pem, server-cert.pem and server-key.pem.
func testCA(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "umbra test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	write("ca.pem", "CERTIFICATE", caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "umbra test server"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost", "host1", "host2", "host3"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	write("server-cert.pem", "CERTIFICATE", der)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write("server-key.pem", "EC PRIVATE KEY", keyDER)
}

// docConfig copies the configuration docs/nats/NAME and the auth.conf it
// includes into a directory of the test's, with the files it names there
// (TLS under tls/, the store under js/) and nodeKey and clientKey in
// place of the example keys, and returns the copy's path. Nothing else of
// the text changes.
func docConfig(t *testing.T, name, nodeKey, clientKey string) (path, dir string) {
	t.Helper()
	dir = t.TempDir()
	testCA(t, filepath.Join(dir, "tls"))
	for _, f := range []string{name, "auth.conf"} {
		body, err := os.ReadFile(filepath.Join("..", "docs", "nats", f))
		if err != nil {
			t.Fatal(err)
		}
		text := string(body)
		for _, r := range [][2]string{
			{"/etc/nats/tls/", filepath.Join(dir, "tls") + "/"},
			{"/var/lib/nats/", filepath.Join(dir, "js") + "/"},
			{docNodeKey, nodeKey},
			{docClientKey, clientKey},
		} {
			text = strings.ReplaceAll(text, r[0], r[1])
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, name), dir
}

// sameAllow compares a permission's allow lists, in any order.
func sameAllow(t *testing.T, what string, got, want *server.SubjectPermission) {
	t.Helper()
	if got == nil || want == nil {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	g, w := slices.Sorted(slices.Values(got.Allow)), slices.Sorted(slices.Values(want.Allow))
	if !slices.Equal(g, w) || len(got.Deny) != 0 {
		t.Fatalf("%s: allow %q deny %q, want allow %q (auth.go)", what, g, got.Deny, w)
	}
}

// checkDocUsers checks the users a documented configuration gives: the
// two keys, each with its role's permissions as auth.go has them.
func checkDocUsers(t *testing.T, path string, o *server.Options, nodeKey, clientKey string) {
	t.Helper()
	if len(o.Nkeys) != 2 || len(o.Users) != 0 || o.NoAuthUser != "" {
		t.Fatalf("%s: %d nkey users, %d other users, no_auth_user %q; want the node and the client only", path, len(o.Nkeys), len(o.Users), o.NoAuthUser)
	}
	for _, u := range o.Nkeys {
		want := map[string]struct {
			role  string
			perms func() *server.Permissions
		}{nodeKey: {"node", node.NodePermissions}, clientKey: {"client", node.ClientPermissions}}[u.Nkey]
		if want.perms == nil {
			t.Fatalf("%s: a user %s", path, u.Nkey)
		}
		if u.Permissions == nil {
			t.Fatalf("%s: the %s user has no permissions", path, want.role)
		}
		sameAllow(t, path+": "+want.role+" publish", u.Permissions.Publish, want.perms().Publish)
		sameAllow(t, path+": "+want.role+" subscribe", u.Permissions.Subscribe, want.perms().Subscribe)
	}
}

// The server configurations docs/cluster.md gives for three servers parse
// as nats-server reads them, with what umbra needs: JetStream with every
// write fsynced before it is acknowledged, a max payload that holds a row
// with a 1 MiB payload, the three routes of one cluster with their
// password over verified TLS, TLS for clients, and umbra's two users.
func TestDocumentedNATSConfigs(t *testing.T) {
	t.Parallel()
	for i := 1; i <= 3; i++ {
		path, dir := docConfig(t, fmt.Sprintf("nats-%d.conf", i), docNodeKey, docClientKey)
		o, err := server.ProcessConfigFile(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		routeAuth := len(o.Routes) == 3
		for _, r := range o.Routes {
			if p, _ := r.User.Password(); r.User.Username() != o.Cluster.Username || p != o.Cluster.Password {
				routeAuth = false
			}
		}
		switch {
		case !o.JetStream || !o.SyncAlways:
			t.Errorf("%s: JetStream %v, sync always %v; want both", path, o.JetStream, o.SyncAlways)
		case o.MaxPayload < 2<<20:
			t.Errorf("%s: max payload %d, want at least 2 MiB (a row with a 1 MiB payload)", path, o.MaxPayload)
		case o.Cluster.Name != "umbra" || len(o.Routes) != 3:
			t.Errorf("%s: cluster %q with %d routes, want umbra with 3", path, o.Cluster.Name, len(o.Routes))
		case o.Cluster.Username == "" || o.Cluster.Password == "" || !routeAuth:
			t.Errorf("%s: routes without the cluster's user and password", path)
		case o.Cluster.TLSConfig == nil || o.Cluster.TLSConfig.ClientCAs == nil:
			t.Errorf("%s: routes without verified TLS", path)
		case o.TLSConfig == nil:
			t.Errorf("%s: clients without TLS", path)
		case o.ServerName != fmt.Sprintf("n%d", i) || o.StoreDir != filepath.Join(dir, "js", fmt.Sprintf("n%d", i)):
			t.Errorf("%s: server %q, store %q", path, o.ServerName, o.StoreDir)
		}
		checkDocUsers(t, path, o, docNodeKey, docClientKey)
	}
}

// fencedBlocks returns the fenced code blocks of a markdown text.
func fencedBlocks(md string) []string {
	var out []string
	parts := strings.Split(md, "\n```")
	for i := 1; i+1 < len(parts); i += 2 {
		block := parts[i]
		if nl := strings.IndexByte(block, '\n'); nl >= 0 {
			block = block[nl+1:] // after the fence's info string
		}
		out = append(out, block+"\n")
	}
	return out
}

// The external server configuration docs/cluster.md shows ("Security":
// docs/nats/single.conf and the auth.conf it includes, which the page
// shows verbatim) runs: nats-server started from that text, with test
// certificates and keys, admits an umbra node and a client over TLS with
// their credentials, which create, write and search a collection; it
// refuses an anonymous client, a client without TLS, and the client's
// attempt to purge a stream.
func TestSecureNATSConfig(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS server (skipped under -short)")
	}
	md, err := os.ReadFile(filepath.Join("..", "docs", "cluster.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(string(md))
	for _, f := range []string{"single.conf", "auth.conf"} {
		body, err := os.ReadFile(filepath.Join("..", "docs", "nats", f))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(blocks, string(body)) {
			t.Errorf("docs/cluster.md does not show docs/nats/%s as it is (a fenced block of the file's text)", f)
		}
	}
	creds, err := node.LoadCreds(filepath.Join(t.TempDir(), "creds"))
	if err != nil {
		t.Fatal(err)
	}
	path, dir := docConfig(t, "single.conf", creds.NodePublicKey(), creds.ClientPublicKey())
	o, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	checkDocUsers(t, path, o, creds.NodePublicKey(), creds.ClientPublicKey())
	switch {
	case !o.JetStream || !o.SyncAlways || o.MaxPayload < 8<<20 || o.TLSConfig == nil:
		t.Fatalf("%s: JetStream %v, sync always %v, max payload %d, TLS %v", path, o.JetStream, o.SyncAlways, o.MaxPayload, o.TLSConfig != nil)
	}
	// The test's own port on loopback, not 0.0.0.0:4222; nothing else.
	o.Host, o.Port, o.NoSigs, o.NoLog = "127.0.0.1", server.RANDOM_PORT, true, true
	srv, err := node.StartServer(o)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	url := fmt.Sprintf("tls://127.0.0.1:%d", srv.Server().Addr().(*net.TCPAddr).Port)
	ca := filepath.Join(dir, "tls", "ca.pem")
	ctx := context.Background()

	if nc, err := nats.Connect(url, nats.RootCAs(ca)); !errors.Is(err, nats.ErrAuthorization) {
		if nc != nil {
			nc.Close()
		}
		t.Fatalf("anonymous over TLS: %v, want an authorization violation", err)
	}
	// A client that does not start TLS gets no further than the INFO
	// that asks for it.
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "tls://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	rd := bufio.NewReader(conn)
	info, err := rd.ReadString('\n')
	if err != nil || !strings.Contains(info, `"tls_required":true`) {
		t.Fatalf("the server's INFO: %q, %v; want tls_required", info, err)
	}
	fmt.Fprintf(conn, "CONNECT {\"verbose\":false}\r\nPING\r\n")
	if line, err := rd.ReadString('\n'); err == nil && strings.HasPrefix(line, "PONG") {
		t.Fatalf("a client without TLS got a PONG")
	}
	conn.Close()

	nodeC, err := Connect(ctx, url, Credentials(creds.NodeFile()), TLS(ca), AsNode(), Timeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nodeC.Close()
	noDenials(t, nodeC)
	node, err := node.Start(ctx, nodeC.x, node.Config{Dir: t.TempDir(), Device: engine.CPU, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	c, err := Connect(ctx, url, Credentials(creds.ClientFile()), TLS(ca), Timeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	noDenials(t, c)
	col, err := c.Create(ctx, "ext", CollectionConfig{Dim: 5, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := testkit.Rand(t)
	vs := make([][]float32, 50)
	for i := range vs {
		vs[i] = testkit.Grid(r, 5)
		vs[i][0] += 1.0 / 64
	}
	ids, err := col.Add(ctx, umbra.Vectors(vs))
	if err != nil {
		t.Fatal(err)
	}
	hits, err := col.Search(ctx, vs[3], 1)
	if err != nil || len(hits) != 1 || hits[0].ID != ids[3] && hits[0].Score < 0.99999 {
		t.Fatalf("search: %v, %v", hits, err)
	}
	v := connectWatched(t, url, clientNATS(t, creds.ClientFile()), nats.RootCAs(ca))
	v.requestRefused(t, "purge a stream", "$JS.API.STREAM.PURGE."+protocol.StreamName("ext", 0), nil)
}
