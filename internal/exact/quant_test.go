package exact

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/internal/topk"
)

// Every half float widens and narrows back to itself, and narrowing a
// float32 gives the nearest half (ties to even), checked against its two
// neighbours.
func TestF16Conversion(t *testing.T) {
	for h := range 1 << 16 {
		f := f16toF32(uint16(h))
		if f != f {
			if g := f32toF16(f); g&0x7c00 != 0x7c00 || g&0x3ff == 0 {
				t.Fatalf("NaN %#04x narrows to %#04x", h, g)
			}
			continue
		}
		if g := f32toF16(f); g != uint16(h) {
			t.Fatalf("half %#04x → %g → %#04x", h, f, g)
		}
	}
	r := testkit.Rand(t)
	for range 200000 {
		v := math.Float32frombits(r.Uint32())
		if v != v || math.IsInf(float64(v), 0) {
			continue
		}
		h := f32toF16(v)
		got := float64(f16toF32(h))
		// The candidates are h's neighbours; none may be strictly nearer.
		for _, n := range []uint16{h - 1, h + 1} {
			if n&0x7c00 == 0x7c00 || (n^h)&0x8000 != 0 {
				continue
			}
			alt := float64(f16toF32(n))
			if math.IsInf(got, 0) {
				continue
			}
			if d, da := math.Abs(got-float64(v)), math.Abs(alt-float64(v)); da < d || da == d && h&1 == 1 {
				t.Fatalf("%g narrows to %g, %g is nearer (or even)", v, got, alt)
			}
		}
		if math.Abs(float64(v)) >= 65520 && !math.IsInf(got, 0) {
			t.Fatalf("%g should overflow to Inf, got %g", v, got)
		}
	}
}

// dataKind makes rows that stress the bounds in one way each.
type dataKind int

const (
	uniformRows   dataKind = iota // uniform in [-1, 1)
	unitRows                      // unit length, like a cosine index
	spanRows                      // norms from 1e-3 to 1e3
	clusterRows                   // hundreds of rows within the quantisation error of each other
	duplicateRows                 // few distinct rows, each many times
	gridRows                      // exact float32 sums: real ties
	nKinds
)

func (k dataKind) String() string {
	return [...]string{"uniform", "unit", "span", "cluster", "duplicate", "grid"}[k]
}

func makeRows(r *rand.Rand, kind dataKind, n, dim int) [][]float32 {
	rows := make([][]float32, n)
	center := testkit.Unit(r, dim)
	for i := range rows {
		switch kind {
		case uniformRows:
			rows[i] = testkit.Vector(r, dim)
		case unitRows:
			rows[i] = testkit.Unit(r, dim)
		case spanRows:
			v := testkit.Vector(r, dim)
			s := float32(math.Pow(10, 6*r.Float64()-3))
			for j := range v {
				v[j] *= s
			}
			rows[i] = v
		case clusterRows:
			v := make([]float32, dim)
			for j := range v {
				v[j] = center[j] + 1e-3*(2*r.Float32()-1)
			}
			rows[i] = v
		case duplicateRows:
			if i < 3 || r.IntN(4) == 0 {
				rows[i] = testkit.Vector(r, dim)
			} else {
				rows[i] = rows[r.IntN(i)]
			}
		case gridRows:
			rows[i] = testkit.Grid(r, dim)
		}
	}
	return rows
}

func makeQuery(r *rand.Rand, kind dataKind, rows [][]float32, dim int) []float32 {
	switch kind {
	case clusterRows, duplicateRows:
		// On top of the data: many rows tie or nearly tie.
		q := append([]float32(nil), rows[r.IntN(len(rows))]...)
		q[r.IntN(dim)] += 1e-4
		return q
	case gridRows:
		return testkit.Grid(r, dim)
	case unitRows:
		return testkit.Unit(r, dim)
	case spanRows:
		q := testkit.Vector(r, dim)
		s := float32(math.Pow(10, 4*r.Float64()-2))
		for j := range q {
			q[j] *= s
		}
		return q
	}
	return testkit.Vector(r, dim)
}

func compress(t testing.TB, p core.Precision, s fallback.Slab) *Compressed {
	t.Helper()
	c, err := NewCompressed(p, s.Dim)
	noErr(t, err)
	c.AppendSlab(s, 0)
	return c
}

