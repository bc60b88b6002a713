package gpuplan

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/shaders"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestDecodeSortsLikeTheFallback: random hits with many equal scores come
// back best first, equal scores by lower row, when sort is asked, and in
// the order read otherwise.
func TestDecodeSortsLikeTheFallback(t *testing.T) {
	r := testkit.Rand(t)
	for _, m := range []core.Metric{core.Dot, core.L2} {
		const nq, k = 3, 40
		raw := make([]byte, nq*k*shaders.HitBytes)
		want := make([][]core.Hit, nq)
		for q := 0; q < nq; q++ {
			rows := r.Perm(1000)[:k]
			for i := 0; i < k; i++ {
				score := float32(r.IntN(8)) // few values: many ties
				b := raw[(q*k+i)*shaders.HitBytes:]
				binary.LittleEndian.PutUint32(b, math.Float32bits(score))
				binary.LittleEndian.PutUint32(b[4:], uint32(rows[i]))
				want[q] = append(want[q], core.Hit{Score: score, Row: rows[i]})
			}
		}
		assert.Equal(t, want, Decode(raw, nq, k, false, m), "unsorted: as read")
		got := Decode(raw, nq, k, true, m)
		for q := range want {
			exp := slices.Clone(want[q])
			slices.SortFunc(exp, func(a, b core.Hit) int {
				if a.Score != b.Score {
					if (a.Score > b.Score) == (m != core.L2) {
						return -1
					}
					return 1
				}
				return a.Row - b.Row
			})
			assert.Equal(t, exp, got[q], "metric %v query %d", m, q)
		}
	}
}

// TestGridCoversEveryRow: the 2-D dispatch has a workgroup for every tile
// of rows and never more than the device's limit along x.
func TestGridCoversEveryRow(t *testing.T) {
	r := testkit.Rand(t)
	for i := 0; i < 200; i++ {
		rows := 1 + r.IntN(1<<22)
		l := shaders.ScoresLayout{Rows: uint32(1 + r.IntN(64))}
		most := MaxGroups(uint32(r.IntN(3) * (1 + r.IntN(70000))))
		x, y := Grid(rows, l, most)
		need := (uint64(rows) + uint64(l.Rows) - 1) / uint64(l.Rows)
		require.LessOrEqual(t, uint64(x), most)
		require.GreaterOrEqual(t, uint64(x)*uint64(y), need, "rows %d tile %d", rows, l.Rows)
		require.Less(t, uint64(x)*uint64(y-1), need, "rows %d: a whole spare row of workgroups", rows)
		require.Less(t, uint64(x)*uint64(y)-need, uint64(y), "rows %d tile %d: %d×%d workgroups for %d", rows, l.Rows, x, y, need)
	}
	assert.Equal(t, uint64(65535), MaxGroups(0))
}

// TestGridTailAtNVIDIALimits: the case the issue measured. At NVIDIA's
// binding limit (2^31 - 1 bytes: 699,050 rows of 768 a chunk) gemm.wgsl's
// workgroups (4 rows for teams of 32 and 64 lanes, 8 for teams of 16,
// 16 for teams of 8) fill a grid with fewer than three spare workgroups,
// where a grid of full rows of 65,535 left 12.5% (50% for teams of 16)
// of the work past the chunk's end.
func TestGridTailAtNVIDIALimits(t *testing.T) {
	const rows = (1<<31 - 1) / (768 * 4)
	require.Equal(t, 699050, rows)
	for _, team := range shaders.TeamCandidates {
		l, err := shaders.PlanGemm(768, core.Dot, shaders.Target{MaxInvocations: 1024, MaxWorkgroupBytes: 48 << 10, MaxTeam: team})
		require.NoError(t, err)
		x, y := Grid(rows, l, 65535)
		need := (rows + int(l.Rows) - 1) / int(l.Rows)
		spare := int(x)*int(y) - need
		t.Logf("team %d: %d rows a workgroup, grid %d × %d for %d workgroups: %d spare", team, l.Rows, x, y, need, spare)
		require.Less(t, spare, int(y), "team %d", team)
		require.Less(t, float64(spare)/float64(need), 1e-4, "team %d", team)
	}
}

