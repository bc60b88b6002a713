package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

var metrics = []umbra.Metric{umbra.Cosine, umbra.Dot, umbra.L2}

// TestSearchMatchesReference checks every backend against a float64
// reference across dimensions (1 and 3 exercise the vec4 padding), a row
// count that is not a multiple of any workgroup size, and a chunk cap that
// splits the slab over several device buffers.
func TestSearchMatchesReference(t *testing.T) {
	r := testkit.Rand(t)
	dims := []int{1, 3, 127, 768, 1536}
	const n = 1037
	for _, dim := range dims {
		data := testkit.Vectors(r, n, dim)
		queries := testkit.Vectors(r, 3, dim)
		queries = append(queries, data[17]) // a stored vector is its own best match
		// Each query's reference ranking, computed once for every backend
		// and k (under -race it was most of the test's time).
		refs := map[umbra.Metric][][]ranked{}
		for _, m := range metrics {
			for _, q := range queries {
				refs[m] = append(refs[m], reference(m, data, q))
			}
		}
		for _, b := range backends {
			for _, m := range metrics {
				t.Run(fmt.Sprintf("%s/%s/dim%d", b.name, m, dim), func(t *testing.T) {
					ix := open(t, b, engine.Config{Dim: dim, Metric: m}, 400)
					ids, err := ix.Add(context.Background(), umbra.Vectors(data))
					require.NoError(t, err)
					require.Len(t, ids, n)
					assert.Equal(t, uint64(0), ids[0])
					assert.Equal(t, uint64(n-1), ids[n-1])
					if b.device == engine.GPU {
						assert.Equal(t, 3, ix.Info().Chunks, "1037 rows at 400 per chunk")
					}
					for qi, q := range queries {
						for _, k := range []int{1, 10, 100} {
							hits, err := ix.Search(context.Background(), q, k)
							require.NoError(t, err, "query %d k %d", qi, k)
							require.NoError(t, rankedError(m, data, q, refs[m][qi], k, hits))
						}
					}
					// A stored vector as the query: its own score bounds
					// the best one, and each metric says more about it.
					self := data[17]
					hits, err := ix.Search(context.Background(), self, 1)
					require.NoError(t, err)
					require.NoError(t, rankedError(m, data, self, refs[m][len(queries)-1], 1, hits))
					own := refScore(m, self, self)
					switch m {
					case umbra.Cosine:
						// In one dimension every vector of the same sign
						// ties at 1, so check the score, not the ID.
						assert.InDelta(t, 1, hits[0].Score, 1e-6, "a stored vector has cosine 1 with itself")
					case umbra.Dot:
						// Another row may have a larger dot product (a
						// longer one in the same direction); none is
						// smaller than the vector's own squared norm.
						assert.GreaterOrEqual(t, float64(hits[0].Score), own-tolerance(m, own), "best dot below |v|²")
						if hits[0].ID != 17 {
							assert.Greater(t, refScore(m, data[hits[0].ID], self), own, "ID %d beats ID 17 only with a larger dot", hits[0].ID)
						}
					case umbra.L2:
						assert.Equal(t, uint64(17), hits[0].ID)
						assert.InDelta(t, 0, hits[0].Score, 1e-6)
					}
				})
			}
		}
	}
}

// TestBackendsAgree checks that the GPU backends and the fallback return the
// same IDs and scores for the same data, at several k including k > Len.
func TestBackendsAgree(t *testing.T) {
	r := testkit.Rand(t)
	const dim, n = 96, 2500
	data := testkit.Vectors(r, n, dim)
	queries := testkit.Vectors(r, 8, dim)
	for _, m := range metrics {
		var results [][][]umbra.Hit
		var names []string
		for _, b := range backends {
			ok := t.Run(fmt.Sprintf("%s/%s", b.name, m), func(t *testing.T) {
				ix := open(t, b, engine.Config{Dim: dim, Metric: m}, 1000)
				_, err := ix.Add(context.Background(), umbra.Vectors(data))
				require.NoError(t, err)
				var res [][]umbra.Hit
				for _, k := range []int{1, 7, 64, n + 5} {
					all, err := ix.SearchBatch(context.Background(), queries, k)
					require.NoError(t, err)
					res = append(res, all...)
				}
				results = append(results, res)
				names = append(names, b.name)
			})
			if !ok {
				return
			}
		}
		for i := 1; i < len(results); i++ {
			for qi := range results[0] {
				requireSameHits(t, m, rowsOf(data), queries[qi%len(queries)], results[0][qi], results[i][qi], fmt.Sprintf("%s vs %s, %s, list %d", names[0], names[i], m, qi))
			}
		}
	}
}

// TestIncrementalAdd adds in uneven batches that end inside, exactly on and
// across chunk boundaries, checking after each batch that everything stored
// so far is searchable and nothing earlier moved.
func TestIncrementalAdd(t *testing.T) {
	r := testkit.Rand(t)
	const dim = 20
	sizes := []int{1, 49, 50, 1, 99, 300, 7}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: dim, Metric: umbra.Dot}, 100)
			var data [][]float32
			for _, s := range sizes {
				batch := testkit.Vectors(r, s, dim)
				ids, err := ix.Add(context.Background(), umbra.Vectors(batch))
				require.NoError(t, err)
				require.Equal(t, uint64(len(data)), ids[0])
				data = append(data, batch...)
				require.Equal(t, len(data), ix.Len())
				q := testkit.Vectors(r, 1, dim)[0]
				hits, err := ix.Search(context.Background(), q, len(data))
				require.NoError(t, err)
				checkHits(t, umbra.Dot, data, q, len(data), hits)
			}
		})
	}
}

