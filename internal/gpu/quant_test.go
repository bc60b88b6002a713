//go:build cgo && !nogpu

package gpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/packed"
	"github.com/umbravec/umbra/internal/testkit"
)

// backendDevice returns a working device on the named backend ("vulkan",
// "gl"), skipping (or failing under UMBRA_REQUIRE_GPU=1) when none works.
func backendDevice(t *testing.T, backend string) *Device {
	t.Helper()
	as, _ := Adapters(backend)
	for _, a := range as {
		if a.Info.API != backend {
			continue
		}
		if dev, _ := a.Probe(context.Background(), 30*time.Second); dev != nil {
			return dev
		}
	}
	testkit.NoGPU(t, "no %s adapter works", backend)
	return nil
}

func half(h uint16) float64 {
	e := int(h>>10) & 31
	f := float64(h & 1023)
	var v float64
	switch e {
	case 0:
		v = math.Ldexp(f, -24)
	case 31:
		v = math.Inf(1)
	default:
		v = math.Ldexp(1024+f, e-25)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// TestCompressedSums checks quant.wgsl's raw sums against the host's:
// int8 sums are exact integers and must be equal; float16 sums within the
// float32 rounding bound of the float64 sum. Rows span six orders of
// magnitude, batches cross a tile, and the chunks are small so sums cross
// chunk boundaries.
func TestCompressedSums(t *testing.T) {
	seed := testkit.Seed(t) // both backends get the same data
	backends := []string{"vulkan", "gl"}
	if !testkit.Full() {
		// GL's probe costs seconds on llvmpipe; CI (UMBRA_FULL=1) runs it.
		backends = backends[:1]
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			d := backendDevice(t, backend)
			r := rand.New(rand.NewPCG(seed, 41))
			for _, prec := range []core.Precision{core.Int8, core.F16} {
				for _, dim := range []int{5, 100, 768} {
					n := 300 + r.IntN(400)
					c, err := exact.NewCompressed(prec, dim)
					require.NoError(t, err)
					rows := make([][]float32, n)
					for i := range rows {
						scale := math.Pow(10, float64(r.IntN(7)-3))
						rows[i] = make([]float32, dim)
						for j := range rows[i] {
							rows[i][j] = float32((r.Float64()*2 - 1) * scale)
						}
					}
					c.Append(rows)
					words := c.WordsPerRow()
					g, err := d.NewCompressedIndex(words, prec, core.Dot, 128)
					require.NoError(t, err)
					slab := &packed.Slab{Dim: words, Stride: words, Rows: n, Data: c.Words()}
					require.NoError(t, g.Upload(context.Background(), slab, 0, nil, nil))
					nq := 1 + r.IntN(12)
					qs := make([][]float32, nq)
					dq := make([][]float32, nq)
					for j := range qs {
						qs[j] = make([]float32, dim)
						for i := range qs[j] {
							qs[j][i] = float32(r.NormFloat64())
						}
						dq[j] = exact.DeviceQuery(c, qs[j])
					}
					// Search and Scores would misread sums as scores:
					// they refuse.
					_, err = g.Search(context.Background(), dq, 1, n, nil, nil)
					require.ErrorIs(t, err, ErrFailed)
					_, err = g.Scores(context.Background(), dq[0], n)
					require.ErrorIs(t, err, ErrFailed)
					_, _, err = g.Sums(context.Background(), [][]float32{make([]float32, 3)}, n, nil)
					require.ErrorIs(t, err, ErrFailed, "a query of the wrong length")
					var st core.Stages
					sums, scans, err := g.Sums(context.Background(), dq, n, &st)
					require.NoError(t, err)
					require.Len(t, sums, nq*n)
					qt := BatchQueries
					if nq == 1 {
						qt = 1
					}
					require.Equal(t, (nq+qt-1)/qt, scans, "one pass over the codes per tile of %d queries", qt)
					require.Equal(t, int64(scans)*int64(n)*int64(words)*4, st.BytesRead,
						"the codes read, once per pass (what exact counts from scans)")
					for j := range nq {
						for i := range n {
							what := fmt.Sprintf("%v dim %d query %d row %d", prec, dim, j, i)
							got := sums[j*n+i]
							if prec == core.Int8 {
								var want int64
								for w := range words {
									qw, xw := math.Float32bits(dq[j][w]), math.Float32bits(c.Words()[i*words+w])
									for b := range 4 {
										want += int64(int8(qw>>(8*b))) * int64(int(uint8(xw>>(8*b)))-128)
									}
								}
								require.Equal(t, want, int64(int32(math.Float32bits(got))), what)
								continue
							}
							var want, mag float64
							for k := range dim {
								x := half(c.F16[i*c.Stride+k])
								want += float64(dq[j][k]) * x
								mag += math.Abs(float64(dq[j][k]) * x)
							}
							require.InDelta(t, want, float64(got), mag*float64(c.Stride+1)*0x1p-24+1e-30, what)
						}
					}
					g.Release()
				}
			}
		})
	}
}
