//go:build !cgo || nogpu

package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
)

// TestNoGPUBuild checks the pure-Go build: Auto is the fallback with a
// reason, Device GPU fails clearly, and searching works.
func TestNoGPUBuild(t *testing.T) {
	assert.False(t, engine.GPUSupport())
	_, err := engine.New(context.Background(), engine.Config{Dim: 4, Device: engine.GPU})
	require.ErrorIs(t, err, engine.ErrNoGPUSupport)
	assert.Contains(t, err.Error(), "built without GPU support")
	var ae *engine.AdapterError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, umbra.HintNoGPUSupport, ae.Hint.Code)

	ix, err := engine.New(context.Background(), engine.Config{Dim: 4})
	require.NoError(t, err)
	info := ix.Info()
	assert.Equal(t, engine.CPU, info.Device)
	assert.Contains(t, info.Reason, "built without GPU support")
	assert.Equal(t, umbra.HintNoGPUSupport, info.Hint.Code)
	_, err = ix.Add(context.Background(), umbra.Vectors([][]float32{{1, 0, 0, 0}, {0, 1, 0, 0}}))
	require.NoError(t, err)
	hits, err := ix.Search(context.Background(), []float32{0, 2, 0, 0}, 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), hits[0].ID)

	rep := engine.Probe(context.Background(), engine.AdapterSelect{})
	assert.Equal(t, -1, rep.Auto)
	assert.Empty(t, rep.Adapters)
}
