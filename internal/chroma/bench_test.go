package chroma

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/testkit"
)

// BenchmarkAdd adds batches of 1,000 768-dimensional embeddings (base64,
// with metadata, as the JS client sends them) through the HTTP handler.
func BenchmarkAdd(b *testing.B) {
	rng := testkit.Rand(b)
	ts := newTestServer(b, b.TempDir(), nil)
	col := base + "/collections/" + ts.create(`{"name":"bench","configuration":{"hnsw":{"space":"cosine"}}}`)
	const batch, dim = 1000, 768
	bodies := make([][]byte, 8)
	for j := range bodies {
		embs := make([]string, batch)
		metas := make([]map[string]any, batch)
		for i := range batch {
			embs[i] = b64(testkit.Vector(rng, dim))
			metas[i] = map[string]any{"bucket": i % 100}
		}
		bodies[j], _ = json.Marshal(map[string]any{"embeddings": embs, "metadatas": metas})
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		// Each body is built off the clock, as bench.mjs builds its own:
		// what is timed is the request, not the test's JSON.
		b.StopTimer()
		ids := make([]string, batch)
		for i := range ids {
			ids[i] = fmt.Sprintf("r%d-%d", n, i)
		}
		var m map[string]any
		json.Unmarshal(bodies[n%len(bodies)], &m)
		m["ids"] = ids
		body, _ := json.Marshal(m)
		b.StartTimer()
		ts.ok(201, "POST", col+"/add", string(body))
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkQuery sends single queries (k = 10, JSON numbers, as the JS
// client sends them) through the HTTP handler to a collection of 50,000
// 768-dimensional rows on clustered data, at each precision the server
// scans (serve --http's default, int8, and float32).
func BenchmarkQuery(b *testing.B) {
	for _, prec := range []umbra.Precision{umbra.Int8, umbra.F32} {
		b.Run(prec.String(), func(b *testing.B) {
			rng := testkit.Rand(b)
			ts := newTestServer(b, b.TempDir(), func(c *Config) { c.Backend.(*Stores).Config.Precision = prec })
			col := base + "/collections/" + ts.create(`{"name":"bench","configuration":{"hnsw":{"space":"cosine"}}}`)
			const n, batch, dim = 50000, 5000, 768
			centres := testkit.Vectors(rng, 200, dim)
			row := func() []float32 {
				c := centres[rng.IntN(len(centres))]
				v := make([]float32, dim)
				for j := range v {
					v[j] = c[j] + 0.25*float32(rng.NormFloat64())
				}
				return v
			}
			for s := 0; s < n; s += batch {
				ids := make([]string, batch)
				embs := make([]string, batch)
				for i := range ids {
					ids[i], embs[i] = fmt.Sprintf("r%d", s+i), b64(row())
				}
				ts.ok(201, "POST", col+"/add", map[string]any{"ids": ids, "embeddings": embs})
			}
			queries := make([]string, 64)
			for i := range queries {
				q, _ := json.Marshal(map[string]any{"query_embeddings": [][]float32{row()}, "n_results": 10, "include": []string{"distances"}})
				queries[i] = string(q)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ts.ok(200, "POST", col+"/query", queries[i%len(queries)])
			}
		})
	}
}
