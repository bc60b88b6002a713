package testkit

import (
	"fmt"
	"math"
)

// Tolerance is how far a float32 score may lie from its float64 reference
// without a bug: 1e-5 of the score (at least 1e-5, which is what unit-length
// cosine data must meet), or 1e-6 of mag, the sum of the magnitudes of the
// score's terms, where that is larger — a float32 sum's rounding grows with
// its terms, not with its result, so an unnormalised dot product that
// cancels to near zero may honestly be off by more than 1e-5 of itself.
// Pass mag 0 where the terms cannot cancel.
func Tolerance(score, mag float64) float64 {
	return math.Max(1e-5*math.Max(1, math.Abs(score)), 1e-6*mag)
}

// Metric is how Score scores a pair.
type Metric int

const (
	Cosine Metric = iota // the cosine of the angle between them; higher is better
	Dot                  // their inner product; higher is better
	L2                   // their squared Euclidean distance; lower is better
)

// Score is the float64 reference of row id, holding v, for q under m, with
// the Tolerance of a float32 computation of it, from its terms.
func Score(m Metric, id uint64, v, q []float32) Ref {
	var dot, abs, vv, qq, l2 float64
	for i := range v {
		a, b := float64(v[i]), float64(q[i])
		dot += a * b
		abs += math.Abs(a * b)
		vv += a * a
		qq += b * b
		l2 += (a - b) * (a - b)
	}
	score, mag := l2, l2
	switch m {
	case Cosine:
		n := math.Sqrt(vv * qq)
		score, mag = dot/n, abs/n
	case Dot:
		score, mag = dot, abs
	}
	return Ref{ID: id, Score: score, Tol: Tolerance(score, mag)}
}

// Ref is one row's float64 reference score for a query and the Tolerance of
// a float32 computation of it.
type Ref struct {
	ID    uint64
	Score float64
	Tol   float64
}

// NearTie is the one near-tie rule: two rows whose float64 reference scores
// lie within the sum of their tolerances may be ordered either way by a
// correct float32 search, so they may trade ranks (also across the cut after
// the last rank). Any other pair must come in the reference's order.
func NearTie(a, b Ref) bool { return math.Abs(a.Score-b.Score) <= a.Tol+b.Tol }

// Hit is one rank of an answer: the ID a search returned and the score it
// reported.
type Hit struct {
	ID    uint64
	Score float32
}

// SameRanking says how got fails to agree with want, or returns nil. Both
// are best-first answers to one query and are checked against the float64
// references ref gives (from the data, never from a reported score): the
// same length, no ID twice in got, every reported score of both lists within
// its reference's tolerance, and at every rank the same ID or two IDs that
// are a near-tie. ref returns an error for an ID the data does not hold.
func SameRanking(want, got []Hit, ref func(id uint64) (Ref, error)) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d hits, want %d", len(got), len(want))
	}
	seen := make(map[uint64]bool, len(got))
	for i := range want {
		w, g := want[i], got[i]
		if seen[g.ID] {
			return fmt.Errorf("rank %d repeats ID %d", i, g.ID)
		}
		seen[g.ID] = true
		rg, err := ref(g.ID)
		if err != nil {
			return fmt.Errorf("rank %d: ID %d: %w", i, g.ID, err)
		}
		if d := math.Abs(float64(g.Score) - rg.Score); d > rg.Tol {
			return fmt.Errorf("rank %d: ID %d scores %v, float64 reference %v (off by %.3g, tolerance %.3g)", i, g.ID, g.Score, rg.Score, d, rg.Tol)
		}
		rw := rg
		if w.ID != g.ID {
			if rw, err = ref(w.ID); err != nil {
				return fmt.Errorf("rank %d: wanted ID %d: %w", i, w.ID, err)
			}
		}
		if d := math.Abs(float64(w.Score) - rw.Score); d > rw.Tol {
			return fmt.Errorf("rank %d: the wanted ID %d scores %v, float64 reference %v (off by %.3g, tolerance %.3g)", i, w.ID, w.Score, rw.Score, d, rw.Tol)
		}
		if w.ID != g.ID && !NearTie(rw, rg) {
			return fmt.Errorf("rank %d is ID %d (float64 %v), want ID %d (float64 %v): not a near-tie", i, g.ID, rg.Score, w.ID, rw.Score)
		}
	}
	return nil
}