// The guarantee itself: for every row, the score the float32 kernel
// computes lies inside the row's interval, on every data kind, metric and
// precision, with every kernel set this machine runs.
func TestQuantBoundsHold(t *testing.T) { forEachQuantKernel(t, quantBoundsHold) }

func quantBoundsHold(t *testing.T) {
	r := newRand(t)
	for kind := range nKinds {
		for _, p := range []core.Precision{core.F16, core.Int8} {
			for _, m := range []core.Metric{core.Dot, core.L2} {
				dim := 1 + r.IntN(200)
				stride := (dim + 3) &^ 3
				rows := makeRows(r, kind, 60, dim)
				s := newSlab(rows, dim, stride, false)
				c := compress(t, p, s)
				for range 3 {
					q, err := fallback.CheckQuery(s, makeQuery(r, kind, rows, dim), m)
					noErr(t, err)
					qq := newQuantQuery(c, q, m)
					exact := make([]float32, s.Rows)
					fallback.ScoreRun(exact, s, q, 0, m)
					topk.ToKeys(m, exact)
					raw := quantRaw(c, qq)
					for i := range s.Rows {
						lo, hi, _ := qq.keyBounds(c, i, raw[i])
						if !(lo <= exact[i] && exact[i] <= hi) {
							t.Fatalf("%v/%v/%v dim %d row %d: key %g outside [%g, %g]", kind, p, m, dim, i, exact[i], lo, hi)
						}
					}
				}
			}
		}
	}
}

// quantRaw runs the active compressed kernel over every row for one query.
func quantRaw(c *Compressed, qq *quantQuery) []float64 {
	raw := make([]float64, c.Rows)
	if c.Prec == core.Int8 {
		buf := make([]int32, c.Rows)
		activeQuant.Load().i8Rows(buf, qq.q8, c.U8, c.Stride)
		for i, v := range buf {
			raw[i] = float64(v)
		}
	} else {
		buf := make([]float32, c.Rows)
		activeQuant.Load().f16Rows(buf, qq.qf, c.F16, c.Stride)
		for i, v := range buf {
			raw[i] = float64(v)
		}
	}
	return raw
}

// The property: on random data of every kind, an exact search over
// compressed rows returns exactly what the float32 search returns (rows,
// ties and score bits), for single queries and batches, k from 1 to past
// Len, filtered or not; and the float32 answer is the float64 one where
// the data makes ties exact.
func TestExactSearchMatchesFloat32(t *testing.T) { forEachQuantKernel(t, exactSearchMatchesFloat32) }

func exactSearchMatchesFloat32(t *testing.T) {
	r := newRand(t)
	ctx := context.Background()
	for trial := range 60 {
		kind := dataKind(trial % int(nKinds))
		p := []core.Precision{core.F16, core.Int8}[trial/int(nKinds)%2]
		m := []core.Metric{core.Dot, core.L2}[trial/(2*int(nKinds))%2]
		dim := 1 + r.IntN(150)
		stride := (dim + 3) &^ 3
		n := 1 + r.IntN(400)
		rows := makeRows(r, kind, n, dim)
		s := newSlab(rows, dim, stride, r.IntN(2) == 0)
		c := compress(t, p, s)
		name := fmt.Sprintf("trial %d %v/%v/%v n %d dim %d", trial, kind, p, m, n, dim)
		if r.IntN(3) == 0 {
			s.Allow = make([]uint64, (n+63)/64)
			for i := range n {
				if r.IntN(4) != 0 {
					s.Allow[i/64] |= 1 << (i % 64)
				}
			}
		}
		nq := 1 + r.IntN(5)
		qs := make([][]float32, nq)
		for j := range qs {
			qs[j] = makeQuery(r, kind, rows, dim)
		}
		for _, k := range []int{1, 1 + r.IntN(20), n, n + 3} {
			want, err := fallback.SearchBatch(ctx, s, qs, k, m, 2)
			noErr(t, err)
			got, st, err := ExactSearchBatch(ctx, s, c, qs, k, m, 2, false)
			noErr(t, err)
			for j := range qs {
				sameBits(t, got[j], want[j], "%s k %d query %d (rescored %d)", name, k, j, st.Rescored)
				one, err := fallback.Search(ctx, s, qs[j], k, m, 1)
				noErr(t, err)
				sameBits(t, got[j], one, "%s k %d query %d vs Search", name, k, j)
			}
			if st.MaxRescored > n || st.Queries != nq {
				t.Fatalf("%s: stats %+v", name, st)
			}
			if kind == gridRows && s.Allow == nil {
				for j := range qs {
					assertRanked(t, m, got[j], refRanking(m, rows, qs[j]), k, true)
				}
			}
		}
	}
}

