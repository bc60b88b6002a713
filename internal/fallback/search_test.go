package fallback

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/internal/topk"
)

var dims = []int{1, 3, 127, 768, 1536}

// testRows keeps the big dimensions affordable while still covering odd
// row counts and several blocks per worker.
func testRows(dim int) []int {
	if dim >= 768 {
		return []int{1, 5, 37, 413}
	}
	return []int{1, 2, 5, 37, 1001, 2999}
}

func strides(dim int) []int {
	s := (dim + 3) &^ 3
	return []int{s, s + 4}
}

type dataset struct {
	rows [][]float32
	q    []float32
	dim  int
}

type valueKind int

const (
	raw  valueKind = iota // uniform in [-1, 1)
	unit                  // raw rows and query scaled to length 1
	grid                  // exact in float32 whatever the order of sums
)

func (v valueKind) String() string { return [...]string{"raw", "unit", "grid"}[v] }

// newDataset makes n random rows and duplicates a few of them, so ties
// must be broken by row.
func newDataset(r *rand.Rand, n, dim int, kind valueKind) dataset {
	gen := [...]func(*rand.Rand, int) []float32{testkit.Vector, testkit.Unit, testkit.Grid}[kind]
	d := dataset{rows: make([][]float32, n), q: gen(r, dim), dim: dim}
	for i := range d.rows {
		if i > 0 && r.IntN(8) == 0 {
			d.rows[i] = d.rows[r.IntN(i)]
			continue
		}
		d.rows[i] = gen(r, dim)
	}
	return d
}

func TestScoresMatchFloat64(t *testing.T) { forEachKernel(t, testScoresMatchFloat64) }

func testScoresMatchFloat64(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	for _, dim := range dims {
		for _, n := range testRows(dim) {
			for _, stride := range strides(dim) {
				for _, m := range []Metric{Dot, L2} {
					for _, kind := range []valueKind{raw, unit} {
						short := r.IntN(2) == 0
						name := fmt.Sprintf("%v/dim%d/rows%d/stride%d/%v/short=%v", m, dim, n, stride, kind, short)
						t.Run(name, func(t *testing.T) {
							d := newDataset(r, n, dim, kind)
							s := newSlab(d.rows, dim, stride, short)
							dst := make([]float32, n)
							for _, w := range []int{1, 3} {
								noErr(t, scoreRows(ctx, dst, s, d.q, m, w))
								for i, row := range d.rows {
									want, mag := ref64(m, row, d.q)
									if math.Abs(float64(dst[i])-want) > testkit.Tolerance(want, mag) {
										t.Fatalf("workers %d row %d: got %g, float64 %g", w, i, dst[i], want)
									}
								}
							}
						})
					}
				}
			}
		}
	}
}

func TestSearchMatchesReference(t *testing.T) { forEachKernel(t, testSearchMatchesReference) }

func testSearchMatchesReference(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	for _, dim := range dims {
		for _, n := range testRows(dim) {
			for _, m := range []Metric{Dot, L2} {
				for _, kind := range []valueKind{grid, raw, unit} {
					stride := strides(dim)[r.IntN(2)]
					name := fmt.Sprintf("%v/dim%d/rows%d/stride%d/%v", m, dim, n, stride, kind)
					t.Run(name, func(t *testing.T) {
						d := newDataset(r, n, dim, kind)
						s := newSlab(d.rows, dim, stride, r.IntN(2) == 0)
						ref := refRanking(m, d.rows, d.q)
						ks := []int{1, 2, 3, 10, n - 1, n, n + 1, n + 5}
						if n <= 40 {
							ks = ks[:0]
							for k := 1; k <= n+5; k++ {
								ks = append(ks, k)
							}
						}
						for _, k := range ks {
							if k < 1 {
								continue
							}
							w := 1 + r.IntN(4)
							hits, err := Search(ctx, s, d.q, k, m, w)
							noErr(t, err)
							assertRanked(t, m, hits, ref, k, kind == grid)
						}
					})
				}
			}
		}
	}
}

// Every path must give bit-identical hits: Search with any worker count,
// SearchBatch, and SelectTopK over every row's score.
func TestPathsAgree(t *testing.T) { forEachKernel(t, testPathsAgree) }

func testPathsAgree(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	for _, dim := range dims {
		for _, n := range testRows(dim) {
			for _, m := range []Metric{Dot, L2} {
				stride := strides(dim)[r.IntN(2)]
				name := fmt.Sprintf("%v/dim%d/rows%d/stride%d", m, dim, n, stride)
				t.Run(name, func(t *testing.T) {
					d := newDataset(r, n, dim, raw)
					s := newSlab(d.rows, dim, stride, r.IntN(2) == 0)
					nq := 1 + r.IntN(11)
					qs := make([][]float32, nq)
					for j := range qs {
						qs[j] = testkit.Vector(r, dim)
						if j%2 == 1 { // a padded query is as good as a bare one
							qs[j] = append(qs[j], make([]float32, stride-dim)...)
						}
					}
					k := 1 + r.IntN(n+5)
					batch, err := SearchBatch(ctx, s, qs, k, m, 1+r.IntN(4))
					noErr(t, err)
					if len(batch) != nq {
						t.Fatalf("got %d result lists, want %d", len(batch), nq)
					}
					scores := make([]float32, n)
					for j, q := range qs {
						one, err := Search(ctx, s, q, k, m, 1+r.IntN(4))
						noErr(t, err)
						sameHits(t, one, batch[j], "query %d: Search and SearchBatch", j)
						noErr(t, scoreRows(ctx, scores, s, q, m, 2))
						sameHits(t, one, topk.SelectTopK(scores, k, m), "query %d: Search and topk.SelectTopK(scoreRows)", j)
					}
				})
			}
		}
	}
}

