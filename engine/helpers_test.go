package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// refScore is the float64 reference for one pair under m.
func refScore(m umbra.Metric, v, q []float32) float64 { return refOf(m, 0, v, q).Score }

// refOf is the reference of row id, holding v, for q under m.
func refOf(m umbra.Metric, id uint64, v, q []float32) testkit.Ref {
	return testkit.Score(engine.KitMetric(m), id, v, q)
}

// tolerance is the allowed difference between a float32 score and its
// float64 reference where the terms are not at hand (testkit.Tolerance): a
// threshold kept clear of the rows on either side of it.
func tolerance(_ umbra.Metric, ref float64) float64 { return testkit.Tolerance(ref, 0) }

type ranked struct {
	id    uint64
	score float64
}

// reference returns every row ranked by the float64 reference, best first,
// ties by lower ID.
func reference(m umbra.Metric, data [][]float32, q []float32) []ranked {
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

// rowsOf looks rows up by ID where the IDs are the rows' positions in data,
// as an index's Get does.
func rowsOf(data [][]float32) func(id uint64) ([]float32, error) {
	return func(id uint64) ([]float32, error) {
		if id >= uint64(len(data)) {
			return nil, fmt.Errorf("ID %d past the %d rows", id, len(data))
		}
		return data[id], nil
	}
}

// kitHits are hits as testkit compares them.
func kitHits(hs []umbra.Hit) []testkit.Hit {
	out := make([]testkit.Hit, len(hs))
	for i, h := range hs {
		out[i] = testkit.Hit{ID: h.ID, Score: h.Score}
	}
	return out
}

// sameHitsError says how got fails to agree with want, both best-first
// answers for q over the rows rows returns by ID (an index's Get, or
// rowsOf), or returns nil: got in order (orderError), and
// testkit.SameRanking, which checks every rank's ID and every reported
// score against the float64 references of the rows themselves. It returns instead of failing so that goroutines can
// use it.
func sameHitsError(m umbra.Metric, rows func(uint64) ([]float32, error), q []float32, want, got []umbra.Hit) error {
	if err := orderError(m, got); err != nil {
		return err
	}
	return testkit.SameRanking(kitHits(want), kitHits(got), func(id uint64) (testkit.Ref, error) {
		v, err := rows(id)
		if err != nil {
			return testkit.Ref{}, err
		}
		return refOf(m, id, v, q), nil
	})
}

// requireSameHits requires two best-first answers for q to agree (see
// sameHitsError).
func requireSameHits(t *testing.T, m umbra.Metric, rows func(uint64) ([]float32, error), q []float32, want, got []umbra.Hit, what string) {
	t.Helper()
	require.NoError(t, sameHitsError(m, rows, q, want, got), what)
}

// requireEqualSlices is require.Equal of two slices, compared with
// slices.Equal first and handed to require.Equal only to report a
// difference: reflect.DeepEqual over thousands of hits or values was most
// of the store tests' time under -race. (A nil and an empty slice count
// as equal.)
func requireEqualSlices[E comparable](t *testing.T, want, got []E, msgAndArgs ...any) {
	t.Helper()
	if !slices.Equal(want, got) {
		require.Equal(t, want, got, msgAndArgs...)
	}
}

// checkHits asserts hits is a correct exact top-k of data for q (see
// topKError).
func checkHits(t *testing.T, m umbra.Metric, data [][]float32, q []float32, k int, hits []umbra.Hit) {
	t.Helper()
	require.NoError(t, topKError(m, data, q, k, hits))
}

// topKError says how hits fails to be a correct exact top-k of data for q,
// or returns nil: the float64 reference's top k up to near-ties, in order,
// every reported score within tolerance (sameHitsError). It returns instead
// of failing so that goroutines can use it.
func topKError(m umbra.Metric, data [][]float32, q []float32, k int, hits []umbra.Hit) error {
	return rankedError(m, data, q, reference(m, data, q), k, hits)
}

// rankedError is topKError against ref, reference(m, data, q) computed
// once for every search of the same rows and query.
func rankedError(m umbra.Metric, data [][]float32, q []float32, ref []ranked, k int, hits []umbra.Hit) error {
	want := make([]umbra.Hit, min(k, len(data)))
	for i := range want {
		want[i] = umbra.Hit{ID: ref[i].id, Score: float32(ref[i].score)}
	}
	return sameHitsError(m, rowsOf(data), q, want, hits)
}

// orderError says where hits break the order every answer keeps: best
// first by the scores reported, equal scores by lower ID.
func orderError(m umbra.Metric, hits []umbra.Hit) error {
	better := func(a, b float32) bool { return a > b == m.HigherIsBetter() && a != b }
	for i := 1; i < len(hits); i++ {
		p, h := hits[i-1], hits[i]
		if !(better(p.Score, h.Score) || p.Score == h.Score && p.ID < h.ID) {
			return fmt.Errorf("hits %d and %d out of order: %v then %v", i-1, i, p, h)
		}
	}
	return nil
}

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
	cfg.Device, cfg.Adapters = b.device, []engine.AdapterSelect{b.adapter}
	var rows int
	if len(chunkRows) > 0 {
		rows = chunkRows[0]
	}
	ix, err := engine.NewWithChunkRows(context.Background(), cfg, rows)
	if err != nil && b.device == engine.GPU {
		testkit.NoGPU(t, "no %s adapter works: %v", b.name, err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { ix.Close() })
	if b.device == engine.GPU {
		info := ix.Info()
		require.Equal(t, engine.GPU, info.Device)
		require.Equal(t, b.adapter.Backend, info.Adapter.API)
	}
	return ix
}

// requireSameAnswers requires ix to answer as ref does: batches for each k
// in ks, a search for 5 within allow, and a range search whose threshold
// falls between two ranks from rangeAt on (where the scores part by at
// least 1e-3, so rounding cannot move a row across it).
func requireSameAnswers(t *testing.T, m umbra.Metric, ref, ix *engine.Index, qs [][]float32, ks []int, allow []uint64, rangeAt int, what string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range ks {
		want, err := ref.SearchBatch(ctx, qs, k)
		require.NoError(t, err)
		got, err := ix.SearchBatch(ctx, qs, k)
		require.NoError(t, err)
		for i := range qs {
			requireSameHits(t, m, ref.Vector, qs[i], want[i], got[i], fmt.Sprintf("%s: k=%d query %d", what, k, i))
		}
	}
	for i, q := range qs {
		want, err := ref.Search(ctx, q, 5, umbra.Allow(allow...))
		require.NoError(t, err)
		got, err := ix.Search(ctx, q, 5, umbra.Allow(allow...))
		require.NoError(t, err)
		requireSameHits(t, m, ref.Vector, q, want, got, fmt.Sprintf("%s: filtered query %d", what, i))
		ranked, err := ref.Search(ctx, q, ref.Len())
		require.NoError(t, err)
		j := rangeAt
		for ranked[j+1].Score-ranked[j].Score < 1e-3 {
			j++
		}
		th := (ranked[j].Score + ranked[j+1].Score) / 2
		gotR, err := ix.SearchRange(ctx, q, th)
		require.NoError(t, err)
		requireSameHits(t, m, ref.Vector, q, ranked[:j+1], gotR, fmt.Sprintf("%s: range query %d", what, i))
	}
}
