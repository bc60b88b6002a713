package gpuplan

import (
	"fmt"
	"math"
	"slices"

	"github.com/umbravec/umbra/internal/core"
)

// ExactScore is row's score against q in float64: the self-test's truth.
func ExactScore(row, q []float32, metric core.Metric) float64 {
	var s float64
	for j, x := range row {
		if metric == core.L2 {
			s += (float64(x) - float64(q[j])) * (float64(x) - float64(q[j]))
		} else {
			s += float64(x) * float64(q[j])
		}
	}
	return s
}

// Tol is the self-test's tolerance for a float32 score whose exact value
// is w.
func Tol(w float64) float64 { return 1e-4 * math.Max(1, math.Abs(w)) }

// Case is one search of the self-test: the queries, k, the allow bitmap
// (nil for none) and how many hits each query must get.
type Case struct {
	Queries [][]float32
	K       int
	Mask    []uint64
	Want    int
}

// Cases are the self-test's searches of rows rows: for each k of ks, one
// query then the batch qs, without and with an allow bitmap admitting
// every third row; without fused, also every row ranked on the host (k =
// rows) for two queries, both ways.
func Cases(qs [][]float32, ks []int, rows int, fused bool) []Case {
	third := make([]uint64, (rows+63)/64)
	for r := 0; r < rows; r += 3 {
		third[r>>6] |= 1 << (uint(r) & 63)
	}
	admitted := (rows + 2) / 3
	var cases []Case
	for _, k := range ks {
		cases = append(cases, Case{qs[:1], k, nil, k}, Case{qs, k, nil, k},
			Case{qs[:1], k, third, min(k, admitted)}, Case{qs, k, third, min(k, admitted)})
	}
	if !fused {
		cases = append(cases, Case{qs[:2], rows, nil, rows}, Case{qs[:2], rows, third, admitted})
	}
	return cases
}

// Ranked is the exact scores of the rows of rows a case admits (with a
// mask, every third), best first.
func Ranked(rows int, masked bool, metric core.Metric, exact func(row int) float64) []float64 {
	var ranked []float64
	for i := 0; i < rows; i++ {
		if !masked || i%3 == 0 {
			ranked = append(ranked, exact(i))
		}
	}
	slices.Sort(ranked)
	if metric != core.L2 {
		slices.Reverse(ranked)
	}
	return ranked
}

// CheckRanking checks that hits are k distinct rows whose exact scores are,
// rank by rank, the k best of ranked (the exact scores best first), each
// reported within tolerance: a correct answer up to near-ties.
func CheckRanking(hits []core.Hit, k int, ranked []float64, exact func(int) float64, tol func(float64) float64) error {
	if len(hits) != k {
		return fmt.Errorf("%d hits, want %d", len(hits), k)
	}
	seen := make(map[int]bool, k)
	for i, h := range hits {
		if h.Row < 0 || seen[h.Row] {
			return fmt.Errorf("rank %d: row %d is out of range or repeated", i, h.Row)
		}
		seen[h.Row] = true
		w := exact(h.Row)
		if math.Abs(float64(h.Score)-w) > tol(w) {
			return fmt.Errorf("rank %d: row %d scored %g, want %g", i, h.Row, h.Score, w)
		}
		if math.Abs(w-ranked[i]) > 2*tol(w) {
			return fmt.Errorf("rank %d: row %d has score %g, the rank's exact score is %g", i, h.Row, w, ranked[i])
		}
	}
	return nil
}
