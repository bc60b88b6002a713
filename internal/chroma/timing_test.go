package chroma

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/umbravec/umbra/internal/testkit"
)

// With ServerTiming a query's and a write's answers carry a Server-Timing
// header naming every stage of the request and the engine's, with
// durations that add up to the total; without it, none.
func TestServerTimingHeader(t *testing.T) {
	rng := testkit.Rand(t)
	for _, on := range []bool{false, true} {
		ts := newTestServer(t, t.TempDir(), func(c *Config) { c.ServerTiming = on })
		col := base + "/collections/" + ts.create(`{"name":"timed","configuration":{"hnsw":{"space":"cosine"}}}`)
		const n, dim = 300, 16
		ids, embs := make([]string, n), make([][]float32, n)
		for i := range ids {
			ids[i], embs[i] = "r"+strconv.Itoa(i), testkit.Vector(rng, dim)
		}
		addBody, err := json.Marshal(map[string]any{"ids": ids, "embeddings": embs})
		require.NoError(t, err)
		res, err := http.Post(ts.hs.URL+col+"/add", "application/json", bytes.NewReader(addBody))
		require.NoError(t, err)
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, 201, res.StatusCode, "%s", out)
		if on {
			// A write names its own stages, then the engine's write stages.
			order, durs := timingStages(t, res.Header.Get("Server-Timing"))
			require.Equal(t, []string{"read", "decode", "rows", "write", "encode", "total",
				"engine-pack", "engine-assign", "engine-compress", "engine-upload", "engine-log", "engine-publish"}, order)
			var sum float64
			for _, s := range order[:5] {
				sum += durs[s]
			}
			require.InDelta(t, durs["total"], sum, 0.01)
			require.Positive(t, durs["engine-pack"]+durs["engine-log"], "the engine's write was traced")
		} else {
			require.Empty(t, res.Header.Get("Server-Timing"))
		}
		body, err := json.Marshal(map[string]any{"query_embeddings": [][]float32{testkit.Vector(rng, dim)}, "n_results": 5, "include": []string{"distances", "metadatas"}})
		require.NoError(t, err)
		res, err = http.Post(ts.hs.URL+col+"/query", "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		out, _ = io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, 200, res.StatusCode, "%s", out)
		h := res.Header.Get("Server-Timing")
		if !on {
			require.Empty(t, h)
			continue
		}
		order, durs := timingStages(t, h)
		require.Equal(t, []string{"read", "decode", "lookup", "filter", "search", "fetch", "assemble", "encode", "total",
			"engine-filter", "engine-kernel", "engine-select"}, order, "%s", h)
		var sum float64
		for _, s := range order[:8] {
			sum += durs[s]
		}
		require.InDelta(t, durs["total"], sum, 0.01, "%s", h)
		require.Contains(t, h, `engine-kernel;desc="cpu (cpu clock) 0 rows rescored"`, "the engine's kernel names its device")
	}
}

// timingStages parses a Server-Timing header: its stage names in order
// and each one's duration (ms), every duration a number >= 0.
func timingStages(t *testing.T, h string) ([]string, map[string]float64) {
	t.Helper()
	durs := map[string]float64{}
	var order []string
	for _, part := range strings.Split(h, ",") {
		fields := strings.Split(strings.TrimSpace(part), ";")
		for _, f := range fields[1:] {
			if v, ok := strings.CutPrefix(f, "dur="); ok {
				d, err := strconv.ParseFloat(v, 64)
				require.NoError(t, err, "%s", h)
				require.GreaterOrEqual(t, d, 0.0, "%s", h)
				durs[fields[0]] = d
				order = append(order, fields[0])
			}
		}
	}
	return order, durs
}
