package umbra

import (
	"fmt"
	"strings"
)

// Metric is the similarity an index ranks by: Cosine, Dot or L2.
type Metric int

const (
	// Cosine ranks by cosine similarity (higher is better). Vectors and
	// queries are normalised on the host, so a zero vector is refused
	// (ErrZeroVector), and every kernel and shader then computes the dot
	// product.
	Cosine Metric = iota
	// Dot ranks by the inner product (higher is better).
	Dot
	// L2 ranks by squared Euclidean distance (lower is better); Hit.Score
	// is the squared distance.
	L2
)

// String names the metric as ParseMetric reads it: "cosine", "dot" or
// "l2".
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

// HigherIsBetter reports whether a larger score ranks first (Cosine and
// Dot; L2 ranks the smaller distance first).
func (m Metric) HigherIsBetter() bool { return m != L2 }

// ParseMetric reads a metric's name as String writes it, or one of its
// other names ("cos"; "ip", "inner"; "euclidean"), in any case. Another
// name is ErrInvalidConfig.
func ParseMetric(s string) (Metric, error) {
	switch strings.ToLower(s) {
	case "cosine", "cos":
		return Cosine, nil
	case "dot", "ip", "inner":
		return Dot, nil
	case "l2", "euclidean":
		return L2, nil
	}
	return 0, fmt.Errorf("%w: unknown metric %q (want cosine, dot or l2)", ErrInvalidConfig, s)
}

// Precision is how an index holds the copy of its vectors that a search
// scans. Whatever the precision, searches return the exact float32 answer:
// the float32 rows stay on the host, the scan of the compressed copy
// bounds every row's float32 score, and only the rows whose bound can reach
// the k-th best are scored again in float32. A compressed precision reads
// 2× (F16) or about 4× (Int8) fewer bytes per scan and keeps both copies
// in host memory; on a GPU the device holds only the compressed copy,
// scans it there, and the host bounds and rescores.
//
// The numbers are part of the store format (a base file's header holds
// one) and of the shaders' templates: they are never renumbered.
type Precision int

const (
	// F32 scans the float32 rows themselves (the default).
	F32 Precision = iota
	// F16 scans IEEE half floats of each row scaled by a power of two (so
	// no component overflows or needlessly underflows), 2 bytes a
	// component.
	F16
	// Int8 scans each row as signed bytes with one scale per row
	// (symmetric: code = round(x·127/max|x|)), 1 byte a component.
	Int8
)

// String names the precision as ParsePrecision reads it: "f32", "f16" or
// "int8".
func (p Precision) String() string {
	switch p {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case Int8:
		return "int8"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// ParsePrecision reads a precision's name as String writes it, or one of
// its other names ("float32", "fp32", "" for F32; "float16", "fp16",
// "half"; "i8"), in any case. Another name is ErrInvalidConfig.
func ParsePrecision(s string) (Precision, error) {
	switch strings.ToLower(s) {
	case "f32", "float32", "fp32", "":
		return F32, nil
	case "f16", "float16", "fp16", "half":
		return F16, nil
	case "int8", "i8":
		return Int8, nil
	}
	return 0, fmt.Errorf("%w: unknown precision %q (want f32, f16 or int8)", ErrInvalidConfig, s)
}