func TestEmptyIndexAndLargeK(t *testing.T) {
	r := testkit.Rand(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: 5})
			hits, err := ix.Search(context.Background(), []float32{1, 2, 3, 4, 5}, 3)
			require.NoError(t, err)
			assert.Empty(t, hits)
			ids, err := ix.Add(context.Background(), umbra.Vectors(nil))
			require.NoError(t, err)
			assert.Empty(t, ids)
			_, err = ix.Add(context.Background(), nil)
			require.ErrorIs(t, err, umbra.ErrSource, "a nil RowSource is a mistake, not an empty write")
			data := testkit.Vectors(r, 4, 5)
			_, err = ix.Add(context.Background(), umbra.Vectors(data))
			require.NoError(t, err)
			hits, err = ix.Search(context.Background(), data[2], 1000)
			require.NoError(t, err)
			checkHits(t, umbra.Cosine, data, data[2], 1000, hits)
			assert.Len(t, hits, 4, "k > Len returns every vector")
		})
	}
}

// TestTiesBreakByLowerID stores identical vectors, whose scores are equal
// on every backend, and expects them in ID order.
func TestTiesBreakByLowerID(t *testing.T) {
	r := testkit.Rand(t)
	v := testkit.Vectors(r, 1, 33)[0]
	other := testkit.Vectors(r, 1, 33)[0]
	data := [][]float32{other, v, v, other, v, v}
	for _, b := range backends {
		for _, m := range metrics {
			t.Run(fmt.Sprintf("%s/%s", b.name, m), func(t *testing.T) {
				ix := open(t, b, engine.Config{Dim: 33, Metric: m})
				_, err := ix.Add(context.Background(), umbra.Vectors(data))
				require.NoError(t, err)
				hits, err := ix.Search(context.Background(), v, 4)
				require.NoError(t, err)
				ids := []uint64{hits[0].ID, hits[1].ID, hits[2].ID, hits[3].ID}
				assert.Equal(t, []uint64{1, 2, 4, 5}, ids)
			})
		}
	}
}

// TestConcurrentSearchAndAdd runs searches on several goroutines while
// another goroutine adds; run with -race. Every result must be the exact
// top-k (by the float64 reference) of one of the prefixes of the data that
// were stored at some moment: a search sees whole Add calls or none.
func TestConcurrentSearchAndAdd(t *testing.T) {
	r := testkit.Rand(t)
	const dim, first, step, k = 16, 100, 50, 5
	data := testkit.Vectors(r, 600, dim)
	queries := testkit.Vectors(r, 4, dim)
	// matchesAPrefix returns the sizes of the stored prefixes whose exact
	// top-k hits is.
	matchesAPrefix := func(q []float32, hits []umbra.Hit) []int {
		var sizes []int
		for n := first; n <= len(data); n += step {
			if topKError(umbra.L2, data[:n], q, k, hits) == nil {
				sizes = append(sizes, n)
			}
		}
		return sizes
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ix := open(t, b, engine.Config{Dim: dim, Metric: umbra.L2}, 128)
			_, err := ix.Add(context.Background(), umbra.Vectors(data[:first]))
			require.NoError(t, err)
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for i := 0; i < 15; i++ {
						hits, err := ix.Search(context.Background(), queries[g], k)
						if err != nil {
							errs <- err
							return
						}
						if len(matchesAPrefix(queries[g], hits)) == 0 {
							errs <- fmt.Errorf("goroutine %d search %d: %v is the top %d of no stored prefix", g, i, hits, k)
							return
						}
					}
				}(g)
			}
			for lo := first; lo < len(data); lo += step {
				_, err := ix.Add(context.Background(), umbra.Vectors(data[lo:lo+step]))
				require.NoError(t, err)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			require.Equal(t, len(data), ix.Len())
			for _, q := range queries {
				hits, err := ix.Search(context.Background(), q, k)
				require.NoError(t, err)
				checkHits(t, umbra.L2, data, q, k, hits)
			}
		})
	}
}

// TestIndexesShareADevice searches two indexes of different dimensions and
// metrics on the same adapter from several goroutines at once (run with
// -race): the device's calls are serialised, and neither index sees the
// other's queries or scores.
func TestIndexesShareADevice(t *testing.T) {
	r := testkit.Rand(t)
	a := testkit.Vectors(r, 700, 40)
	b := testkit.Vectors(r, 300, 130)
	for _, be := range backends[1:] {
		t.Run(be.name, func(t *testing.T) {
			ixA := open(t, be, engine.Config{Dim: 40, Metric: umbra.Dot}, 256)
			ixB := open(t, be, engine.Config{Dim: 130, Metric: umbra.L2})
			_, err := ixA.Add(context.Background(), umbra.Vectors(a))
			require.NoError(t, err)
			_, err = ixB.Add(context.Background(), umbra.Vectors(b))
			require.NoError(t, err)
			qa, qb := testkit.Vectors(r, 1, 40)[0], testkit.Vectors(r, 1, 130)[0]
			wantA, err := ixA.Search(context.Background(), qa, 9)
			require.NoError(t, err)
			wantB, err := ixB.Search(context.Background(), qb, 9)
			require.NoError(t, err)
			checkHits(t, umbra.Dot, a, qa, 9, wantA)
			checkHits(t, umbra.L2, b, qb, 9, wantB)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					ix, q, want := ixA, qa, wantA
					if g%2 == 1 {
						ix, q, want = ixB, qb, wantB
					}
					for i := 0; i < 10; i++ {
						got, err := ix.Search(context.Background(), q, 9)
						if err != nil {
							errs <- err
							return
						}
						if fmt.Sprint(got) != fmt.Sprint(want) {
							errs <- fmt.Errorf("goroutine %d: %v, want %v", g, got, want)
							return
						}
					}
				}(g)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
