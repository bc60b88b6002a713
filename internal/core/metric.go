package core

import (
	"fmt"
	"strings"
)

// Metric is the similarity an index ranks by.
type Metric int

const (
	// Cosine ranks by cosine similarity (higher is better). Vectors and
	// queries are normalised on the host, so a zero vector is rejected,
	// and every kernel and shader then computes the dot product.
	Cosine Metric = iota
	// Dot ranks by the inner product (higher is better).
	Dot
	// L2 ranks by squared Euclidean distance (lower is better); Hit.Score
	// is the squared distance.
	L2
)

func (m Metric) String() string {
	switch m {
	case Cosine:
		return "cosine"
	case Dot:
		return "dot"
	case L2:
		return "l2"
	}
	return fmt.Sprintf("Metric(%d)", int(m))
}

// HigherIsBetter reports whether a larger score ranks first.
func (m Metric) HigherIsBetter() bool { return m != L2 }

// ParseMetric reads a metric's name as String writes it, or one of its
// other names ("cos"; "ip", "inner"; "euclidean"), in any case.
func ParseMetric(s string) (Metric, bool) {
	switch strings.ToLower(s) {
	case "cosine", "cos":
		return Cosine, true
	case "dot", "ip", "inner":
		return Dot, true
	case "l2", "euclidean":
		return L2, true
	}
	return 0, false
}
