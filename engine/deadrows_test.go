package engine_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestDeadRowsCounted: Info.DeadRows counts deleted rows until Compact
// reclaims them, through a store's log, a checkpoint (which keeps them)
// and a reopen.
func TestDeadRowsCounted(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.umbra")
	st, err := engine.Open(ctx, path, engine.Config{Dim: 4, Device: engine.CPU})
	require.NoError(t, err)
	_, err = st.Add(ctx, umbra.Vectors(testkit.Vectors(r, 20, 4)))
	require.NoError(t, err)
	require.Zero(t, st.Info().DeadRows)
	require.NoError(t, st.Delete(ctx, umbra.WithIDs(3, 7, 11)))
	require.Equal(t, 3, st.Info().DeadRows)
	require.NoError(t, st.Close())

	reopen := func() *engine.Index {
		st, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
		require.NoError(t, err)
		return st
	}
	st = reopen()
	require.Equal(t, 3, st.Info().DeadRows, "replayed from the log")
	require.NoError(t, st.Checkpoint(ctx))
	require.Equal(t, 3, st.Info().DeadRows, "a checkpoint keeps deleted rows")
	require.NoError(t, st.Close())
	st = reopen()
	require.Equal(t, 3, st.Info().DeadRows, "read from the base's tombstones")
	require.NoError(t, st.Compact(ctx))
	require.Zero(t, st.Info().DeadRows)
	require.Equal(t, 17, st.Len())
	require.NoError(t, st.Checkpoint(ctx))
	require.NoError(t, st.Close())
	st = reopen()
	defer st.Close()
	require.Zero(t, st.Info().DeadRows)
	require.Equal(t, 17, st.Len())
}
