package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestCheckpointAndCompact: checkpoint folds the log into the base (the log
// empties, deleted rows stay), compact reclaims the deleted rows and
// checkpoints (the base shrinks); each says what it did, and the store
// answers every search as before.
func TestCheckpointAndCompact(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	const dim = 8
	store := filepath.Join(dir, "s.umbra")
	ok(t, runUmbra(t, "build", "--data", writeMatrix(t, dir, "a.npy", randomMatrix(rng, 200, dim), ""), "--out", store))
	ok(t, runUmbra(t, "add", store, "--data", writeMatrix(t, dir, "b.npy", randomMatrix(rng, 50, dim), "")))
	ok(t, runUmbra(t, "delete", store, "--ids", "3,10,220,240"))
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 4, dim), "")
	search := func() []resultJSON {
		t.Helper()
		return decodeSearch(t, runUmbra(t, "search", "--store", store, "--queries", queries, "--k", "300", "--device", "cpu", "--json")).Results
	}
	want := search()
	info := decodeInfo(t, runUmbra(t, "info", store, "--json"))
	require.Equal(t, 246, info.Count)
	require.Equal(t, 4, info.DeadRows)
	assert.Contains(t, ok(t, runUmbra(t, "info", store)).stdout, "4 rows not yet reclaimed")

	r := ok(t, runUmbra(t, "checkpoint", store))
	after := decodeInfo(t, runUmbra(t, "info", store, "--json"))
	assert.Contains(t, r.stdout, fmt.Sprintf("checkpointed %s: 246 vectors (and 4 deleted rows, which 'umbra compact' reclaims); base %d → %d bytes, log %d → %d bytes",
		store, info.BaseBytes, after.BaseBytes, info.LogBytes, after.LogBytes))
	assert.Less(t, after.LogBytes, info.LogBytes, "the log is folded in")
	assert.Greater(t, after.BaseBytes, info.BaseBytes, "the added rows are in the base")
	assert.Equal(t, 4, after.DeadRows, "a checkpoint keeps deleted rows")
	assert.Equal(t, want, search())

	r = ok(t, runUmbra(t, "compact", store))
	compacted := decodeInfo(t, runUmbra(t, "info", store, "--json"))
	assert.Contains(t, r.stdout, fmt.Sprintf("compacted %s: 246 vectors kept, 4 deleted rows reclaimed; base %d → %d bytes, log %d → %d bytes",
		store, after.BaseBytes, compacted.BaseBytes, after.LogBytes, compacted.LogBytes))
	assert.Less(t, compacted.BaseBytes, after.BaseBytes, "the base shrinks")
	assert.Equal(t, after.LogBytes, compacted.LogBytes, "the log is empty")
	assert.Zero(t, compacted.DeadRows)
	assert.Equal(t, 246, compacted.Count)
	assert.Equal(t, want, search(), "the same answers")
	r = ok(t, runUmbra(t, "compact", store))
	assert.Contains(t, r.stdout, "0 deleted rows reclaimed")

	// Locked by a writer: both refuse, naming the lock, and change nothing.
	before := readStoreFiles(t, store)
	w, err := engine.Open(context.Background(), store, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	for _, cmd := range []string{"checkpoint", "compact"} {
		r := runUmbra(t, cmd, store)
		require.Equal(t, exitFailure, r.code, "%s", r)
		assert.Contains(t, requireErrorLine(t, r), store+".lock")
	}
	require.NoError(t, w.Close())
	requireUnchanged(t, before, store)
	for _, args := range [][]string{{"checkpoint"}, {"compact", store, "extra"}} {
		r := runUmbra(t, args...)
		require.Equal(t, exitUsage, r.code, "%s", r)
	}
	r = runUmbra(t, "compact", filepath.Join(dir, "none.umbra"))
	require.Equal(t, exitFailure, r.code, "%s", r)
	assert.Contains(t, requireErrorLine(t, r), "no store at")
	assert.NoFileExists(t, filepath.Join(dir, "none.umbra"))
}
