package bench

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/umbravec/umbra"
)

// Reference holds the float64 scores of every stored row for one query,
// computed from the raw input values, and what a float32 path may deviate
// from them.
type Reference struct {
	Metric umbra.Metric
	Scores []float64 // Scores[id]: cosine, inner product or squared L2
	// Threshold is the largest |float32 score − Scores[id]| a correct path
	// may show: 8·√dim·2⁻²⁴·S, where S is the largest sum of absolute
	// terms of one row's score (|x̂ⱼq̂ⱼ| for cosine, |xⱼqⱼ| for dot,
	// xⱼ²+qⱼ² for L2). That is the usual random-walk bound of float32
	// rounding over dim terms with a safety factor of 8; a wrong result
	// (a lost row, a stale chunk, a bad stride) is orders of magnitude
	// above it.
	Threshold float64
	// top is the best rows TopK selected, best first.
	top   []int
	topMu sync.Mutex
}

// NewReference scores every row of data (row-major, dim values per row)
// against q in float64, using every CPU.
func NewReference(data []float32, dim int, q []float32, m umbra.Metric) *Reference {
	n := len(data) / dim
	ref := &Reference{Metric: m, Scores: make([]float64, n)}
	qn := 1.0
	if m == umbra.Cosine {
		qn = norm64(q)
	}
	workers := min(runtime.GOMAXPROCS(0), max(1, n/1024))
	scale := make([]float64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lo, hi := w*n/workers, (w+1)*n/workers
			for i := lo; i < hi; i++ {
				s, mag := score64(data[i*dim:(i+1)*dim], q, qn, m)
				ref.Scores[i] = s
				scale[w] = max(scale[w], mag)
			}
		}()
	}
	wg.Wait()
	s := max(slices.Max(scale), math.SmallestNonzeroFloat64)
	ref.Threshold = 8 * math.Sqrt(float64(dim)) * 0x1p-24 * s
	return ref
}

func norm64(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// score64 returns row's score against q and the sum of the absolute terms
// that made it. qn is q's norm under Cosine.
func score64(row, q []float32, qn float64, m umbra.Metric) (score, mag float64) {
	switch m {
	case umbra.L2:
		for j, x := range row {
			d := float64(x) - float64(q[j])
			score += d * d
			mag += float64(x)*float64(x) + float64(q[j])*float64(q[j])
		}
		return score, mag
	case umbra.Cosine:
		var dot, nn float64
		for j, x := range row {
			p := float64(x) * float64(q[j])
			dot += p
			mag += math.Abs(p)
			nn += float64(x) * float64(x)
		}
		d := math.Sqrt(nn) * qn
		return dot / d, mag / d
	default:
		for j, x := range row {
			p := float64(x) * float64(q[j])
			score += p
			mag += math.Abs(p)
		}
		return score, mag
	}
}

// better reports whether row a ranks before row b: the better score
// first, equal scores by lower ID, as the engine orders hits.
func (r *Reference) better(a, b int) bool {
	sa, sb := r.Scores[a], r.Scores[b]
	if sa != sb {
		if r.Metric.HigherIsBetter() {
			return sa > sb
		}
		return sa < sb
	}
	return a < b
}

// TopK returns the IDs of the k best rows, best first. The best rows are
// selected once, by a bounded heap (O(N log k)), and kept: a later call
// for as many or fewer takes their prefix (the device check asks for the
// same queries' top k many times over 4,000,000 rows).
func (r *Reference) TopK(k int) []int {
	k = min(k, len(r.Scores))
	r.topMu.Lock()
	defer r.topMu.Unlock()
	if len(r.top) >= k {
		return r.top[:k:k]
	}
	// A max-heap of the k best so far, the worst at the root.
	h := make([]int, 0, k)
	worse := func(a, b int) bool { return r.better(b, a) }
	down := func(i int) {
		for {
			c := 2*i + 1
			if c >= len(h) {
				return
			}
			if c+1 < len(h) && worse(h[c+1], h[c]) {
				c++
			}
			if !worse(h[c], h[i]) {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	for id := range r.Scores {
		switch {
		case len(h) < k:
			h = append(h, id)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !worse(h[i], h[p]) {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
		case k > 0 && r.better(id, h[0]):
			h[0] = id
			down(0)
		}
	}
	slices.SortFunc(h, func(a, b int) int {
		switch {
		case r.better(a, b):
			return -1
		case r.better(b, a):
			return 1
		}
		return 0
	})
	r.top = h
	return h[:k:k]
}

// MaxAbsDiff compares a path's scores for all N rows (hits from a search
// with k = N, in any order) with the reference and returns the largest
// absolute difference. It fails when the hits do not name every row
// exactly once.
func (r *Reference) MaxAbsDiff(all []umbra.Hit) (float64, error) {
	if len(all) != len(r.Scores) {
		return 0, fmt.Errorf("search with k=%d returned %d hits for %d rows", len(r.Scores), len(all), len(r.Scores))
	}
	seen := make([]bool, len(r.Scores))
	var worst float64
	for _, h := range all {
		if h.ID >= uint64(len(seen)) || seen[h.ID] {
			return 0, fmt.Errorf("search with k=N returned ID %d twice or out of range", h.ID)
		}
		seen[h.ID] = true
		d := math.Abs(float64(h.Score) - r.Scores[h.ID])
		if !(d <= worst) { // NaN scores count as the worst
			worst = d
			if math.IsNaN(d) {
				worst = math.Inf(1)
			}
		}
	}
	return worst, nil
}

// HitsDiff returns the largest |hit score − reference score| over hits
// (+Inf for an ID out of range or a NaN score).
func (r *Reference) HitsDiff(hits []umbra.Hit) float64 {
	var worst float64
	for _, h := range hits {
		if h.ID >= uint64(len(r.Scores)) {
			return math.Inf(1)
		}
		d := math.Abs(float64(h.Score) - r.Scores[h.ID])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		worst = max(worst, d)
	}
	return worst
}

// TopKResult says how a path's top-k compares with the reference's.
type TopKResult struct {
	// Exact is true when the IDs are the reference's, in order.
	Exact bool
	// Match is true when they are, up to near-ties: at every rank the
	// path's ID is the reference's, or one whose reference score is
	// within Threshold of the reference's score at that rank (float32
	// rounding may order such rows either way). IDs must be distinct.
	Match bool
	// Rank is the first rank that differs from the reference (−1 when
	// Exact).
	Rank int
}

// CompareTopK checks a path's top-k hits against the reference's.
func (r *Reference) CompareTopK(hits []umbra.Hit, k int) TopKResult {
	want := r.TopK(k)
	res := TopKResult{Exact: len(hits) == len(want), Match: len(hits) == len(want), Rank: -1}
	seen := map[uint64]bool{}
	for i, h := range hits {
		if i >= len(want) || h.ID >= uint64(len(r.Scores)) || seen[h.ID] {
			res.Exact, res.Match = false, false
			if res.Rank < 0 {
				res.Rank = i
			}
			break
		}
		seen[h.ID] = true
		if int(h.ID) == want[i] {
			continue
		}
		res.Exact = false
		if res.Rank < 0 {
			res.Rank = i
		}
		if math.Abs(r.Scores[h.ID]-r.Scores[want[i]]) > r.Threshold {
			res.Match = false
		}
	}
	if res.Rank < 0 && len(hits) != len(want) {
		res.Rank = min(len(hits), len(want))
	}
	return res
}
