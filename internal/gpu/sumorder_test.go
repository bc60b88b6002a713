//go:build cgo && !nogpu

package gpu

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/testkit"
)

// teamScore is a row's score summed as every GPU path sums it (common.wgsl's
// team_sum): lane l of a team of team lanes adds vec4 words l, l+team, ...
// by component with fma (fused; or, for a device that does not fuse fma,
// a rounded product then a rounded sum), then (x + y) + (z + w); the lanes
// meet in the pairwise tree over adjacent lanes. row and q are padded to
// the stride; l2 scores the squared distance.
func teamScore(row, q []float32, team int, l2, fused bool) float32 {
	dim4 := len(row) / 4
	lanes := make([]float32, team)
	for l := range lanes {
		var acc [4]float32
		for i := l; i < dim4; i += team {
			for c := range acc {
				a, b := row[4*i+c], q[4*i+c]
				if l2 {
					d := a - b
					a, b = d, d
				}
				if fused {
					acc[c] = fma32(a, b, acc[c])
				} else {
					acc[c] = float32(a*b) + acc[c]
				}
			}
		}
		lanes[l] = (acc[0] + acc[1]) + (acc[2] + acc[3])
	}
	for s := 1; s < team; s *= 2 {
		for off := 0; off+s < team; off += 2 * s {
			lanes[off] = lanes[off] + lanes[off+s]
		}
	}
	return lanes[0]
}

// exactFMA32 is a*b + c rounded once to float32, by math/big.
func exactFMA32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// TestFma32: the host's fused multiply-add is math/big's, where rounding
// the float64 sum to float32 rounds twice the wrong way
// (3·2^-24·(1+2^-20) × (1-2^-20) + 1 is 1 + 3·2^-24 - 3·2^-64, just below
// a float32 midpoint that float64 rounds it onto) and on random operands
// of every sign and many magnitudes.
func TestFma32(t *testing.T) {
	a := float32(3.0 / (1 << 24) * (1 + 1.0/(1<<20)))
	b := float32(1 - 1.0/(1<<20))
	naive := float32(float64(a)*float64(b) + 1)
	require.Equal(t, float32(1+1.0/(1<<23)), exactFMA32(a, b, 1))
	require.Equal(t, float32(1+1.0/(1<<22)), naive, "the case double rounding gets wrong")
	require.Equal(t, exactFMA32(a, b, 1), fma32(a, b, 1))
	r := testkit.Rand(t)
	for i := 0; i < 100000; i++ {
		v := [3]float32{}
		for j := range v {
			v[j] = math.Float32frombits(r.Uint32()&0x807fffff | uint32(100+r.IntN(56))<<23)
		}
		require.Equal(t, exactFMA32(v[0], v[1], v[2]), fma32(v[0], v[1], v[2]), "%v", v)
	}
}

