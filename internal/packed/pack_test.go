package packed

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// oldPack is how a row was packed before packing checked and grouped rows:
// the reference the new packing must match bit for bit.
func oldPack(dst, v []float32, dim int, normalize bool) {
	if normalize {
		inv := 1 / Norm(v)
		for j, x := range v {
			dst[j] = float32(float64(x) * inv)
		}
	} else {
		copy(dst, v)
	}
	clear(dst[dim:])
}

// randRow draws a row of one of several magnitudes: ordinary, huge (near
// float32's largest), tiny (subnormal), mixed across the whole range, with
// exact zeros and negative zeros sprinkled in.
func randRow(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	kind := r.IntN(5)
	for j := range v {
		x := r.Float64()*2 - 1
		switch kind {
		case 1:
			x *= 3.4e38
		case 2:
			x *= 1e-40
		case 3:
			x *= math.Pow(2, float64(r.IntN(270)-150))
		case 4:
			if r.IntN(3) == 0 {
				x = 0
			}
		}
		v[j] = float32(x)
		if r.IntN(50) == 0 {
			v[j] = float32(math.Copysign(0, x))
		}
	}
	if v[0] == 0 && v[dim-1] == 0 {
		v[0] = 1 // never an all-zero row here
	}
	return v
}

func requireBits(t *testing.T, want, got []float32, format string, args ...any) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf(format+": value %d is %v (%08x), want %v (%08x)", append(args, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))...)
		}
	}
}

// TestPackingIsBitIdenticalToScalar: the grouped, checked packing stores
// exactly the bytes the one-row-at-a-time scalar packing stored, for every
// magnitude float32 has, every remainder of rows modulo the group and of
// dim modulo the stride, through Append, AppendFlat, AppendRows with
// checks, Set and PackRows.
func TestPackingIsBitIdenticalToScalar(t *testing.T) {
	r := testkit.Rand(t)
	for _, dim := range []int{1, 2, 3, 4, 5, 7, 16, 33, 768} {
		for _, norm := range []bool{false, true} {
			var rows [][]float32
			want := NewSlab(dim)
			got, gotFlat, gotChecked := NewSlab(dim), NewSlab(dim), NewSlab(dim)
			for batch := 0; batch < 5; batch++ {
				vs := make([][]float32, r.IntN(11))
				var flat []float32
				for i := range vs {
					vs[i] = randRow(r, dim)
					flat = append(flat, vs[i]...)
				}
				rows = append(rows, vs...)
				for _, v := range vs {
					want.Data = append(want.Data, make([]float32, want.Stride)...)
					oldPack(want.Data[want.Rows*want.Stride:], v, dim, norm)
					want.Rows++
				}
				got.Append(vs, norm)
				gotFlat.AppendFlat(flat, norm)
				require.NoError(t, gotChecked.AppendRows(vs, Mode{Normalize: norm, Check: true, RejectZero: norm}))
			}
			requireBits(t, want.Data, got.Data, "dim %d normalize %v: Append", dim, norm)
			requireBits(t, want.Data, gotFlat.Data, "dim %d normalize %v: AppendFlat", dim, norm)
			requireBits(t, want.Data, gotChecked.Data, "dim %d normalize %v: AppendRows", dim, norm)
			if len(rows) == 0 {
				continue
			}
			i := r.IntN(len(rows))
			v := randRow(r, dim)
			oldPack(want.PaddedRow(i), v, dim, norm)
			got.Set(i, v, norm)
			requireBits(t, want.Data, got.Data, "dim %d normalize %v: Set", dim, norm)
			// CheckRows, then SetRowsScaled: several rows, out of order, in place.
			var at []int
			var vs [][]float32
			for range 1 + r.IntN(9) {
				i := r.IntN(len(rows))
				if slices.Contains(at, i) {
					continue
				}
				v := randRow(r, dim)
				oldPack(want.PaddedRow(i), v, dim, norm)
				at, vs = append(at, i), append(vs, v)
			}
			inv, err := got.CheckRows(len(vs), func(j int) []float32 { return vs[j] }, Mode{Normalize: norm, Check: true})
			require.NoError(t, err)
			got.SetRowsScaled(at, func(j int) []float32 { return vs[j] }, inv)
			requireBits(t, want.Data, got.Data, "dim %d normalize %v: CheckRows, SetRowsScaled", dim, norm)
			aside := make([]float32, len(rows)*want.Stride)
			require.NoError(t, want.PackRows(aside, len(rows), func(i int) []float32 { return rows[i] }, Mode{Normalize: norm, Check: true}))
			requireBits(t, gotChecked.Data, aside, "dim %d normalize %v: PackRows", dim, norm)
		}
	}
}

