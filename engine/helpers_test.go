package engine_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
)

// refScore is the float64 reference for one pair under m.
func refScore(m engine.Metric, v, q []float32) float64 {
	var dot, vv, qq, l2 float64
	for i := range v {
		a, b := float64(v[i]), float64(q[i])
		dot += a * b
		vv += a * a
		qq += b * b
		l2 += (a - b) * (a - b)
	}
	switch m {
	case engine.Cosine:
		return dot / math.Sqrt(vv*qq)
	case engine.Dot:
		return dot
	}
	return l2
}

// tolerance is the allowed difference between a float32 score and its
// float64 reference: 1e-5 absolute for cosine (scores lie in [-1, 1]), and
// 1e-5 relative to the score's magnitude (at least 1e-5) for dot and L2,
// whose float32 sums carry error proportional to their size.
func tolerance(m engine.Metric, ref float64) float64 {
	if m == engine.Cosine {
		return 1e-5
	}
	return 1e-5 * math.Max(1, math.Abs(ref))
}

type ranked struct {
	id    uint64
	score float64
}

// reference returns every row ranked by the float64 reference, best first,
// ties by lower ID.
func reference(m engine.Metric, data [][]float32, q []float32) []ranked {
	out := make([]ranked, len(data))
	for i, v := range data {
		out[i] = ranked{uint64(i), refScore(m, v, q)}
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].score != out[b].score {
			if m.HigherIsBetter() {
				return out[a].score > out[b].score
			}
			return out[a].score < out[b].score
		}
		return out[a].id < out[b].id
	})
	return out
}

// checkHits asserts hits is a correct exact top-k of data for q (see
// topKError).
func checkHits(t *testing.T, m engine.Metric, data [][]float32, q []float32, k int, hits []engine.Hit) {
	t.Helper()
	require.NoError(t, topKError(m, data, q, k, hits))
}

// topKError says how hits fails to be a correct exact top-k of data for q,
// or returns nil: the right length, distinct IDs, each score within
// tolerance of its reference, best first, and every hit at least as good as
// the true k-th best up to the tolerance (so only near-ties may differ from
// the reference order). It returns instead of failing so that goroutines
// can use it.
func topKError(m engine.Metric, data [][]float32, q []float32, k int, hits []engine.Hit) error {
	ref := reference(m, data, q)
	want := min(k, len(data))
	if len(hits) != want {
		return fmt.Errorf("%d hits, want %d", len(hits), want)
	}
	if want == 0 {
		return nil
	}
	better := func(a, b float64) bool { return a > b == m.HigherIsBetter() && a != b }
	kth := ref[want-1].score
	seen := map[uint64]bool{}
	for i, h := range hits {
		if h.ID >= uint64(len(data)) {
			return fmt.Errorf("hit %d has ID %d, past the %d rows", i, h.ID, len(data))
		}
		if seen[h.ID] {
			return fmt.Errorf("hit %d repeats ID %d", i, h.ID)
		}
		seen[h.ID] = true
		exact := refScore(m, data[h.ID], q)
		tol := tolerance(m, exact)
		if math.Abs(exact-float64(h.Score)) > tol {
			return fmt.Errorf("hit %d (ID %d) scores %g, float64 %g", i, h.ID, h.Score, exact)
		}
		if math.Abs(exact-kth) > 2*tol && better(kth, exact) {
			return fmt.Errorf("hit %d (ID %d, %g) is not in the true top %d (k-th %g)", i, h.ID, exact, k, kth)
		}
		if i > 0 {
			p := hits[i-1]
			if !(better(float64(p.Score), float64(h.Score)) || p.Score == h.Score && p.ID < h.ID) {
				return fmt.Errorf("hits %d and %d out of order: %v then %v", i-1, i, p, h)
			}
		}
	}
	// Away from near-ties the IDs must be exactly the reference's.
	for i := 0; i < want; i++ {
		tol := tolerance(m, ref[i].score)
		clearAbove := i == 0 || math.Abs(ref[i-1].score-ref[i].score) > 2*tol
		clearBelow := i+1 >= len(ref) || math.Abs(ref[i+1].score-ref[i].score) > 2*tol
		if clearAbove && clearBelow && ref[i].id != hits[i].ID {
			return fmt.Errorf("rank %d is ID %d, float64 reference says %d", i, hits[i].ID, ref[i].id)
		}
	}
	return nil
}

