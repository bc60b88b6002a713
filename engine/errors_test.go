package engine_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  engine.Config
		msg  string
	}{
		{"zero dim", engine.Config{Dim: 0}, "Dim must be between 1 and 16777216, got 0"},
		{"negative dim", engine.Config{Dim: -3}, "got -3"},
		// Past MaxDim every size derived from Dim could overflow (a 2^62
		// dimension once made a row 0 bytes on the GPU path; 2^30 with
		// 32-bit ints).
		{"dim past MaxDim", engine.Config{Dim: umbra.MaxDim + 1}, "got 16777217"},
		{"dim 2^(int bits-2) on the GPU", engine.Config{Dim: 1 << (strconv.IntSize - 2), Device: engine.GPU}, "got " + strconv.Itoa(1<<(strconv.IntSize-2))},
		{"dim MaxInt on the CPU", engine.Config{Dim: math.MaxInt, Device: engine.CPU}, "Dim must be between 1 and"},
		{"unknown metric", engine.Config{Dim: 4, Metric: 9}, "unknown metric"},
		{"unknown device", engine.Config{Dim: 4, Device: 7}, "unknown device"},
		{"unknown backend", engine.Config{Dim: 4, Adapters: []engine.AdapterSelect{engine.AdapterSelect{Backend: "glide"}}}, `unknown backend "glide"`},
		{"negative workers", engine.Config{Dim: 4, Workers: -1}, "must not be negative"},
		// Under Device CPU the fields only a GPU reads are refused by
		// name, not ignored.
		{"cpu with an adapter", engine.Config{Dim: 4, Device: engine.CPU, Adapters: []engine.AdapterSelect{{Name: "nvidia"}}}, "Device CPU with Adapters"},
		{"cpu with isolate", engine.Config{Dim: 4, Device: engine.CPU, Isolate: true}, "Device CPU with Isolate"},
		{"cpu with a probe timeout", engine.Config{Dim: 4, Device: engine.CPU, ProbeTimeout: time.Second}, "Device CPU with ProbeTimeout"},
		{"cpu with device bytes", engine.Config{Dim: 4, Device: engine.CPU, Limits: engine.Limits{MaxDeviceBytes: 1 << 20}}, "Device CPU with Limits.MaxDeviceBytes"},
		{"cpu with overflow", engine.Config{Dim: 4, Device: engine.CPU, Limits: engine.Limits{Overflow: true}}, "Device CPU with Limits.Overflow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ix, err := engine.New(context.Background(), c.cfg)
			require.Error(t, err)
			assert.Nil(t, ix)
			assert.ErrorIs(t, err, umbra.ErrInvalidConfig)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
}

// TestBadInputLeavesIndexUnchanged feeds each kind of bad input to every
// backend and checks the sentinel, the message, and that the stored vectors
// and their search results are exactly as before.
func TestBadInputLeavesIndexUnchanged(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 6
	good := testkit.Vectors(r, 50, dim)
	q := testkit.Vectors(r, 1, dim)[0]
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	withAt := func(row, col int, x float32) [][]float32 {
		vs := testkit.Vectors(r, 4, dim)
		vs[row][col] = x
		return vs
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: dim, Limits: engine.Limits{MaxRows: 60}})
			_, err := ix.Add(context.Background(), umbra.Vectors(good))
			require.NoError(t, err)
			before, err := ix.Search(context.Background(), q, 10)
			require.NoError(t, err)

			adds := []struct {
				name string
				vs   [][]float32
				is   error
				msg  string
			}{
				{"short vector", [][]float32{good[0], {1, 2}}, umbra.ErrDimMismatch, "vector 1 has 2 components, index dimension is 6"},
				{"long vector", [][]float32{make([]float32, 7)}, umbra.ErrDimMismatch, "vector 0 has 7 components"},
				{"NaN", withAt(2, 3, nan), umbra.ErrNonFinite, "vector 2, component 3 is NaN"},
				{"+Inf", withAt(3, 0, inf), umbra.ErrNonFinite, "vector 3, component 0 is +Inf"},
				{"-Inf", withAt(0, 5, -inf), umbra.ErrNonFinite, "vector 0, component 5 is -Inf"},
				{"zero vector", [][]float32{good[1], make([]float32, dim)}, umbra.ErrZeroVector, "vector 1 has norm 0"},
				{"past MaxRows", testkit.Vectors(r, 11, dim), umbra.ErrTooLarge, "would exceed MaxRows 60"},
			}
			for _, a := range adds {
				ids, err := ix.Add(context.Background(), umbra.Vectors(a.vs))
				require.Error(t, err, a.name)
				assert.Nil(t, ids, a.name)
				assert.ErrorIs(t, err, a.is, a.name)
				assert.Contains(t, err.Error(), a.msg, a.name)
				assert.Equal(t, len(good), ix.Len(), "%s changed Len", a.name)
			}
			_, err = ix.Add(context.Background(), umbra.Flat(make([]float32, dim+1), ix.Dim()))
			assert.ErrorIs(t, err, umbra.ErrDimMismatch)

			searches := []struct {
				name string
				q    []float32
				k    int
				is   error
				msg  string
			}{
				{"k zero", q, 0, umbra.ErrInvalidK, "got k=0"},
				{"k negative", q, -2, umbra.ErrInvalidK, "got k=-2"},
				{"short query", q[:3], 5, umbra.ErrDimMismatch, "query has 3 components"},
				{"NaN query", []float32{1, 2, nan, 4, 5, 6}, 5, umbra.ErrNonFinite, "query, component 2 is NaN"},
				{"zero query", make([]float32, dim), 5, umbra.ErrZeroVector, "query has norm 0"},
			}
			for _, s := range searches {
				hits, err := ix.Search(context.Background(), s.q, s.k)
				require.Error(t, err, s.name)
				assert.Nil(t, hits)
				assert.ErrorIs(t, err, s.is, s.name)
				assert.Contains(t, err.Error(), s.msg, s.name)
			}
			_, err = ix.SearchBatch(context.Background(), [][]float32{q, q[:2]}, 3)
			assert.ErrorIs(t, err, umbra.ErrDimMismatch)
			assert.Contains(t, err.Error(), "query 1 has 2 components")

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err = ix.Search(ctx, q, 3)
			assert.ErrorIs(t, err, context.Canceled)

			after, err := ix.Search(context.Background(), q, 10)
			require.NoError(t, err)
			assert.Equal(t, before, after, "bad input changed search results")

			require.NoError(t, ix.Close())
			require.NoError(t, ix.Close(), "closing twice is harmless")
			_, err = ix.Search(context.Background(), q, 3)
			assert.ErrorIs(t, err, umbra.ErrClosed)
			_, err = ix.Add(context.Background(), umbra.Vectors(good[:1]))
			assert.ErrorIs(t, err, umbra.ErrClosed)
		})
	}
}

