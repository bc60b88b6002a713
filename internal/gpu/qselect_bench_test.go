//go:build cgo && !nogpu

package gpu

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/exact"
	"github.com/umbravec/umbra/internal/testkit"
)

// BenchmarkCompressedSelect runs a compressed exact search (k = 10) both
// ways on the same resident codes: "sums", today's path (every raw sum
// read back, bounded and rescored on the host), and "select", the
// candidates selected on the device (qbounds.wgsl) with only they read
// back. It reports per query the bytes read (the codes and per-row data
// scanned on the device, the host's reads and the rescored float32 rows:
// exact.QuantStats.BytesRead) and the bytes mapped back from the device.
//
//	UMBRA_REQUIRE_GPU=1 go test -run '^$' -bench CompressedSelect -benchtime 5x ./internal/gpu/
func BenchmarkCompressedSelect(b *testing.B) {
	const rows, dim, k = 100_000, 256, 10
	var d *Device
	as, _ := Adapters("vulkan")
	for _, a := range as {
		if d, _ = a.Probe(context.Background(), 30*time.Second); d != nil {
			break
		}
	}
	if d == nil {
		b.Skip("no working vulkan adapter")
	}
	r := testkit.Rand(b)
	vs := testkit.Vectors(r, rows, dim)
	qs := testkit.Vectors(r, 64, dim)
	for _, prec := range []core.Precision{core.F16, core.Int8} {
		c, err := exact.NewCompressed(prec, dim)
		if err != nil {
			b.Fatal(err)
		}
		c.Append(vs)
		flat := make([]float32, 0, rows*dim)
		for _, v := range vs {
			flat = append(flat, v...)
		}
		for _, m := range []core.Metric{core.Dot, core.L2} {
			f := &qfix{c: c, m: m, dev: rows, rows: vs}
			f.s.Data, f.s.Rows, f.s.Dim, f.s.Stride = flat, rows, dim, dim
			g, err := d.NewCompressedIndex(c.WordsPerRow(), prec, m, 0)
			if err != nil {
				b.Fatal(err)
			}
			f.g = g
			words := c.WordsPerRow()
			if err := g.Upload(context.Background(), slabOf(c.Words(), words, rows), 0, nil, nil); err != nil {
				b.Fatal(err)
			}
			for _, nq := range []int{1, 64} {
				batch := qs[:nq]
				for _, path := range []string{"sums", "select"} {
					b.Run(fmt.Sprintf("%v/%v/batch%d/%s", prec, m, nq, path), func(b *testing.B) {
						var st core.Stages
						var read int64
						for b.Loop() {
							var qst exact.QuantStats
							var err error
							if path == "sums" {
								qst, err = f.benchSums(batch, k, &st)
							} else {
								qst, err = f.benchSelect(batch, k, &st)
							}
							if err != nil {
								b.Fatal(err)
							}
							read += qst.BytesRead
						}
						per := float64(b.N * nq)
						b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
						b.ReportMetric(float64(read)/per, "read-B/query")
						b.ReportMetric(float64(st.BytesDown)/per, "back-B/query")
					})
				}
			}
			g.Release()
		}
	}
}

// benchSums is today's path for the benchmark: the sums, then the host.
func (f *qfix) benchSums(qs [][]float32, k int, st *core.Stages) (exact.QuantStats, error) {
	ctx := context.Background()
	dq := make([][]float32, len(qs))
	for j, q := range qs {
		dq[j] = exact.DeviceQuery(f.c, q)
	}
	sums, scans, err := f.g.Sums(ctx, dq, f.dev, st)
	if err != nil {
		return exact.QuantStats{}, err
	}
	_, qst, err := exact.ExactSearchSums(ctx, f.s, f.c, qs, exact.DeviceSums{Sums: sums, Rows: f.dev}, scans, k, f.m, 0, false)
	return qst, err
}

// benchSelect is the device-selection path for the benchmark, with the
// engine's capacity (max(4k, 1024)); an overflowed query would take
// benchSums' path.
func (f *qfix) benchSelect(qs [][]float32, k int, st *core.Stages) (exact.QuantStats, error) {
	ctx := context.Background()
	dq := make([][]float32, len(qs))
	for j, q := range qs {
		dq[j] = exact.DeviceQuery(f.c, q)
	}
	coefs, ok, err := exact.DeviceBoundCoefs(f.s, f.c, qs, f.m)
	if err != nil {
		return exact.QuantStats{}, err
	}
	cands, _, scans, rowScans, err := f.g.SelectSums(ctx, QuantSelect{Queries: dq, Coefs: coefs, Rows: f.dev, K: k, Cap: max(4*k, 1024),
		RowData: func(a, b int) []float32 { return exact.DeviceRowData(f.c, a, b) }}, st)
	if err != nil {
		return exact.QuantStats{}, err
	}
	var good [][]exact.DeviceCand
	var gq, rest [][]float32
	for j := range qs {
		if ok[j] && cands[j] != nil {
			good, gq = append(good, cands[j]), append(gq, qs[j])
		} else {
			rest = append(rest, qs[j])
		}
	}
	var qst exact.QuantStats
	if len(gq) > 0 {
		_, s, err := exact.ExactSearchCands(ctx, f.s, f.c, gq, exact.DeviceCands{Cands: good, Rows: f.dev}, scans, rowScans, k, f.m, 0)
		if err != nil {
			return qst, err
		}
		qst.Add(s)
	}
	if len(rest) > 0 {
		s, err := f.benchSums(rest, k, st)
		if err != nil {
			return qst, err
		}
		qst.Add(s)
	}
	return qst, nil
}
