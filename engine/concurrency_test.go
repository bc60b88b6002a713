package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
)

// TestSearchesRunWhileAnAddIsStaged pauses an Add after its rows are packed
// and uploaded but before they are published: searches, Len and Get must
// answer meanwhile, from the rows published before it, and the rows appear
// whole once it returns.
func TestSearchesRunWhileAnAddIsStaged(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			r := newRand(t)
			const dim = 24
			ix := open(t, b, engine.Config{Dim: dim, Metric: engine.L2}, 300)
			first := randomVectors(r, 500, dim)
			_, err := ix.Add(context.Background(), first)
			require.NoError(t, err)

			staged, release := make(chan struct{}), make(chan struct{})
			engine.SetBeforePublish(ix, func() {
				close(staged)
				<-release
			})
			second := randomVectors(r, 700, dim) // grows the slab and crosses chunks
			added := make(chan error, 1)
			go func() {
				_, err := ix.Add(context.Background(), second)
				added <- err
			}()
			select {
			case <-staged:
			case err := <-added:
				t.Fatalf("Add returned before it was staged: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			qs := randomVectors(r, 5, dim)
			for _, q := range qs {
				hits, err := ix.Search(ctx, q, 10)
				require.NoError(t, err, "a search while an Add is staged")
				checkHits(t, engine.L2, first, q, 10, hits)
			}
			all, err := ix.SearchBatch(ctx, qs, len(first)+50)
			require.NoError(t, err)
			for i, hits := range all {
				require.Len(t, hits, len(first), "query %d sees only the published rows", i)
			}
			require.Equal(t, len(first), ix.Len())
			close(release)
			require.NoError(t, <-added)

			both := append(append([][]float32{}, first...), second...)
			require.Equal(t, len(both), ix.Len())
			for _, q := range qs {
				hits, err := ix.Search(ctx, q, 25)
				require.NoError(t, err)
				checkHits(t, engine.L2, both, q, 25, hits)
			}
		})
	}
}