// TestBatchesKeepOrder: the batch helpers cut qs into parts of at most the
// step, in order, and count one scan per tile of a part's queries.
func TestBatchesKeepOrder(t *testing.T) {
	r := testkit.Rand(t)
	n, step := 1+r.IntN(50), 1+r.IntN(9)
	qs := make([][]float32, n)
	for i := range qs {
		qs[i] = []float32{float32(i)}
	}
	hits, err := SearchBatches(qs, step, func(part [][]float32) ([][]core.Hit, error) {
		require.LessOrEqual(t, len(part), step)
		out := make([][]core.Hit, len(part))
		for i, q := range part {
			out[i] = []core.Hit{{Row: int(q[0])}}
		}
		return out, nil
	})
	require.NoError(t, err)
	for i, h := range hits {
		require.Equal(t, i, h[0].Row)
	}
	const rows = 3
	wantScans := 0
	sums, scans, err := SumBatches(qs, rows, func() int { return step }, 1, 4, func(part [][]float32) ([]float32, error) {
		wantScans += map[bool]int{true: 1, false: (len(part) + 3) / 4}[len(part) == 1]
		var out []float32
		for _, q := range part {
			out = append(out, q[0], q[0], q[0])
		}
		return out, nil
	})
	require.NoError(t, err)
	require.Len(t, sums, n*rows)
	for j := 0; j < n; j++ {
		require.Equal(t, float32(j), sums[j*rows+rows-1])
	}
	assert.Equal(t, wantScans, scans)
	sums, scans, err = SumBatches(qs, 0, func() int { t.Fatal("step asked without rows"); return 0 }, 1, 4, nil)
	assert.NoError(t, err)
	assert.Equal(t, 0, scans)
	assert.NotNil(t, sums)
	assert.Empty(t, sums)
}

// TestCheckRankingRejects: a right answer passes; a repeated row, a wrong
// score or a short list each fail.
func TestCheckRankingRejects(t *testing.T) {
	r := testkit.Rand(t)
	q := testkit.Vector(r, 8)
	data := testkit.Vectors(r, 50, 8)
	exact := func(row int) float64 { return ExactScore(data[row], q, core.Dot) }
	ranked := Ranked(len(data), false, core.Dot, exact)
	var hits []core.Hit
	for i := range data {
		hits = append(hits, core.Hit{Row: i, Score: float32(exact(i))})
	}
	slices.SortFunc(hits, func(a, b core.Hit) int { return -cmpF(a.Score, b.Score) })
	hits = hits[:5]
	require.NoError(t, CheckRanking(hits, 5, ranked, exact, Tol))
	assert.Error(t, CheckRanking(hits[:4], 5, ranked, exact, Tol))
	bad := slices.Clone(hits)
	bad[1] = bad[0]
	assert.Error(t, CheckRanking(bad, 5, ranked, exact, Tol))
	bad = slices.Clone(hits)
	bad[2].Score += 1
	assert.Error(t, CheckRanking(bad, 5, ranked, exact, Tol))
	masked := Ranked(len(data), true, core.Dot, exact)
	assert.Len(t, masked, (len(data)+2)/3)
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestLiveMask: a row is allowed exactly when it is below rows and dead
// does not mark it, dead shorter or longer than the mask.
func TestLiveMask(t *testing.T) {
	r := testkit.Rand(t)
	for i := 0; i < 50; i++ {
		rows := r.IntN(300)
		dead := make([]uint64, r.IntN(7))
		for j := range dead {
			dead[j] = r.Uint64()
		}
		m := LiveMask(rows, dead)
		require.Len(t, m, (rows+63)/64)
		for row := 0; row < len(m)*64; row++ {
			isDead := row/64 < len(dead) && dead[row/64]>>(row%64)&1 == 1
			want := row < rows && !isDead
			require.Equal(t, want, m[row/64]>>(row%64)&1 == 1, "rows %d row %d", rows, row)
		}
	}
}

// TestAllowedCountsRowsOnly: a mask's bits past rows, in its last word or
// in words past it, are not counted.
func TestAllowedCountsRowsOnly(t *testing.T) {
	r := testkit.Rand(t)
	for range 200 {
		rows := r.IntN(400)
		mask := make([]uint64, (rows+63)/64+r.IntN(3))
		for i := range mask {
			mask[i] = r.Uint64()
		}
		want := 0
		for row := 0; row < rows; row++ {
			if mask[row/64]>>(row%64)&1 == 1 {
				want++
			}
		}
		require.Equal(t, want, Allowed(mask, rows), "rows %d, %d words", rows, len(mask))
	}
	require.Equal(t, 0, Allowed(nil, 10))
	require.Equal(t, 3, Allowed([]uint64{^uint64(0)}, 3))
}
