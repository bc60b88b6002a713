package engine

import (
	"fmt"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/testkit"
)

// KitMetric is m as testkit's reference scores name it, for this package's
// tests, internal and external.
func KitMetric(m umbra.Metric) testkit.Metric {
	switch m {
	case umbra.Cosine:
		return testkit.Cosine
	case umbra.Dot:
		return testkit.Dot
	case umbra.L2:
		return testkit.L2
	}
	panic(fmt.Sprintf("no testkit metric for %v", m))
}

// sameRanking is the external tests' sameHitsError for this package's own:
// got agrees with want, both answers for q over data (IDs are positions),
// up to near-ties by testkit's one rule.
func sameRanking(m umbra.Metric, data [][]float32, q []float32, want, got []umbra.Hit) error {
	kit := func(hs []umbra.Hit) []testkit.Hit {
		out := make([]testkit.Hit, len(hs))
		for i, h := range hs {
			out[i] = testkit.Hit{ID: h.ID, Score: h.Score}
		}
		return out
	}
	return testkit.SameRanking(kit(want), kit(got), func(id uint64) (testkit.Ref, error) {
		if id >= uint64(len(data)) {
			return testkit.Ref{}, fmt.Errorf("ID %d past the %d rows", id, len(data))
		}
		return testkit.Score(KitMetric(m), id, data[id], q), nil
	})
}
