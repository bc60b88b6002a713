package exact

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/testkit"
)

// A batch's panel over queries widened once (i8Tile16, AVX2's 4 × 3 panel
// of VPMADDWD products) returns the generic kernel's int32 sums to the
// bit, and so does its i8Tile, which widens on every call: every row byte,
// every query code down to −128, the extremes of both, strides that are
// and are not whole 64-byte chunks, slices off every alignment, and
// numbers of queries and rows that leave every remainder after the groups
// of four queries and three rows, up to a batch of 70 over 50 rows.
func TestI8Tile16MatchesGeneric(t *testing.T) {
	r := newRand(t)
	var sets []quantKernelSet
	for _, ks := range quantKernelSets() {
		if ks.i8Tile16 != nil {
			sets = append(sets, ks)
		} else if ks.name == "avx2+f16c" || ks.name == "avx512 (int8 avx2)" {
			t.Fatalf("%s: AVX2's int8 set has no widened panel", ks.name)
		}
	}
	t.Logf("sets with the widened int8 panel: %d", len(sets))
	anyByte := func(r *rand.Rand) int { return r.IntN(256) }
	anyCode := func(r *rand.Rand) int { return r.IntN(256) - 128 }
	c := func(v int) func(*rand.Rand) int { return func(*rand.Rand) int { return v } }
	var cases []i8Case
	for _, stride := range []int{64, 128, 192, 768, 832, 1, 63, 100, 769} {
		for range 6 {
			cases = append(cases, i8Case{r.IntN(51), 1 + r.IntN(70), stride, r.IntN(64), anyByte, anyCode})
		}
	}
	for _, ext := range [][2]int{{255, 127}, {255, -128}, {0, 127}, {1, -128}, {128, 127}} {
		cases = append(cases, i8Case{7, 5, 1 << 16, 3, c(ext[0]), c(ext[1])})
		cases = append(cases, i8Case{13, 9, 768, 17, c(ext[0]), c(ext[1])})
	}
	for _, ks := range sets {
		for _, tc := range cases {
			name := fmt.Sprintf("%s/stride %d/rows %d/queries %d/offset %d", ks.name, tc.stride, tc.nr, tc.nq, tc.off)
			rows := skew[uint8](tc.nr*tc.stride, tc.off)
			for i := range rows {
				rows[i] = uint8(tc.rowCode(r))
			}
			qs := skew[int8](tc.nq*tc.stride, tc.off)
			for i := range qs {
				qs[i] = int8(tc.qCode(r))
			}
			want := make([]int32, tc.nq*tc.nr)
			i8TileGo(want, qs, tc.nq, rows, tc.nr, tc.stride)
			got16 := skew[int32](tc.nq*tc.nr, 1)
			ks.i8Tile16(got16, qs, widenI8(qs), tc.nq, rows, tc.nr, tc.stride)
			got := skew[int32](tc.nq*tc.nr, 1)
			ks.i8Tile(got, qs, tc.nq, rows, tc.nr, tc.stride)
			for k := range want {
				if got16[k] != want[k] || got[k] != want[k] {
					t.Fatalf("%s: query %d row %d: tile16 %d tile %d generic %d", name, k/tc.nr, k%tc.nr, got16[k], got[k], want[k])
				}
			}
		}
	}
}

