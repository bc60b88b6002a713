package peers

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

func randomRows(r *rand.Rand, n, dim int) []float32 {
	out := make([]float32, n*dim)
	for i := range out {
		out[i] = 2*r.Float32() - 1
	}
	return out
}

// umbraTop is the engine's exact answer on the CPU path.
func umbraTop(t *testing.T, data []float32, dim int, m umbra.Metric, qs [][]float32, k int) [][]umbra.Hit {
	t.Helper()
	ix, err := engine.New(context.Background(), engine.Config{Dim: dim, Metric: m, Device: engine.CPU})
	require.NoError(t, err)
	defer ix.Close()
	_, err = ix.Add(context.Background(), umbra.Flat(data, ix.Dim()))
	require.NoError(t, err)
	all, err := ix.SearchBatch(context.Background(), qs, k)
	require.NoError(t, err)
	return all
}

// assertSameTop checks a peer's answer got for q against umbra's want over
// the rows of data: IDs rank by rank, a swap allowed only for a near-tie of
// the rows' float64 scores, and every score within tol of the float64 one
// (or testkit's tolerance, where larger). A peer's own summation (BLAS, an
// expanded L2) may round differently from umbra's, hence its tol.
func assertSameTop(t *testing.T, m umbra.Metric, data []float32, dim int, q []float32, want, got []umbra.Hit, tol float64) {
	t.Helper()
	kit := map[umbra.Metric]testkit.Metric{umbra.Cosine: testkit.Cosine, umbra.Dot: testkit.Dot, umbra.L2: testkit.L2}[m]
	hits := func(hs []umbra.Hit) []testkit.Hit {
		out := make([]testkit.Hit, len(hs))
		for i, h := range hs {
			out[i] = testkit.Hit{ID: h.ID, Score: h.Score}
		}
		return out
	}
	assert.NoError(t, testkit.SameRanking(hits(want), hits(got), func(id uint64) (testkit.Ref, error) {
		if id >= uint64(len(data)/dim) {
			return testkit.Ref{}, fmt.Errorf("ID %d past the %d rows", id, len(data)/dim)
		}
		ref := testkit.Score(kit, id, data[int(id)*dim:int(id+1)*dim], q)
		ref.Tol = math.Max(ref.Tol, tol)
		return ref, nil
	}))
}

func queries(r *rand.Rand, n, dim int) [][]float32 {
	qs := make([][]float32, n)
	for i := range qs {
		qs[i] = randomRows(r, 1, dim)
	}
	return qs
}

func TestChromemAgreesWithUmbra(t *testing.T) {
	r := testkit.Rand(t)
	const n, dim, k = 700, 24, 9
	data := randomRows(r, n, dim)
	orig := slices.Clone(data)
	qs := queries(r, 3, dim)
	col, err := NewChromem(context.Background(), data, dim)
	require.NoError(t, err)
	assert.Equal(t, orig, data, "chromem-go must not change the caller's rows")
	want := umbraTop(t, data, dim, umbra.Cosine, qs, k)
	got, err := col.SearchBatch(context.Background(), qs, k)
	require.NoError(t, err)
	for i := range qs {
		assertSameTop(t, umbra.Cosine, data, dim, qs[i], want[i], got[i], 1e-5)
	}
	_, err = col.Search(context.Background(), qs[0], n+1)
	assert.ErrorContains(t, err, "chromem-go")
	_, err = NewChromem(context.Background(), data[:dim+1], dim)
	assert.Error(t, err)
	assert.NotEmpty(t, ChromemVersion())
}

func TestFindFAISSMissing(t *testing.T) {
	_, err := FindFAISS(context.Background(), []string{filepath.Join(t.TempDir(), "no-python")})
	assert.ErrorContains(t, err, "not found")
}

// needFAISS skips a test where no Python imports faiss: FAISS is an
// optional peer and CI does not install it.
func needFAISS(t *testing.T) string {
	t.Helper()
	py, err := FindFAISS(context.Background(), nil)
	if err != nil {
		t.Skipf("FAISS is not importable (%v); install it with: %s", err, FAISSInstall)
	}
	return py
}

func TestDescribeBLAS(t *testing.T) {
	assert.Empty(t, DescribeBLAS(nil))
	assert.Equal(t, "BLAS /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",
		DescribeBLAS([]string{"/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"}))
	ref := DescribeBLAS([]string{"/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"})
	assert.Contains(t, ref, "reference BLAS")
	assert.Contains(t, ref, "libopenblas0-pthread", "names what to install")
}

func TestFAISSAgreesWithUmbra(t *testing.T) {
	py := needFAISS(t)
	r := testkit.Rand(t)
	const n, dim, k = 900, 20, 7
	data := randomRows(r, n, dim)
	qs := queries(r, 3, dim)
	batch := queries(r, 5, dim)
	for _, m := range []umbra.Metric{umbra.Cosine, umbra.Dot, umbra.L2} {
		t.Run(m.String(), func(t *testing.T) {
			res, err := RunFAISS(context.Background(), FAISSRun{Python: py, Metric: m, K: k, Repeat: 2, Runs: 3, Warmup: 1,
				BatchRepeat: 1, BatchRuns: 2}, data, dim, qs, batch)
			require.NoError(t, err)
			assert.NotEmpty(t, res.Version)
			assert.Greater(t, res.Threads, 0)
			if runtime.GOOS == "linux" {
				assert.NotEmpty(t, res.BLAS, "the BLAS FAISS loaded, from /proc/self/maps")
			}
			assert.Equal(t, map[bool]string{true: "IndexFlatL2", false: "IndexFlatIP"}[m == umbra.L2], res.Index)
			assert.Len(t, res.GroupsMS, 3)
			assert.Len(t, res.BatchGroupsMS, 2)
			for _, g := range append(slices.Clone(res.GroupsMS), res.BatchGroupsMS...) {
				assert.True(t, g > 0 && !math.IsInf(g, 0), "group time %v", g)
			}
			tol := 1e-5
			if m != umbra.Cosine {
				tol = 1e-4 // unnormalised scores up to ~dim
			}
			assertSameTop(t, m, data, dim, qs[0], umbraTop(t, data, dim, m, qs[:1], k)[0], res.Top, tol)
			want := umbraTop(t, data, dim, m, batch, k)
			require.Len(t, res.BatchTop, len(batch))
			for i := range batch {
				assertSameTop(t, m, data, dim, batch[i], want[i], res.BatchTop[i], tol)
			}
		})
	}
	res, err := RunFAISS(context.Background(), FAISSRun{Python: py, Metric: umbra.Cosine, K: k, Repeat: 1, Runs: 1},
		data, dim, qs, nil)
	require.NoError(t, err, "no batch")
	assert.Empty(t, res.BatchGroupsMS)
	_, err = RunFAISS(context.Background(), FAISSRun{Python: py, Metric: umbra.Cosine, K: n + 1, Repeat: 1, Runs: 1},
		data, dim, qs, nil)
	assert.ErrorContains(t, err, "out of range", "FAISS pads k > n with -1")
}