// TestCheckedAppendRefusesBadRows: the first row of the wrong length, with
// a NaN or ±Inf, or (when refused) all zeros stops the append, is named by
// row and component, and leaves the slab exactly as it was.
func TestCheckedAppendRefusesBadRows(t *testing.T) {
	r := testkit.Rand(t)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, dim := range []int{1, 3, 8, 13, 768} {
		for _, norm := range []bool{false, true} {
			s := NewSlab(dim)
			require.NoError(t, s.AppendRows([][]float32{randRow(r, dim), randRow(r, dim)}, Mode{Normalize: norm, Check: true}))
			before := append([]float32(nil), s.Data...)
			for _, bad := range []float32{nan, inf, -inf, 0} {
				vs := make([][]float32, 1+r.IntN(13))
				for i := range vs {
					vs[i] = randRow(r, dim)
				}
				row, col := r.IntN(len(vs)), r.IntN(dim)
				want := &BadRow{Row: row, Col: col, Value: bad}
				if bad == 0 {
					for j := range vs[row] {
						vs[row][j] = float32(math.Copysign(0, float64(r.IntN(2)*2-1)))
					}
					want = &BadRow{Row: row, Zero: true}
				} else {
					vs[row][col] = bad
					// A second bad value later in the row and a bad row
					// later on are not the first.
					if col+1 < dim {
						vs[row][dim-1] = nan
					}
					if row+1 < len(vs) {
						vs[len(vs)-1][0] = inf
					}
				}
				m := Mode{Normalize: norm, Check: true, RejectZero: true}
				for name, err := range map[string]error{
					"CheckRows": func() error {
						_, err := s.CheckRows(len(vs), func(i int) []float32 { return vs[i] }, m)
						return err
					}(),
					"AppendRows": s.AppendRows(vs, m),
					"AppendFlatRows": s.AppendFlatRows(func() []float32 {
						var f []float32
						for _, v := range vs {
							f = append(f, v...)
						}
						return f
					}(), m),
				} {
					var b *BadRow
					require.ErrorAs(t, err, &b, "%s dim %d bad %v", name, dim, bad)
					w := *want
					if bad != bad {
						require.True(t, b.Value != b.Value, "%s: value %v, want NaN", name, b.Value)
						w.Value, b.Value = 0, 0 // NaN equals nothing, itself included
					}
					require.Equal(t, &w, b, "%s dim %d normalize %v", name, dim, norm)
					require.Equal(t, 2, s.Rows, name)
					requireBits(t, before, s.Data, "%s changed the slab", name)
				}
			}
			err := s.AppendRows([][]float32{randRow(r, dim), make([]float32, dim+1)}, Mode{Normalize: norm, Check: true})
			require.Equal(t, &BadRow{Row: 1, WrongLen: true, Len: dim + 1}, err)
			requireBits(t, before, s.Data, "a wrong length changed the slab")
			if !norm {
				// Zero rows are refused only when asked (Dot, L2 keep them).
				require.NoError(t, s.AppendRows([][]float32{make([]float32, dim)}, Mode{Check: true}))
				require.Equal(t, 3, s.Rows)
			}
		}
	}
}

