package chroma

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestPrecisionAnswersExact: collections made under int8 and f16 answer
// every query with the float32 server's ids and distances, bit for bit,
// on clustered rows (near-ties the compressed scan must rescore); and a
// store keeps its own precision when the server is started again with
// another.
func TestPrecisionAnswersExact(t *testing.T) {
	rng := testkit.Rand(t)
	const n, dim, k = 2000, 48, 10
	centres := testkit.Vectors(rng, 8, dim)
	vecs := make([][]float32, n)
	ids := make([]string, n)
	embs := make([]string, n)
	for i := range vecs {
		v := testkit.Vector(rng, dim)
		for d := range v {
			v[d] = centres[i%len(centres)][d] + 0.05*v[d]
		}
		vecs[i], ids[i], embs[i] = v, fmt.Sprintf("r%d", i), b64(v)
	}
	var queries []map[string]any
	for j := range 12 {
		q := slices.Clone(vecs[rng.IntN(n)])
		q[j%dim] += 0.01
		queries = append(queries, map[string]any{"query_embeddings": [][]float32{q}, "n_results": k, "include": []string{"distances"}})
	}
	answers := func(prec umbra.Precision, dir string, reopen umbra.Precision) map[string][]string {
		mk := func(p umbra.Precision) *testServer {
			return newTestServer(t, dir, func(c *Config) { c.Backend.(*Stores).Config.Precision = p })
		}
		ts := mk(prec)
		out := map[string][]string{}
		for _, space := range []string{"cosine", "l2", "ip"} {
			col := base + "/collections/" + ts.create(fmt.Sprintf(`{"name":"p-%s","configuration":{"hnsw":{"space":%q}}}`, space, space))
			for at := 0; at < n; at += 500 {
				ts.ok(201, "POST", col+"/add", map[string]any{"ids": ids[at : at+500], "embeddings": embs[at : at+500]})
			}
			out[space+"-id"] = []string{col}
		}
		if reopen != prec {
			ts.close()
			ts = mk(reopen)
		}
		for _, space := range []string{"cosine", "l2", "ip"} {
			col := out[space+"-id"][0]
			for _, q := range queries {
				out[space] = append(out[space], ts.ok(200, "POST", col+"/query", q))
			}
		}
		return out
	}
	want := answers(umbra.F32, t.TempDir(), umbra.F32)
	for _, p := range []umbra.Precision{umbra.Int8, umbra.F16} {
		got := answers(p, t.TempDir(), p)
		for _, space := range []string{"cosine", "l2", "ip"} {
			require.Equal(t, want[space], got[space], "%s %s", p, space)
		}
	}
	// Made under float32, served again by a server whose new collections
	// are int8 (serve's default): the store keeps its own and opens.
	got := answers(umbra.F32, t.TempDir(), umbra.Int8)
	for _, space := range []string{"cosine", "l2", "ip"} {
		require.Equal(t, want[space], got[space], "reopened %s", space)
	}
}
