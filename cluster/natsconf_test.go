package cluster

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// The server configurations docs/cluster.md gives for three servers parse
// as nats-server reads them, with what umbra needs: JetStream with every
// write fsynced before it is acknowledged, a max payload that holds a row
// with a 1 MiB payload, and the three routes of one cluster.
func TestDocumentedNATSConfigs(t *testing.T) {
	for i := 1; i <= 3; i++ {
		path := filepath.Join("..", "docs", "nats", fmt.Sprintf("nats-%d.conf", i))
		o, err := server.ProcessConfigFile(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch {
		case !o.JetStream || !o.SyncAlways:
			t.Errorf("%s: JetStream %v, sync always %v; want both", path, o.JetStream, o.SyncAlways)
		case o.MaxPayload < 2<<20:
			t.Errorf("%s: max payload %d, want at least 2 MiB (a row with a 1 MiB payload)", path, o.MaxPayload)
		case o.Cluster.Name != "umbra" || len(o.Routes) != 3:
			t.Errorf("%s: cluster %q with %d routes, want umbra with 3", path, o.Cluster.Name, len(o.Routes))
		case o.ServerName != fmt.Sprintf("n%d", i) || o.StoreDir != fmt.Sprintf("/var/lib/nats/n%d", i):
			t.Errorf("%s: server %q, store %q", path, o.ServerName, o.StoreDir)
		}
	}
}
