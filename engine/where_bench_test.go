package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// BenchmarkWhere measures what a umbra.Where filter costs beside the scan it
// narrows: building the row bitmap from the per-field indexes ("mask"),
// against a search of the same query without a filter ("scan") and with
// it ("search"), for a selective filter (one user of 10,000: about 100
// rows), a broad one (one of two values: half the rows), a time range
// (a tenth), a tag and a conjunction of three; "gather" says whether the
// filtered search read only the admitted rows (1) or scanned (0). Rows: UMBRA_BENCH_ROWS
// (default 1,000,000) of dimension 128; devices: cpu, and vulkan when an
// adapter works.
//
//	go test -run '^$' -bench umbra.Where -benchtime 20x ./engine/
func BenchmarkWhere(b *testing.B) {
	rows := 1_000_000
	if s := os.Getenv("UMBRA_BENCH_ROWS"); s != "" {
		rows, _ = strconv.Atoi(s)
	}
	const dim = 128
	r := rand.New(rand.NewPCG(1, 2))
	data := testkit.Matrix(r, rows, dim)
	fields := make([]meta.Fields, rows)
	tags := []string{"work", "home", "todo", "idea", "done", "red", "blue", "green"}
	for i := range fields {
		fields[i] = meta.Fields{
			"user": meta.KeywordOf("u" + strconv.Itoa(r.IntN(10_000))),
			"kind": meta.KeywordOf([]string{"note", "chat"}[r.IntN(2)]),
			"ts":   meta.IntOf(1_700_000_000 + int64(r.IntN(10_000_000))),
			"tags": meta.TagsOf(tags[r.IntN(len(tags))], tags[r.IntN(len(tags))]),
		}
	}
	filters := []struct {
		name string
		f    meta.Filter
	}{
		{"selective", meta.Eq("user", meta.KeywordOf("u42"))},
		{"broad", meta.Eq("kind", meta.KeywordOf("note"))},
		{"range", meta.And(meta.Gte("ts", meta.IntOf(1_700_000_000)), meta.Lt("ts", meta.IntOf(1_701_000_000)))},
		{"tag", meta.Contains("tags", "todo")},
		{"and3", meta.And(meta.Eq("kind", meta.KeywordOf("chat")), meta.Contains("tags", "work"), meta.Gte("ts", meta.IntOf(1_705_000_000)))},
	}
	ctx := context.Background()
	for _, dev := range []Device{CPU, GPU} {
		cfg := Config{Dim: dim, Metric: umbra.Dot, Device: dev}
		if dev == GPU {
			cfg.Adapters = []AdapterSelect{{Backend: "vulkan"}}
		}
		ix, err := New(ctx, cfg)
		if err != nil {
			b.Logf("%v: %v", dev, err)
			continue
		}
		if _, err := ix.Add(ctx, umbra.Flat(data, dim), umbra.WithMeta(fields...)); err != nil {
			b.Fatal(err)
		}
		q := testkit.Vector(r, dim)
		name := fmt.Sprintf("%s/rows=%d", dev, rows)
		if dev == GPU {
			name = fmt.Sprintf("vulkan-%s/rows=%d", ix.Info().Adapter.Name, rows)
		}
		b.Run(name+"/scan", func(b *testing.B) {
			for b.Loop() {
				if _, err := ix.Search(ctx, q, 10); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, f := range filters {
			o := searchOptions{where: f.f, whereSet: true}
			ix.mu.RLock()
			rm, err := ix.mask(&o)
			rm.release()
			n := rm.n
			ix.mu.RUnlock()
			if err != nil {
				b.Fatal(err)
			}
			b.Run(name+"/"+f.name+"/mask", func(b *testing.B) {
				b.ReportMetric(float64(n), "rows")
				for b.Loop() {
					ix.mu.RLock()
					rm, err := ix.mask(&o)
					rm.release()
					ix.mu.RUnlock()
					if err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/"+f.name+"/search", func(b *testing.B) {
				for b.Loop() {
					if _, err := ix.Search(ctx, q, 10, umbra.Where(f.f)); err != nil {
						b.Fatal(err)
					}
				}
				// Which path the search took: gather 1 (only the admitted
				// rows read), scan 0.
				var tr diag.Trace
				if _, err := ix.Search(diag.WithTrace(ctx, &tr), q, 10, umbra.Where(f.f)); err != nil {
					b.Fatal(err)
				}
				g := 0.0
				if tr.Subset == "gather" {
					g = 1
				}
				b.ReportMetric(g, "gather")
			})
		}
		ix.Close()
	}
}
