package cluster

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/cluster/protocol"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestMergeOrderIsTheEngines: the merge of shards' answers ranks as every
// engine path does — NaN after every number, -0 and +0 one score, equal
// scores by lower ID — under each metric.
func TestMergeOrderIsTheEngines(t *testing.T) {
	t.Parallel()
	nan := float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	for _, m := range []umbra.Metric{umbra.Cosine, umbra.Dot, umbra.L2} {
		assert.True(t, better(m, protocol.Hit{ID: 9, Score: 1}, protocol.Hit{ID: 1, Score: nan}), "%v: a number before NaN", m)
		assert.False(t, better(m, protocol.Hit{ID: 1, Score: nan}, protocol.Hit{ID: 9, Score: 1}), "%v: NaN after a number", m)
		assert.True(t, better(m, protocol.Hit{ID: 1, Score: nan}, protocol.Hit{ID: 2, Score: nan}), "%v: NaNs by ID", m)
		assert.True(t, better(m, protocol.Hit{ID: 1, Score: negZero}, protocol.Hit{ID: 2, Score: 0}), "%v: -0 and +0 tie, by ID", m)
		assert.False(t, better(m, protocol.Hit{ID: 2, Score: 0}, protocol.Hit{ID: 1, Score: negZero}), "%v: -0 and +0 tie, by ID", m)
	}
	assert.True(t, better(umbra.Cosine, protocol.Hit{ID: 5, Score: 0.9}, protocol.Hit{ID: 1, Score: 0.5}))
	assert.True(t, better(umbra.L2, protocol.Hit{ID: 5, Score: 0.5}, protocol.Hit{ID: 1, Score: 0.9}))
}

// TestCollectionOptionsAsTheIndexs: a collection judges its options by
// the same rules as an engine.Index (internal/resolve): nil skipped, one
// given twice refused, MaxHits(-1) ErrInvalidOption; and it refuses,
// naming them, the options only a local index honours (Approximate,
// AllowFunc) instead of ignoring them.
func TestCollectionOptionsAsTheIndexs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	r := testkit.Rand(t)
	ctx := context.Background()
	col, err := h.c.Create(ctx, "opts", CollectionConfig{Dim: 4, Shards: 2})
	require.NoError(t, err)
	data := testkit.Vectors(r, 10, 4)
	_, err = col.Add(ctx, umbra.Vectors(data), nil)
	require.NoError(t, err, "a nil option is skipped")
	hits, err := col.Search(ctx, data[0], 3, nil, umbra.WithPayload())
	require.NoError(t, err)
	require.Len(t, hits, 3)
	for name, opt := range map[string]umbra.SearchOption{"Approximate": umbra.Approximate(), "AllowFunc": umbra.AllowFunc(func(uint64) bool { return true })} {
		_, err = col.Search(ctx, data[0], 3, opt)
		require.ErrorIs(t, err, umbra.ErrInvalidOption, name)
		assert.Contains(t, err.Error(), name)
	}
	_, err = col.Search(ctx, data[0], 3, umbra.Allow(1), umbra.Allow(2))
	require.ErrorIs(t, err, umbra.ErrInvalidOption, "Allow twice is refused, not appended")
	_, err = col.SearchRange(ctx, data[0], 0.5, umbra.MaxHits(-1))
	require.ErrorIs(t, err, umbra.ErrInvalidOption)
	_, err = col.Add(ctx, umbra.Vectors(data[:1]), umbra.WithIDs(100), umbra.WithIDs(101))
	require.ErrorIs(t, err, umbra.ErrInvalidOption, "WithIDs twice is refused, not appended")
	rows, err := col.ShardRows(ctx)
	require.NoError(t, err)
	assert.Equal(t, 10, rows[0]+rows[1], "nothing refused was stored")
}