// TestZeroVectorAllowedForDotAndL2: only cosine needs a direction.
func TestZeroVectorAllowedForDotAndL2(t *testing.T) {
	for _, m := range []umbra.Metric{umbra.Dot, umbra.L2} {
		ix, err := engine.New(context.Background(), engine.Config{Dim: 3, Metric: m, Device: engine.CPU})
		require.NoError(t, err)
		_, err = ix.Add(context.Background(), umbra.Vectors([][]float32{{0, 0, 0}, {1, 2, 3}}))
		require.NoError(t, err, m.String())
		hits, err := ix.Search(context.Background(), []float32{0, 0, 0}, 2)
		require.NoError(t, err, m.String())
		assert.Len(t, hits, 2)
	}
}

func TestSentinelsAreDistinct(t *testing.T) {
	all := []error{umbra.ErrInvalidConfig, umbra.ErrDimMismatch, umbra.ErrNonFinite, umbra.ErrZeroVector,
		umbra.ErrInvalidK, umbra.ErrTooLarge, umbra.ErrClosed, engine.ErrNoAdapter, engine.ErrNoGPUSupport, engine.ErrGPU}
	for i, a := range all {
		for j, b := range all {
			assert.Equal(t, i == j, errors.Is(a, b), "%v vs %v", a, b)
		}
	}
}

// TestExtremeMagnitudesNormalise: under cosine, vectors at float32's
// extremes (huge, tiny, subnormal) are accepted and rank like their
// directions, because normalisation runs in float64.
func TestExtremeMagnitudesNormalise(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: 2})
			_, err := ix.Add(context.Background(), umbra.Vectors([][]float32{
				{3e38, 3e38},     // 45°, norm beyond float32
				{1e-44, 0},       // 0°, subnormal
				{0, 2e-39},       // 90°, subnormal
				{-1e-30, -1e-30}, // 225°
			}))
			require.NoError(t, err)
			hits, err := ix.Search(context.Background(), []float32{1, 1}, 4)
			require.NoError(t, err)
			ids := []uint64{hits[0].ID, hits[1].ID, hits[2].ID, hits[3].ID}
			assert.Equal(t, uint64(0), ids[0])
			assert.InDelta(t, 1, hits[0].Score, 1e-6)
			assert.ElementsMatch(t, []uint64{1, 2}, ids[1:3], "0° and 90° tie at cos 45°")
			assert.InDelta(t, math.Sqrt2/2, hits[1].Score, 1e-6)
			assert.Equal(t, uint64(3), ids[3])
			assert.InDelta(t, -1, hits[3].Score, 1e-6)
		})
	}
}

// TestCPUTakesTheZeroAdapter: the zero adapter selection (what a command
// passes when no adapter flag is given) asks for nothing, and Device CPU
// takes it.
func TestCPUTakesTheZeroAdapter(t *testing.T) {
	ix, err := engine.New(context.Background(), engine.Config{Dim: 4, Device: engine.CPU, Adapters: []engine.AdapterSelect{{}}})
	require.NoError(t, err)
	require.NoError(t, ix.Close())
}

// TestCheckpointWithoutAStore: Checkpoint on an index made by New is
// refused, not a silent success: its rows are in memory only.
func TestCheckpointWithoutAStore(t *testing.T) {
	ctx := context.Background()
	ix, err := engine.New(ctx, engine.Config{Dim: 2, Device: engine.CPU})
	require.NoError(t, err)
	defer ix.Close()
	_, err = ix.Add(ctx, umbra.Vectors([][]float32{{1, 2}}))
	require.NoError(t, err)
	err = ix.Checkpoint(ctx)
	require.ErrorIs(t, err, umbra.ErrInvalidConfig)
	require.ErrorContains(t, err, "without a store")
}
