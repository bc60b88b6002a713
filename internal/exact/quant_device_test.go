package exact

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/testkit"
)

// simulatedSums computes what a device returns for the first rows rows of
// c: Int8, the exact integer Σ c_q·c_x without the offset; F16, float32
// sums of the same products in reverse order (a device's order is not the
// CPU kernel's), over the words DeviceQuery gives.
func simulatedSums(c *Compressed, qs [][]float32, rows int) DeviceSums {
	d := DeviceSums{Sums: make([]float32, len(qs)*rows), Rows: rows}
	w := c.WordsPerRow()
	words := c.Words()
	for j, q := range qs {
		dq := DeviceQuery(c, q)
		for i := range rows {
			if c.Prec == core.Int8 {
				var sum int32
				for k := range w {
					qw, xw := math.Float32bits(dq[k]), math.Float32bits(words[i*w+k])
					for b := range 4 {
						sum += int32(int8(qw>>(8*b))) * (int32(uint8(xw>>(8*b))) - 128)
					}
				}
				d.Sums[j*rows+i] = math.Float32frombits(uint32(sum))
				continue
			}
			var sum float32
			for k := c.Stride - 1; k >= 0; k-- {
				sum += dq[k] * f16toF32(c.F16[i*c.Stride+k])
			}
			d.Sums[j*rows+i] = sum
		}
	}
	return d
}

// Sums from a device (simulated: another summation order for float16, the
// same integers for int8), for all rows or only the first ones (the rest
// summed on the CPU, as under Overflow), give Search's and Range's
// answers bit for bit, on every data kind, both metrics and precisions,
// filtered or not, and Approximate gives k estimates.
func TestExactSearchSums(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	for trial := range 48 {
		kind := dataKind(trial % int(nKinds))
		p := []core.Precision{core.F16, core.Int8}[trial/int(nKinds)%2]
		m := []core.Metric{core.Dot, core.L2}[trial/(2*int(nKinds))%2]
		dim := 1 + r.IntN(150)
		stride := (dim + 3) &^ 3
		n := 1 + r.IntN(5000)
		if trial%8 == 0 {
			n = 4097 + r.IntN(2000)
		}
		rows := makeRows(r, kind, n, dim)
		s := newSlab(rows, dim, stride, r.IntN(2) == 0)
		c := compress(t, p, s)
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
		devRows := n
		if r.IntN(3) == 0 {
			devRows = r.IntN(n + 1)
		}
		if trial%8 == 0 && n > 4096 {
			devRows = r.IntN(4096) // blocks wholly past the device's rows
		}
		d := simulatedSums(c, qs, devRows)
		name := fmt.Sprintf("trial %d %v/%v/%v n %d dim %d device rows %d", trial, kind, p, m, n, dim, devRows)
		for _, k := range []int{1, 1 + r.IntN(20), n} {
			want, err := fallback.SearchBatch(ctx, s, qs, k, m, 2)
			noErr(t, err)
			got, st, err := ExactSearchSums(ctx, s, c, qs, d, 1, k, m, 2, false)
			noErr(t, err)
			for j := range qs {
				sameBits(t, got[j], want[j], "%s k %d query %d (rescored %d)", name, k, j, st.Rescored)
			}
			if st.Queries != nq || st.MaxRescored > n || st.BytesRead <= 0 {
				t.Fatalf("%s: stats %+v", name, st)
			}
			ap, st, err := ExactSearchSums(ctx, s, c, qs, d, 1, k, m, 2, true)
			noErr(t, err)
			if st.Rescored != 0 || len(ap[0]) != len(want[0]) {
				t.Fatalf("%s: approximate gave %d hits, rescored %d", name, len(ap[0]), st.Rescored)
			}
		}
		one := simulatedSums(c, qs[:1], devRows)
		all, err := fallback.Search(ctx, fallback.Slab{Data: s.Data, Rows: s.Rows, Dim: s.Dim, Stride: s.Stride}, qs[0], n, m, 1)
		noErr(t, err)
		th := all[r.IntN(len(all))].Score
		want, err := fallback.Range(ctx, s, qs[0], th, m, 1)
		noErr(t, err)
		got, _, err := ExactRangeSums(ctx, s, c, qs[0], one, th, m, 1)
		noErr(t, err)
		sameBits(t, got, want, "%s range %g", name, th)
	}
}

// Sums of the wrong shape are an error, never an answer.
func TestDeviceSumsShape(t *testing.T) {
	ctx := context.Background()
	rows := [][]float32{{1, 2, 3, 4}, {4, 3, 2, 1}}
	s := newSlab(rows, 4, 4, false)
	c := compress(t, core.Int8, s)
	q := [][]float32{{1, 0, 0, 0}}
	for _, d := range []DeviceSums{{Sums: make([]float32, 1), Rows: 2}, {Sums: make([]float32, 3), Rows: 3}, {Rows: -1}} {
		if _, _, err := ExactSearchSums(ctx, s, c, q, d, 1, 1, core.Dot, 1, false); !errors.Is(err, fallback.ErrSlabShape) {
			t.Fatalf("%+v: %v", d, err)
		}
		if _, _, err := ExactRangeSums(ctx, s, c, q[0], d, 0, core.Dot, 1); !errors.Is(err, fallback.ErrSlabShape) {
			t.Fatalf("range %+v: %v", d, err)
		}
	}
}