// TestScoreBitsOnEveryPath: every path that scores a float32 row on the
// device gives the same bits, and they are the bits of one summation order
// (teamScore), whatever the subgroup size (CI runs this at lavapipe's 4,
// 8, 16 and 32), the team width, the batch shape or the reduction: single
// queries and tiles of queries read back whole (scores.wgsl, with its
// workgroup-memory tree, with subgroup shuffles and staged batch queries,
// with shuffles it distrusts), the register tiles of gemm.wgsl, and the
// fused scan's hits (topk.wgsl, one query and a tile). A score that differed in its last bit between two
// paths could swap two near-tied rows between them. Rows are random in
// [-1, 1) with a few duplicates; the teams are wider than the row (idle
// lanes) and narrower, and teams of 8 and 64 are wider than subgroups of
// 4 and 32, so they sum across subgroups.
func TestScoreBitsOnEveryPath(t *testing.T) {
	d := softwareDevice(t)
	require.True(t, d.fused, "the fused path passed its self-test on %s", d.info.Name)
	r := testkit.Rand(t)
	const n = 300 // a fused k below n/2, so the device selects
	cases := []struct {
		dim  int
		team uint32 // the device's widest team; the row caps it
	}{{24, 8}, {130, 64}, {768, 8}, {768, 64}}
	if testkit.Full() {
		cases = append(cases, []struct {
			dim  int
			team uint32
		}{{3, 64}, {64, 16}, {200, 32}, {130, 4}, {768, 2}}...)
	}
	distrust := func(src string) string {
		const check = "var ok = w > 0u"
		if strings.HasPrefix(src, "// gemm.wgsl") {
			return src // the tree only: nothing to distrust
		}
		if !strings.Contains(src, check) {
			panic("scores.wgsl's layout check is gone")
		}
		return strings.Replace(src, check, "var ok = false && w > 0u", 1)
	}
	// fusedMode: whether the device's fma is fused, learnt from the first
	// score only one of the two host orders gives; every score after must
	// agree with it.
	fusedMode, known := false, false
	checked, fusedChecks, fusedScores := 0, 0, 0
	for _, c := range cases {
		base := func() *Device {
			return &Device{api: d.api, info: d.info, lim: d.lim, hasSubgroups: d.hasSubgroups, team: c.team}
		}
		// The tree with the fused scan; the subgroup variant (where the
		// device has it) with staged batch queries; the subgroup variant
		// made to distrust its layout, so every workgroup takes its tree.
		type variant struct {
			name string
			dev  *Device
		}
		tree := base()
		tree.fused = true
		sg := base()
		sg.subgroups, sg.staged = d.subgroups, true
		variants := []variant{{"tree, fused", tree}, {fmt.Sprintf("subgroups %v, staged", d.subgroups), sg}}
		if d.subgroups {
			bad := base()
			bad.subgroups, bad.editScores = true, distrust
			variants = append(variants, variant{"subgroups distrusted", bad})
		}
		slab := packed.NewSlab(c.dim)
		vs := make([][]float32, n)
		for i := range vs {
			if i > 2 && r.IntN(8) == 0 {
				vs[i] = vs[r.IntN(i)]
				continue
			}
			vs[i] = make([]float32, c.dim)
			for j := range vs[i] {
				vs[i][j] = r.Float32()*2 - 1
			}
		}
		slab.Append(vs, false)
		qs := make([][]float32, BatchQueries+3) // a full tile and a partial one
		for i := range qs {
			qs[i] = make([]float32, slab.Stride)
			for j := 0; j < c.dim; j++ {
				qs[i][j] = r.Float32()*2 - 1
			}
		}
		for _, metric := range []core.Metric{core.Dot, core.L2} {
			l2 := metric == core.L2
			host := map[[2]int][2]float32{} // the host's sums by query and row, unfused and fused
			for _, v := range variants {
				g, err := newIndex(v.dev, slab.Stride, metric, 0)
				require.NoError(t, err)
				require.NoError(t, g.Upload(context.Background(), slab, 0, nil, nil))
				team := int(g.single.Team)
				require.Equal(t, team, int(g.batch.Team), "one team for single and batch layouts")
				check := func(path string, qi, row int, got float32) {
					t.Helper()
					want, ok := host[[2]int{qi, row}]
					if !ok {
						row32 := slab.Data[row*slab.Stride : (row+1)*slab.Stride]
						want = [2]float32{teamScore(row32, qs[qi], team, l2, false), teamScore(row32, qs[qi], team, l2, true)}
						host[[2]int{qi, row}] = want
					}
					if !known && want[0] != want[1] {
						fusedMode, known = got == want[1], true
						t.Logf("%s: fma is fused on the device: %v", d.info.Name, fusedMode)
					}
					w := want[0]
					if fusedMode {
						w = want[1]
					}
					if math.Float32bits(w) != math.Float32bits(got) {
						require.Failf(t, "another summation order",
							"dim %d %s team %d, %s, %s: query %d row %d: got %v, summed in order %v (fma fused: %v)",
							c.dim, metric, team, v.name, path, qi, row, got, w, fusedMode)
					}
					checked++
				}
				// Every score, one query at a time and a batch at once.
				for qi := range qs[:2] {
					all, err := g.scores(context.Background(), qs[qi], n)
					require.NoError(t, err)
					for row, s := range all {
						check("single scores", qi, row, s)
					}
				}
				_, all, err := g.run(context.Background(), qs, submission{Rows: n}, nil)
				require.NoError(t, err)
				require.Len(t, all, len(qs)*n)
				for qi := range qs {
					for row := 0; row < n; row++ {
						check("batch scores", qi, row, all[qi*n+row])
					}
				}
				_, all, err = g.run(WithBatchKernel(context.Background(), BatchGemm), qs, submission{Rows: n}, nil)
				require.NoError(t, err)
				for qi := range qs {
					for row := 0; row < n; row++ {
						check("gemm scores", qi, row, all[qi*n+row])
					}
				}
				// The fused scan's hits, for one query and the batch.
				for _, batch := range [][][]float32{qs[:1], qs} {
					if !g.dev.fused {
						break
					}
					k := int(g.Limits().FusedK)
					if len(batch) > 1 {
						k = int(g.Limits().FusedBatchK)
					}
					k = min(k, n/2-1)
					if k == 0 {
						continue // no fused layout fits this team on this device
					}
					var st core.Stages
					hits, err := g.Search(context.Background(), batch, k, n, nil, &st)
					require.NoError(t, err)
					require.Equal(t, "fused", st.Path)
					fusedChecks++
					for qi, hs := range hits {
						require.Len(t, hs, k)
						for _, h := range hs {
							check(fmt.Sprintf("fused (%d queries)", len(batch)), qi, h.Row, h.Score)
							fusedScores++
						}
					}
				}
				g.Release()
			}
		}
	}
	require.True(t, known, "some score tells a fused fma from an unfused one")
	require.Positive(t, fusedChecks, "the fused scan was checked")
	t.Logf("%d scores checked, bit for bit, %d of them in %d fused searches", checked, fusedScores, fusedChecks)
}