// i8Pass skips exactly rows that scanI8Dot's first test rejects, and
// stops at the first it keeps or where fewer than eight rows are left:
// products that fall exactly on θ (kept), θ of ±Inf, offsets that make
// the difference wrap as int32 arithmetic does, every tail length, and
// starts off the first row.
func TestI8PassSkipsOnlyRejected(t *testing.T) {
	r := newRand(t)
	rejects := func(scale []float32, raw []int32, i int, off int32, theta float64) bool {
		return float64(scale[i])*float64(raw[i]-off) < theta
	}
	for trial := range 3000 {
		n := r.IntN(80)
		scale := make([]float32, n)
		raw := make([]int32, n)
		for i := range n {
			scale[i] = float32(math.Ldexp(1+r.Float64(), r.IntN(40)-30))
			raw[i] = int32(r.IntN(1<<20) - 1<<19)
			if r.IntN(50) == 0 {
				raw[i] = int32(r.Uint32())
			}
		}
		off := int32(r.IntN(1<<12) - 1<<11)
		if r.IntN(40) == 0 {
			off = int32(r.Uint32())
		}
		var theta float64
		switch r.IntN(8) {
		case 0:
			theta = math.Inf(-1)
		case 1:
			theta = math.Inf(1)
		case 2:
			if n > 0 { // exactly a row's product: kept
				i := r.IntN(n)
				theta = float64(scale[i]) * float64(raw[i]-off)
			}
		default:
			// Near the top, where a scan's θ sits: few rows pass.
			theta = math.Ldexp(r.Float64(), 19+r.IntN(10)-5)
		}
		from := 0
		if n > 0 {
			from = r.IntN(n + 1)
		}
		got := i8Pass(scale, raw, from, off, theta)
		if got < from || got > n {
			t.Fatalf("trial %d: i8Pass from %d of %d = %d", trial, from, n, got)
		}
		for i := from; i < got; i++ {
			if !rejects(scale, raw, i, off, theta) {
				t.Fatalf("trial %d: skipped row %d (of %d, from %d, to %d), which the scalar test keeps", trial, i, n, from, got)
			}
		}
		// Where the pass runs (AVX2), it stops only at a row the scalar
		// test keeps, or within the last group of eight; elsewhere it
		// skips nothing and the scalar test does the work.
		if i8PassRuns() && got < n && n-got >= 8 && rejects(scale, raw, got, off, theta) {
			t.Fatalf("trial %d: stopped at row %d (of %d, from %d), which the scalar test rejects", trial, got, n, from)
		}
	}
}

// Batches as large as a search's (64 and more queries, so the panels run
// whole groups and leave every remainder) at odd dimensions and row
// counts return the float32 search's answer bit for bit under every
// kernel set, the AVX2 set forced on CPUs that run better ones: the
// widened panel, the eight-row skip and the rescore give the same rows,
// the same ties (duplicate rows, lower ID first) and the same scores.
func TestExactSearchLargeBatches(t *testing.T) { forEachQuantKernel(t, exactSearchLargeBatches) }

func exactSearchLargeBatches(t *testing.T) {
	r := newRand(t)
	ctx := context.Background()
	for trial := range 4 {
		m := []core.Metric{core.Dot, core.Cosine, core.L2, core.Dot}[trial]
		dim := 1 + r.IntN(300)
		if trial == 0 {
			dim = 768
		}
		n := 300 + r.IntN(900)
		var s fallback.Slab
		var qs [][]float32
		nq := 64 + r.IntN(9)
		if trial == 3 {
			// Ties at every rank: rows drawn from a few grid vectors.
			var distinct [][]float32
			s, distinct = tieSlab(r, n, dim)
			for range nq {
				qs = append(qs, distinct[r.IntN(len(distinct))])
			}
		} else {
			rows := make([][]float32, n)
			for i := range rows {
				rows[i] = testkit.Vector(r, dim)
			}
			s = newSlab(rows, dim, (dim+3)&^3, r.IntN(2) == 0)
			for range nq {
				qs = append(qs, testkit.Vector(r, dim))
			}
		}
		c := compress(t, core.Int8, fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride})
		name := fmt.Sprintf("trial %d %v n %d dim %d queries %d filtered %v", trial, m, n, dim, nq, s.Allow != nil)
		for _, k := range []int{1, 10, 1 + r.IntN(n)} {
			want, err := fallback.SearchBatch(ctx, s, qs, k, m, 2)
			noErr(t, err)
			got, _, err := ExactSearchBatch(ctx, s, c, qs, k, m, 2, false)
			noErr(t, err)
			for j := range qs {
				sameBits(t, got[j], want[j], "%s k %d query %d", name, k, j)
			}
		}
	}
}
