package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// A cluster write run again with the key the first run printed (or was
// given) is applied once: rows with assigned IDs are not stored twice, a
// delete's rerun is not refused as not found; the key with other rows is
// refused, naming it.
func TestClusterWriteRetriedFromTheCommandLine(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS server (skipped under -short)")
	}
	dir, srv, _, _ := testCluster(t, 1)

	rng := testkit.Rand(t)
	const n, dim = 50, 6
	data := writeMatrix(t, dir, "v.npy", randomMatrix(rng, n, dim), "")
	more := writeMatrix(t, dir, "more.npy", randomMatrix(rng, 10, dim), "")
	other := writeMatrix(t, dir, "other.npy", randomMatrix(rng, 10, dim), "")
	at := []string{"--cluster", srv.URL(), "--creds", srv.ClientCreds(), "--collection", "retry"}
	rows := func() int {
		var info struct {
			Rows int `json:"rows"`
		}
		require.NoError(t, json.Unmarshal([]byte(ok(t, runUmbra(t, append([]string{"info", "--json"}, at...)...)).stdout), &info))
		return info.Rows
	}
	// build, twice with its key: stored once.
	for range 2 {
		r := ok(t, runUmbra(t, append([]string{"build", "--shards", "3", "--data", data, "--idempotency-key", "build-1"}, at...)...))
		require.Contains(t, r.stdout, "idempotency key build-1")
	}
	require.Equal(t, n, rows())
	// add without a key: a fresh one, printed, with which a rerun is
	// applied once.
	r := ok(t, runUmbra(t, append([]string{"add", "--data", more}, at...)...))
	m := regexp.MustCompile(`(?m)^idempotency key ([A-Za-z0-9_-]+) \(if this write fails or is cut short, run it again with --idempotency-key ([A-Za-z0-9_-]+): it is applied once\)$`).FindStringSubmatch(r.stderr)
	require.NotNil(t, m, r.String())
	require.Equal(t, m[1], m[2])
	key := m[1]
	require.Contains(t, r.stdout, "idempotency key "+key)
	require.Equal(t, n+10, rows())
	ok(t, runUmbra(t, append([]string{"add", "--data", more, "--idempotency-key", key}, at...)...))
	require.Equal(t, n+10, rows())
	// Without the key, the rerun stores the rows again.
	ok(t, runUmbra(t, append([]string{"add", "--data", more}, at...)...))
	require.Equal(t, n+20, rows())
	// The key with other rows is refused.
	line := requireErrorLine(t, runUmbra(t, append([]string{"add", "--data", other, "--idempotency-key", key}, at...)...))
	require.Contains(t, line, "idempotency key used by another call: key "+key+" was used for another write to collection retry")
	require.Equal(t, n+20, rows())
	// A delete rerun with its key is not refused.
	ids := writeFile(t, dir, "ids.txt", []byte("0\n1\n"))
	for range 2 {
		ok(t, runUmbra(t, append([]string{"delete", "--ids-file", ids, "--idempotency-key", "del-1"}, at...)...))
	}
	require.Equal(t, n+18, rows())
	line = requireErrorLine(t, runUmbra(t, append([]string{"delete", "--ids-file", ids}, at...)...))
	require.Contains(t, line, "2 IDs (0, 1) are not stored in collection retry; nothing was deleted", "named before anything is written, as for a store")
	// Usage: only with --cluster, and a key of the allowed characters.
	store := filepath.Join(dir, "s.umbra")
	r = runUmbra(t, "build", "--data", data, "--out", store, "--idempotency-key", "k")
	require.Equal(t, exitUsage, r.code, r.String())
	require.Contains(t, requireErrorLine(t, r), "--idempotency-key needs --cluster")
	r = runUmbra(t, append([]string{"add", "--data", more, "--idempotency-key", "a.b"}, at...)...)
	require.Equal(t, exitUsage, r.code, r.String())
	require.Contains(t, requireErrorLine(t, r), `--idempotency-key "a.b": 1 to 128 letters, digits, '-' or '_'`)
}