// TestReserveGrowsOnce: an empty slab is sized to exactly what one call
// needs, and a growing one gains at most a quarter of its size as
// headroom, so no call holds twice the slab it needs.
func TestReserveGrowsOnce(t *testing.T) {
	r := testkit.Rand(t)
	dim := 1 + r.IntN(100)
	s := NewSlab(dim)
	n := 1 + r.IntN(1000)
	require.NoError(t, s.AppendFlatRows(make([]float32, n*dim), Mode{}))
	require.Equal(t, n*s.Stride, cap(s.Data), "an empty slab grew past what the call needs")
	m := 1 + r.IntN(1000)
	before := len(s.Data)
	require.NoError(t, s.AppendFlatRows(make([]float32, m*dim), Mode{}))
	require.GreaterOrEqual(t, cap(s.Data), (n+m)*s.Stride)
	require.LessOrEqual(t, cap(s.Data), (n+m)*s.Stride+before/4, "headroom beyond a quarter of the stored rows")
	require.Zero(t, (cap(s.Data)-(n+m)*s.Stride)%s.Stride, "headroom is whole rows")
	// Small appends then fit without reallocating until the headroom is used.
	c := cap(s.Data)
	for s.Rows*s.Stride+s.Stride <= c {
		s.Append([][]float32{make([]float32, dim)}, false)
		require.Equal(t, c, cap(s.Data))
	}
}

// TestSumLanesKernelMatchesGo: the assembly sum of squares (where the CPU
// has it) leaves exactly the partial sums the Go loop leaves — an ulp of
// difference in a sum seldom shows in a float32 row, so the sums
// themselves are compared — over every magnitude float32 has, terms of
// very different sizes (where any other order of adds rounds
// differently), and partial sums that do not start at zero.
func TestSumLanesKernelMatchesGo(t *testing.T) {
	r := testkit.Rand(t)
	t.Logf("assembly kernel in use: %v", haveAsm)
	for range 300 {
		v := randRow(r, lanes*(1+r.IntN(40)))
		if r.IntN(2) == 0 {
			for j := range v {
				v[j] = float32(math.Ldexp(r.Float64()+0.5, -r.IntN(40)))
			}
		}
		var want, got [lanes]float64
		for l := range want {
			if r.IntN(3) == 0 {
				want[l] = math.Ldexp(r.Float64(), r.IntN(60)-30)
			}
		}
		got = want
		sumLanesGo(&want, v)
		sumLanes(&got, v)
		for l := range want {
			require.Equal(t, math.Float64bits(want[l]), math.Float64bits(got[l]), "len %d lane %d", len(v), l)
		}
	}
}

// TestSumSquares: a row's sum of squares is the exact sum to within the
// rounding of its additions, zero exactly when every component is ±0,
// +Inf or NaN exactly when a component is not finite, and its square root
// is Norm — for every length, so every tail past the last 32 components.
func TestSumSquares(t *testing.T) {
	r := testkit.Rand(t)
	for dim := 1; dim <= 200; dim++ {
		v := randRow(r, dim)
		exact := new(big.Float).SetPrec(2000)
		for _, x := range v {
			sq := new(big.Float).SetPrec(2000).SetFloat64(float64(x))
			exact.Add(exact, sq.Mul(sq, sq))
		}
		want, _ := exact.Float64()
		got := sumSquares(v)
		require.InEpsilon(t, want, got, float64(dim)*0x1p-52, "dim %d", dim)
		require.Equal(t, Norm(v), math.Sqrt(got))

		z := make([]float32, dim)
		z[r.IntN(dim)] = float32(math.Copysign(0, -1))
		require.Equal(t, uint64(0), math.Float64bits(sumSquares(z)), "dim %d: a row of zeros sums to +0", dim)
		z[r.IntN(dim)] = math.SmallestNonzeroFloat32
		require.Greater(t, sumSquares(z), 0.0, "dim %d: the smallest subnormal squared is not lost", dim)

		bad := slices.Clone(v)
		bad[r.IntN(dim)] = float32(math.Inf(1 - 2*r.IntN(2)))
		require.True(t, math.IsInf(sumSquares(bad), 1), "dim %d: ±Inf", dim)
		bad[r.IntN(dim)] = float32(math.NaN())
		require.True(t, math.IsNaN(sumSquares(bad)) || math.IsInf(sumSquares(bad), 1), "dim %d: NaN", dim)
		bad = slices.Clone(v)
		bad[r.IntN(dim)] = float32(math.NaN())
		require.True(t, math.IsNaN(sumSquares(bad)), "dim %d: NaN alone", dim)
	}
}

