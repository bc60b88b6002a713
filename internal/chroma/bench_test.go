package chroma

import (
	"encoding/json"
	"fmt"
	"testing"

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
		ids := make([]string, batch)
		for i := range ids {
			ids[i] = fmt.Sprintf("r%d-%d", n, i)
		}
		var m map[string]any
		json.Unmarshal(bodies[n%len(bodies)], &m)
		m["ids"] = ids
		ts.ok(201, "POST", col+"/add", m)
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
}