// fullTests reports whether UMBRA_FULL=1 (set by CI) asks for the long
// sweeps and matrices; without it a test runs a representative part, so
// the README's test command stays within a few minutes on two cores.
func fullTests() bool { return os.Getenv("UMBRA_FULL") == "1" }

// requireGPU reports whether UMBRA_REQUIRE_GPU=1 turns a missing adapter
// into a failure rather than a skip.
func requireGPU() bool { return os.Getenv("UMBRA_REQUIRE_GPU") == "1" }

// backend is one way to run an index in the cross-backend tests.
type backend struct {
	name    string
	device  engine.Device
	adapter engine.AdapterSelect
}

var backends = []backend{
	{"cpu", engine.CPU, engine.AdapterSelect{}},
	{"vulkan", engine.GPU, engine.AdapterSelect{Backend: "vulkan"}},
	{"gl", engine.GPU, engine.AdapterSelect{Backend: "gl"}},
}

// open creates an index on b, skipping (or, with UMBRA_REQUIRE_GPU=1,
// failing) when b is a GPU backend with no working adapter.
// A chunkRows argument caps the rows in one device buffer, to cross chunk
// boundaries with small data.
func open(t *testing.T, b backend, cfg engine.Config, chunkRows ...int) *engine.Index {
	t.Helper()
	cfg.Device, cfg.Adapter = b.device, b.adapter
	var rows int
	if len(chunkRows) > 0 {
		rows = chunkRows[0]
	}
	ix, err := engine.NewWithChunkRows(context.Background(), cfg, rows)
	if err != nil && b.device == engine.GPU {
		if requireGPU() {
			t.Fatalf("UMBRA_REQUIRE_GPU=1 but no %s adapter works: %v", b.name, err)
		}
		t.Skipf("no %s adapter: %v", b.name, err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { ix.Close() })
	if b.device == engine.GPU {
		info := ix.Info()
		require.Equal(t, engine.BackendGPU, info.Backend)
		require.Equal(t, b.adapter.Backend, info.Adapter.API)
	}
	return ix
}

// requireSameAnswers requires ix to answer as ref does: batches for each k
// in ks, a search for 5 within allow, and a range search whose threshold
// falls between two ranks from rangeAt on (where the scores part by at
// least 1e-3, so rounding cannot move a row across it).
func requireSameAnswers(t *testing.T, m engine.Metric, ref, ix *engine.Index, qs [][]float32, ks []int, allow []uint64, rangeAt int, what string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range ks {
		want, err := ref.SearchBatch(ctx, qs, k)
		require.NoError(t, err)
		got, err := ix.SearchBatch(ctx, qs, k)
		require.NoError(t, err)
		for i := range qs {
			requireSameHits(t, m, want[i], got[i], fmt.Sprintf("%s: k=%d query %d", what, k, i))
		}
	}
	for i, q := range qs {
		want, err := ref.Search(ctx, q, 5, engine.Allow(allow...))
		require.NoError(t, err)
		got, err := ix.Search(ctx, q, 5, engine.Allow(allow...))
		require.NoError(t, err)
		requireSameHits(t, m, want, got, fmt.Sprintf("%s: filtered query %d", what, i))
		ranked, err := ref.Search(ctx, q, ref.Len())
		require.NoError(t, err)
		j := rangeAt
		for ranked[j+1].Score-ranked[j].Score < 1e-3 {
			j++
		}
		th := (ranked[j].Score + ranked[j+1].Score) / 2
		gotR, err := ix.SearchRange(ctx, q, th)
		require.NoError(t, err)
		requireSameHits(t, m, ranked[:j+1], gotR, fmt.Sprintf("%s: range query %d", what, i))
	}
}