func TestDuplicateRowsTieByRow(t *testing.T) { forEachKernel(t, testDuplicateRowsTieByRow) }

func testDuplicateRowsTieByRow(t *testing.T) {
	r := testkit.Rand(t)
	for _, m := range []Metric{Dot, L2} {
		dim := 1 + r.IntN(200)
		row := testkit.Vector(r, dim)
		rows := make([][]float32, 57)
		for i := range rows {
			rows[i] = row
		}
		s := newSlab(rows, dim, (dim+3)&^3, false)
		hits, err := Search(context.Background(), s, testkit.Vector(r, dim), 20, m, 3)
		noErr(t, err)
		for i, h := range hits {
			if h.Row != i || h.Score != hits[0].Score {
				t.Fatalf("%v: hit %d is %v; equal rows must score the same and come in row order", m, i, h)
			}
		}
	}
}

func TestEmptyAndDegenerate(t *testing.T) {
	ctx := context.Background()
	s := Slab{Dim: 4, Stride: 4}
	hits, err := Search(ctx, s, make([]float32, 4), 3, Dot, 0)
	noErr(t, err)
	if hits == nil || len(hits) != 0 {
		t.Fatalf("empty slab: got %#v, want an empty non-nil slice", hits)
	}

	batch, err := SearchBatch(ctx, s, [][]float32{{1, 2, 3, 4}, {1, 1, 1, 1}}, 3, L2, 0)
	noErr(t, err)
	if len(batch) != 2 || len(batch[0]) != 0 || len(batch[1]) != 0 {
		t.Fatalf("empty slab batch: got %v", batch)
	}

	batch, err = SearchBatch(ctx, Slab{Data: []float32{1, 2}, Rows: 1, Dim: 2, Stride: 2}, nil, 3, L2, 0)
	noErr(t, err)
	if len(batch) != 0 {
		t.Fatalf("no queries: got %v", batch)
	}

	// Zero dimensions: every row scores zero and order falls back to row.
	zero := Slab{Rows: 3}
	hits, err = Search(ctx, zero, nil, 5, L2, 0)
	noErr(t, err)
	sameHits(t, hits, []Hit{{Row: 0, Score: 0}, {Row: 1, Score: 0}, {Row: 2, Score: 0}}, "zero dimensions")
}

func TestShapeErrors(t *testing.T) {
	ctx := context.Background()
	q := []float32{1, 2, 3}
	cases := []struct {
		name string
		s    Slab
		q    []float32
		m    Metric
		want error
	}{
		{"data too short", Slab{Data: make([]float32, 7), Rows: 2, Dim: 3, Stride: 4}, q, Dot, nil},
		{"last row cut", Slab{Data: make([]float32, 6), Rows: 2, Dim: 3, Stride: 4}, q, Dot, ErrSlabShape},
		{"rows far too many", Slab{Data: make([]float32, 8), Rows: math.MaxInt / 2, Dim: 3, Stride: 4}, q, Dot, ErrSlabShape},
		{"stride below dim", Slab{Data: make([]float32, 8), Rows: 2, Dim: 4, Stride: 3}, q, Dot, ErrSlabShape},
		{"negative rows", Slab{Rows: -1, Dim: 3, Stride: 4}, q, Dot, ErrSlabShape},
		{"query length", Slab{Data: make([]float32, 8), Rows: 2, Dim: 3, Stride: 4}, q[:2], Dot, ErrQueryLen},
		{"metric", Slab{Data: make([]float32, 8), Rows: 2, Dim: 3, Stride: 4}, q, Metric(7), ErrMetric},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Search(ctx, c.s, c.q, 2, c.m, 0)
			isErr(t, err, c.want)
			_, err = SearchBatch(ctx, c.s, [][]float32{q, c.q}, 2, c.m, 0)
			isErr(t, err, c.want)
			err = scoreRows(ctx, make([]float32, 2), c.s, c.q, c.m, 0)
			isErr(t, err, c.want)
		})
	}
}

func TestCancelled(t *testing.T) {
	r := testkit.Rand(t)
	d := newDataset(r, 3000, 64, raw)
	s := newSlab(d.rows, 64, 64, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Search(ctx, s, d.q, 5, Dot, 2)
	isErr(t, err, context.Canceled)
	_, err = SearchBatch(ctx, s, [][]float32{d.q}, 5, Dot, 2)
	isErr(t, err, context.Canceled)
	err = scoreRows(ctx, make([]float32, 3000), s, d.q, L2, 2)
	isErr(t, err, context.Canceled)
}

func TestKernelNamed(t *testing.T) {
	if !slices.Contains([]string{"avx512", "avx2+fma", "neon", "generic"}, Kernel()) {
		t.Errorf("unknown kernel name %q", Kernel())
	}
	t.Logf("kernel %s", Kernel())
}
