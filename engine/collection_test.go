package engine_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/collectiontest"
)

// TestCollectionAnswersAsTheReference: an index on every backend, and a
// store, answer every read of umbra.Collection (Get by each kind of
// selection, Count, Search, SearchRange, Summary) as an index on the same
// backend given the same writes does (that one is checked against
// float64 brute force by the other tests).
func TestCollectionAnswersAsTheReference(t *testing.T) {
	const dim = 12
	ref := func(t *testing.T) *engine.Index {
		ix, err := engine.New(context.Background(), engine.Config{Dim: dim, Device: engine.CPU})
		require.NoError(t, err)
		t.Cleanup(func() { ix.Close() })
		return ix
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			collectiontest.Same(t, open(t, b, engine.Config{Dim: dim}), open(t, b, engine.Config{Dim: dim}), dim)
		})
	}
	t.Run("store", func(t *testing.T) {
		st, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "s.umbra"), engine.Config{Dim: dim, Device: engine.CPU})
		require.NoError(t, err)
		collectiontest.Same(t, st, ref(t), dim)
	})
}