// Range over compressed rows returns Range's answer, bits and all.
func TestExactRangeMatchesFloat32(t *testing.T) { forEachQuantKernel(t, exactRangeMatchesFloat32) }

func exactRangeMatchesFloat32(t *testing.T) {
	r := newRand(t)
	ctx := context.Background()
	for trial := range 24 {
		kind := dataKind(trial % int(nKinds))
		p := []core.Precision{core.F16, core.Int8}[trial%2]
		m := []core.Metric{core.Dot, core.L2}[trial/2%2]
		dim := 1 + r.IntN(100)
		rows := makeRows(r, kind, 1+r.IntN(300), dim)
		s := newSlab(rows, dim, (dim+3)&^3, false)
		c := compress(t, p, s)
		q := makeQuery(r, kind, rows, dim)
		// A threshold at a real row's score: rows tie with it exactly.
		scores := make([]float32, s.Rows)
		noErr(t, scoreRows(ctx, scores, s, q, m, 1))
		th := scores[r.IntN(len(scores))]
		want, err := fallback.Range(ctx, s, q, th, m, 2)
		noErr(t, err)
		got, st, err := ExactRange(ctx, s, c, q, th, m, 2)
		noErr(t, err)
		sameBits(t, got, want, "trial %d %v/%v/%v threshold %g (rescored %d)", trial, kind, p, m, th, st.Rescored)
	}
}

// Clustered data: hundreds of rows sit within the quantisation error of
// the k-th score, so the rescore must take them all, and does.
func TestExactSearchCluster(t *testing.T) { forEachQuantKernel(t, exactSearchCluster) }

func exactSearchCluster(t *testing.T) {
	r := newRand(t)
	ctx := context.Background()
	dim := 96
	rows := makeRows(r, clusterRows, 800, dim)
	s := newSlab(rows, dim, dim, false)
	for _, p := range []core.Precision{core.F16, core.Int8} {
		c := compress(t, p, s)
		for _, m := range []core.Metric{core.Dot, core.L2} {
			q := makeQuery(r, clusterRows, rows, dim)
			want, err := fallback.Search(ctx, s, q, 10, m, 2)
			noErr(t, err)
			got, st, err := ExactSearchBatch(ctx, s, c, [][]float32{q}, 10, m, 2, false)
			noErr(t, err)
			sameBits(t, got[0], want, "%v/%v", p, m)
			t.Logf("%v/%v: rescored %d of %d", p, m, st.Rescored, s.Rows)
			if p == core.Int8 && st.Rescored < 100 {
				t.Errorf("%v/%v: only %d rows rescored; the cluster is tighter than int8's error, so most rows are candidates", p, m, st.Rescored)
			}
		}
	}
}

// The approximate mode skips the rescore: its hits are the best estimates,
// and on well-spread data most of them are the exact ones.
func TestApproximateSearch(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	dim := 64
	rows := makeRows(r, unitRows, 2000, dim)
	s := newSlab(rows, dim, dim, false)
	q := testkit.Unit(r, dim)
	want, err := fallback.Search(ctx, s, q, 10, core.Dot, 1)
	noErr(t, err)
	for _, p := range []core.Precision{core.F16, core.Int8} {
		c := compress(t, p, s)
		got, st, err := ExactSearchBatch(ctx, s, c, [][]float32{q}, 10, core.Dot, 1, true)
		noErr(t, err)
		if st.Rescored != 0 || len(got[0]) != 10 {
			t.Fatalf("%v: %d hits, %d rescored", p, len(got[0]), st.Rescored)
		}
		in := map[int]bool{}
		for _, h := range want {
			in[h.Row] = true
		}
		hit := 0
		for _, h := range got[0] {
			if in[h.Row] {
				hit++
			}
		}
		if hit < 7 {
			t.Errorf("%v: approximate recall@10 %d/10", p, hit)
		}
	}
}

