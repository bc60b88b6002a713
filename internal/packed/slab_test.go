package packed

import (
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

func TestStrideFor(t *testing.T) {
	for dim, want := range map[int]int{1: 4, 3: 4, 4: 4, 5: 8, 127: 128, 768: 768, 1536: 1536} {
		assert.Equal(t, want, StrideFor(dim), "dim %d", dim)
	}
}

func TestSlabAppendPadsAndNormalises(t *testing.T) {
	r := testkit.Rand(t)
	for _, dim := range []int{1, 3, 7, 64} {
		for _, norm := range []bool{false, true} {
			s := NewSlab(dim)
			var all [][]float32
			for batch := 0; batch < 4; batch++ {
				vs := make([][]float32, 1+r.IntN(9))
				for i := range vs {
					vs[i] = make([]float32, dim)
					for j := range vs[i] {
						vs[i][j] = (r.Float32()*2 - 1) * 100
					}
				}
				s.Append(vs, norm)
				all = append(all, vs...)
			}
			require.Equal(t, len(all), s.Rows)
			require.Len(t, s.Data, s.Rows*s.Stride)
			for i, v := range all {
				row := s.Row(i)
				require.Len(t, row, dim)
				n := Norm(v)
				for j := range v {
					want := float64(v[j])
					if norm {
						want /= n
					}
					assert.InDelta(t, want, float64(row[j]), 1e-6*math.Max(1, math.Abs(want)))
				}
				for _, p := range s.PaddedRow(i)[dim:] {
					assert.Zero(t, p, "padding of row %d", i)
				}
				if norm {
					assert.InDelta(t, 1, Norm(row), 1e-6)
				}
			}
			keep := s.Rows / 2
			s.Truncate(keep)
			assert.Equal(t, keep, s.Rows)
			assert.Len(t, s.Data, keep*s.Stride)
		}
	}
}

// Truncate after growth must not let stale rows reappear with wrong padding.
func TestSlabTruncateThenAppend(t *testing.T) {
	s := NewSlab(3)
	s.Append([][]float32{{1, 2, 3}, {4, 5, 6}}, false)
	s.Truncate(1)
	s.Append([][]float32{{7, 8, 9}}, false)
	assert.Equal(t, []float32{1, 2, 3, 0, 7, 8, 9, 0}, s.Data)
	s.AppendFlat([]float32{1, 1, 1, 2, 2, 2}, false)
	assert.Equal(t, 4, s.Rows)
	assert.Equal(t, []float32{2, 2, 2}, s.Row(3))
}

func TestPlanChunks(t *testing.T) {
	lavapipe := Limits{MaxStorageBindingBytes: 128 << 20, MaxBufferBytes: 2<<30 - 1, MaxWorkgroupsPerDim: 65535}
	p, err := PlanChunks(768, lavapipe)
	require.NoError(t, err)
	assert.Equal(t, (128<<20)/(768*4), p.RowsPerChunk)
	assert.Equal(t, 2, p.Chunks(50000), "50,000 × 768 (153.6 MB) needs two bindings")
	start, n := p.Span(1, 50000)
	assert.Equal(t, p.RowsPerChunk, start)
	assert.Equal(t, 50000-p.RowsPerChunk, n)
	assert.Equal(t, 23, p.Chunks(1000000))

	small := lavapipe
	small.MaxBufferBytes = 1 << 20
	p, err = PlanChunks(768, small)
	require.NoError(t, err)
	assert.Equal(t, (1<<20)/(768*4), p.RowsPerChunk, "maxBufferSize below the binding limit wins")

	capped := lavapipe
	capped.MaxChunkRows = 100
	p, err = PlanChunks(768, capped)
	require.NoError(t, err)
	assert.Equal(t, 100, p.RowsPerChunk)

	_, err = PlanChunks(1<<20, Limits{MaxStorageBindingBytes: 1 << 20})
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Contains(t, err.Error(), "one row of 1048576 float32 values exceeds")

	// A stride whose byte size overflows an int is refused, not planned
	// as a zero-byte row.
	for _, stride := range []int{1 << (strconv.IntSize - 2), math.MaxInt, 0, -4} {
		_, err = PlanChunks(stride, lavapipe)
		require.ErrorIs(t, err, ErrTooLarge, "stride %d", stride)
	}
}

func TestCheckSize(t *testing.T) {
	require.NoError(t, CheckSize(1000000, 768))
	err := CheckSize(math.MaxInt/8, 1536)
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Contains(t, err.Error(), "overflows")
}
