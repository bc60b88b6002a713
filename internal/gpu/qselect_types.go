package gpu

import (
	"errors"
	"math"
)

// ErrSelectUnfit says a compressed index's device-side candidate selection
// (SelectSums) cannot take this search on this device (its per-row bound
// data or one query's candidate list would not fit a binding): the caller
// reads every sum back instead (Sums). It is not a device failure.
var ErrSelectUnfit = errors.New("gpu: device-side candidate selection does not fit this search")

// QuantSelect is one SelectSums request.
type QuantSelect struct {
	// Queries are the words the codes are summed against
	// (exact.DeviceQuery); Coefs each query's bound coefficients
	// (exact.DeviceBoundCoefs, exact.QCoefWords each).
	Queries, Coefs [][]float32
	// RowData returns rows [from, to) of the per-row bound data
	// (exact.DeviceRowData); it is asked only for rows the device lacks.
	RowData func(from, to int) []float32
	// Rows is how many resident rows are searched, K the rank τ' is
	// taken at (at least 1, at most the rows Mask allows among them), Cap
	// the candidate slots a query has (at least K).
	Rows, K, Cap int
	// Mask, when not nil, allows only its rows (bit r of word r/64), as
	// the host's search does.
	Mask []uint64
	// Range, when set, makes the selection a range search's: the
	// candidates are the allowed rows whose upper bound reaches Limit (a
	// key: larger is better, an L2 distance negated), with no τ' (K is
	// then not used).
	Range bool
	Limit float32
}

// orderKey is shaders' order_key for keys (larger is better): an unsigned
// integer that sorts like the float, -0 and +0 one value, NaN lowest.
func orderKey(f float32) uint32 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return 0
	}
	if b == 0x80000000 {
		b = 0
	}
	if b&0x80000000 != 0 {
		return ^b
	}
	return b | 0x80000000
}