// TestScaleKernelMatchesGo: the assembly scale (where the CPU has it)
// writes exactly what the Go loop writes, for every length remainder and
// for products that overflow, underflow to subnormals, or round to zero.
func TestScaleKernelMatchesGo(t *testing.T) {
	r := testkit.Rand(t)
	t.Logf("assembly kernel in use: %v", haveAsm)
	for n := range 40 {
		for range 20 {
			v := randRow(r, max(n, 1))[:n]
			inv := math.Ldexp(r.Float64()+0.5, r.IntN(300)-150)
			want, got := make([]float32, n), make([]float32, n)
			scaleGo(want, v, inv)
			scaleValues(got, v, inv)
			requireBits(t, want, got, "n %d inv %g", n, inv)
		}
	}
}

// TestPackInPlaceThenAdopt: packing rows in place and adopting their
// storage gives the bytes a copying append gives, for both modes.
func TestPackInPlaceThenAdopt(t *testing.T) {
	r := testkit.Rand(t)
	for _, dim := range []int{4, 8, 768} {
		for _, norm := range []bool{false, true} {
			n := 1 + r.IntN(40)
			flat := make([]float32, 0, n*dim)
			for range n {
				flat = append(flat, randRow(r, dim)...)
			}
			want := NewSlab(dim)
			m := Mode{Normalize: norm, Check: true, RejectZero: norm}
			require.NoError(t, want.AppendFlatRows(flat, m))
			s := NewSlab(dim)
			require.True(t, s.CanAdopt())
			require.NoError(t, s.PackRows(flat, n, func(i int) []float32 { return flat[i*dim : (i+1)*dim] }, m))
			s.Adopt(flat)
			require.Equal(t, n, s.Rows)
			requireBits(t, want.Data, s.Data, "dim %d normalize %v", dim, norm)
			require.False(t, s.CanAdopt(), "a slab with rows adopts nothing")
			require.False(t, NewSlab(dim+1).CanAdopt(), "padded rows cannot be adopted")
		}
	}
}

// TestNormalizeIsIdempotent: a row normalised and stored, then given again
// (an export added back), is stored with the same bits, by the row packer
// and by the query path alike; a row not of unit norm is still scaled.
func TestNormalizeIsIdempotent(t *testing.T) {
	r := testkit.Rand(t)
	for _, dim := range []int{1, 2, 3, 7, 64, 129, 768, 1536} {
		for range 200 {
			v := make([]float32, dim)
			for j := range v {
				v[j] = float32(r.NormFloat64() * math.Exp(r.Float64()*20-10))
			}
			if sumSquares(v) == 0 {
				continue
			}
			once := Normalized(v, dim)
			twice := Normalized(once, dim)
			require.Equal(t, once, twice, "dim %d: a unit vector normalised again keeps its bits", dim)
			s := NewSlab(dim)
			require.NoError(t, s.AppendRows([][]float32{once}, Mode{Normalize: true, Check: true, RejectZero: true}))
			require.Equal(t, once, s.Row(0), "dim %d: the row packer agrees", dim)
		}
	}
	require.Equal(t, 1/math.Sqrt(4.0), InvNorm(4), "a row of norm 2 is halved")
	require.Equal(t, 1.0, InvNorm(1+0x1p-23), "within float32 rounding of unit norm: kept")
	require.NotEqual(t, 1.0, InvNorm(1+0x1p-20), "past it: scaled")
}