// The compressed kernels this machine runs agree with the generic ones:
// int8 sums are exact integers, so they agree bit for bit; float16 sums
// round in their own order and agree within the bound the search assumes.
func TestQuantKernelsMatchGeneric(t *testing.T) {
	r := testkit.Rand(t)
	for _, ks := range quantKernelSets() {
		for _, dim := range []int{1, 31, 32, 63, 64, 65, 100, 128, 768, 1000} {
			nr := 1 + r.IntN(13)
			nq := 1 + r.IntN(9)
			rows := makeRows(r, uniformRows, nr, dim)
			s := newSlab(rows, dim, (dim+3)&^3, false)
			for _, p := range []core.Precision{core.F16, core.Int8} {
				c := compress(t, p, s)
				qs := make([]*quantQuery, nq)
				for j := range qs {
					q, err := fallback.CheckQuery(s, testkit.Vector(r, dim), core.Dot)
					noErr(t, err)
					qs[j] = newQuantQuery(c, q, core.Dot)
				}
				name := fmt.Sprintf("%s/%v/dim %d/rows %d", ks.name, p, dim, nr)
				if p == core.Int8 {
					packedQ := make([]int8, nq*c.Stride)
					for j, qq := range qs {
						copy(packedQ[j*c.Stride:], qq.q8)
					}
					tile := make([]int32, nq*nr)
					ks.i8Tile(tile, packedQ, nq, c.U8, nr, c.Stride)
					for j, qq := range qs {
						got := make([]int32, nr)
						want := make([]int32, nr)
						ks.i8Rows(got, qq.q8, c.U8, c.Stride)
						i8RowsGo(want, qq.q8, c.U8, c.Stride)
						for i := range nr {
							if got[i] != want[i] || tile[j*nr+i] != want[i] {
								t.Fatalf("%s query %d row %d: rows %d tile %d generic %d", name, j, i, got[i], tile[j*nr+i], want[i])
							}
						}
					}
					continue
				}
				packedF := make([]float32, nq*c.Stride)
				for j, qq := range qs {
					copy(packedF[j*c.Stride:], qq.qf)
				}
				tile := make([]float32, nq*nr)
				ks.f16Tile(tile, packedF, nq, c.F16, nr, c.Stride)
				for j, qq := range qs {
					got := make([]float32, nr)
					want := make([]float32, nr)
					ks.f16Rows(got, qq.qf, c.F16, c.Stride)
					f16RowsGo(want, qq.qf, c.F16, c.Stride)
					for i := range nr {
						if tile[j*nr+i] != got[i] {
							t.Fatalf("%s query %d row %d: tile %g, rows %g (one order of sums)", name, j, i, tile[j*nr+i], got[i])
						}
						var mag float64
						for j := range c.Stride {
							mag += math.Abs(float64(qq.qf[j]) * float64(f16toF32(c.F16[i*c.Stride+j])))
						}
						if d := math.Abs(float64(got[i]) - float64(want[i])); d > 2*qq.g16*mag {
							t.Fatalf("%s row %d: %g vs generic %g", name, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// Huge and tiny magnitudes: rows that could overflow float32 are always
// rescored, so even there the answer is the float32 one.
func TestExactSearchExtremes(t *testing.T) { forEachQuantKernel(t, exactSearchExtremes) }

func exactSearchExtremes(t *testing.T) {
	r := newRand(t)
	ctx := context.Background()
	dim := 40
	rows := make([][]float32, 120)
	for i := range rows {
		v := testkit.Vector(r, dim)
		s := float32(math.Pow(10, float64(r.IntN(70)-35)))
		for j := range v {
			v[j] *= s
		}
		rows[i] = v
	}
	rows[7] = make([]float32, dim) // a zero row
	s := newSlab(rows, dim, dim, false)
	for _, p := range []core.Precision{core.F16, core.Int8} {
		c := compress(t, p, s)
		for _, m := range []core.Metric{core.Dot, core.L2} {
			for _, scale := range []float32{1e-30, 1, 1e30} {
				q := testkit.Vector(r, dim)
				for j := range q {
					q[j] *= scale
				}
				for _, k := range []int{1, 10, len(rows)} {
					want, err := fallback.Search(ctx, s, q, k, m, 1)
					noErr(t, err)
					got, _, err := ExactSearchBatch(ctx, s, c, [][]float32{q}, k, m, 1, false)
					noErr(t, err)
					sameBits(t, got[0], want, "%v/%v query scale %g k %d", p, m, scale, k)
				}
			}
		}
	}
}

func TestCompressedShapeErrors(t *testing.T) {
	_, err := NewCompressed(core.F32, 8)
	isErr(t, err, ErrPrecision)
	_, err = NewCompressed(core.Int8, MaxQuantDim+1)
	isErr(t, err, ErrPrecision)
	s := newSlab([][]float32{{1, 2}, {3, 4}}, 2, 4, false)
	c := compress(t, core.Int8, newSlab([][]float32{{1, 2}}, 2, 4, false))
	_, _, err = ExactSearchBatch(context.Background(), s, c, [][]float32{{1, 1}}, 1, core.Dot, 1, false)
	isErr(t, err, fallback.ErrSlabShape)
	// Truncate and Set keep the compressed rows in step.
	c2 := compress(t, core.Int8, s)
	c2.Truncate(1)
	c2.Set(0, []float32{3, 4})
	if c2.Rows != 1 || c2.U8[0] != 128+95 || c2.U8[1] != 128+127 {
		t.Fatalf("after Truncate and Set: rows %d codes %v", c2.Rows, c2.U8[:2])
	}
}

// sameBits is sameHits comparing scores by their bits, so NaN scores (a
// float32 dot product that overflowed) compare equal to themselves.
func sameBits(t testing.TB, got, want []core.Hit, format string, args ...any) {
	t.Helper()
	eq := len(got) == len(want)
	for i := 0; eq && i < len(got); i++ {
		eq = got[i].Row == want[i].Row && math.Float32bits(got[i].Score) == math.Float32bits(want[i].Score)
	}
	if !eq {
		t.Errorf("%s: hits differ\n got %v\nwant %v", fmt.Sprintf(format, args...), got, want)
	}
}

// Adversarial queries: the query points along a row's own quantisation
// residual, so that row's compressed estimate falls short of its float32
// score by the whole Cauchy–Schwarz term ‖q‖·ε — the case a bound that is
// too tight (or a filter that trusts the estimate) gets wrong.
func TestExactSearchResidualQueries(t *testing.T) { forEachQuantKernel(t, exactSearchResidualQueries) }

func exactSearchResidualQueries(t *testing.T) {
	r := newRand(t)
	ctx := context.Background()
	dim := 64
	rows := makeRows(r, clusterRows, 300, dim)
	s := newSlab(rows, dim, dim, false)
	for _, p := range []core.Precision{core.F16, core.Int8} {
		c := compress(t, p, s)
		for trial := range 20 {
			target := r.IntN(len(rows))
			q := make([]float32, dim)
			for j := range dim {
				var hat float64
				if p == core.Int8 {
					hat = float64(int(c.U8[target*c.Stride+j])-128) * float64(c.Scale[target])
				} else {
					hat = float64(f16toF32(c.F16[target*c.Stride+j])) * float64(c.Scale[target])
				}
				q[j] = float32(float64(rows[target][j]) - hat)
			}
			for _, m := range []core.Metric{core.Dot, core.L2} {
				for _, k := range []int{1, 5} {
					want, err := fallback.Search(ctx, s, q, k, m, 1)
					noErr(t, err)
					got, _, err := ExactSearchBatch(ctx, s, c, [][]float32{q, q}, k, m, 2, false)
					noErr(t, err)
					sameBits(t, got[0], want, "%v/%v trial %d target %d k %d", p, m, trial, target, k)
				}
			}
		}
	}
}

// TestAppendSlabInParallel: a large slab compressed on several goroutines
// gives the same codes, scales, bounds and MaxHat, bit for bit, as on one,
// appended in one piece or after rows already there.
func TestAppendSlabInParallel(t *testing.T) {
	r := testkit.Rand(t)
	const rows, dim = 20000, 40
	data := make([]float32, rows*dim)
	for i := range data {
		data[i] = float32(r.NormFloat64()) * float32(1+r.IntN(100))
	}
	s := fallback.Slab{Data: data, Rows: rows, Dim: dim, Stride: dim}
	for _, p := range []core.Precision{core.Int8, core.F16} {
		one, err := NewCompressed(p, dim)
		require.NoError(t, err)
		one.Workers = 1
		one.AppendSlab(s, 0)
		for _, from := range []int{0, 7777} {
			many, err := NewCompressed(p, dim)
			require.NoError(t, err)
			many.Workers = 4
			if from > 0 {
				many.AppendSlab(fallback.Slab{Data: data[:from*dim], Rows: from, Dim: dim, Stride: dim}, 0)
			}
			many.AppendSlab(s, from)
			many.Workers = 1
			require.Equal(t, one, many, "%v from %d", p, from)
		}
	}
}
