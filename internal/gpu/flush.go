package gpu

import (
	"errors"
	"math"
	"math/bits"
	"sync"
)

// ErrSubnormal: a float32 search's scores could depend on whether the
// device flushes subnormal numbers to zero (Vulkan allows it for every
// input and result; NVIDIA does it, lavapipe does not), so the device does
// not run it: the caller scores on the CPU, which keeps subnormals. See
// flushPlan.
var ErrSubnormal = errors.New("scores could meet subnormal float32 values, which a device may flush to zero")

// Why the float32 scores do not depend on flushing (docs/how-it-works.md
// has it too). Every float32 v ≠ 0 with |v| ≥ 2^e (e ≥ −126) is a multiple
// of 2^(e−23). Call a value on the grid when it is a multiple of 2^−126.
// A value on the grid is 0 or has |v| ≥ 2^−126, a normal float, and
// rounding it to float32 keeps it on the grid (below 2^−102 it has fewer
// than 24 significant bits and is exact; from 2^−102 up every float32 is a
// multiple of 2^−125). So if every product a shader forms is on the grid
// and no input is subnormal, every fma (fused or not: a rounded product is
// on the grid too), every sum of the vec4's lanes and every step of the
// team tree takes and gives values on the grid, none of them subnormal,
// and flushing changes nothing, in any summation order.
//
//   - Dot and cosine: x·q with x ≥ 2^ex and q ≥ 2^eq normal is a multiple
//     of 2^(ex+eq−46): on the grid when ex + eq ≥ −80. A query scaled by
//     2^s (exact while it neither overflows nor underflows) moves eq by s,
//     so the device scores q·2^s and the host multiplies the scores by
//     2^−s: no subnormal meets the device, and where the unscaled sums met
//     none either (nothing underflowed) every intermediate is the unscaled
//     one times 2^s, so the scores come back bit for bit what they were.
//   - L2: d = x − q is on the 2^−63 grid (so d·d on the 2^−126 one) when
//     every nonzero x and q is at least 2^−40. x − q does not scale with q
//     alone, so data or queries with smaller nonzero components are left to
//     the CPU.
//
// Rows with subnormal components are left to the CPU under either metric:
// a device may flush them as inputs.

const (
	// subnormalExp stands for a subnormal component's exponent: below any
	// normal one and low enough that any bound it enters is conservative
	// (a subnormal is at least 2^−149).
	subnormalExp = -150
	// dotGridExp: products of components with exponents summing to at
	// least this are multiples of 2^−126.
	dotGridExp = -80
	// l2MinExp: L2 is flush-free when every nonzero component is at least
	// 2^l2MinExp.
	l2MinExp = -40
)

// expRange is the exponent range of the nonzero components seen: min and
// max of floor(log2|v|), subnormalExp for a subnormal. any is false while
// every component seen was zero.
type expRange struct {
	min, max int
	any      bool
}

// rangeOf is the exponent range of vs's nonzero components.
func rangeOf(vs []float32) expRange {
	lo, hi := uint32(math.MaxUint32), uint32(0)
	for _, v := range vs {
		b := math.Float32bits(v) &^ (1 << 31)
		if b != 0 {
			lo, hi = min(lo, b), max(hi, b)
		}
	}
	if hi == 0 {
		return expRange{}
	}
	return expRange{min: expOf(lo), max: expOf(hi), any: true}
}

// expOf is floor(log2|v|) of the float32 with bits b (sign cleared, not
// zero), subnormalExp for a subnormal, 128 for Inf and NaN.
func expOf(b uint32) int {
	if e := int(b >> 23); e != 0 {
		return e - 127
	}
	return subnormalExp
}

// widen returns r grown to hold o.
func (r expRange) widen(o expRange) expRange {
	switch {
	case !o.any:
		return r
	case !r.any:
		return o
	}
	return expRange{min: min(r.min, o.min), max: max(r.max, o.max), any: true}
}

// flushPlan returns the power of two 2^s a query must be scaled by so that
// its scores against rows whose components span rows cannot meet a
// subnormal on the device (s = 0: as it is), or ok false where no scaling
// can promise it (the caller scores on the CPU): a subnormal row
// component, L2 with a nonzero component below 2^−40, or a dot product
// whose magnitudes span too many powers of two to be scaled up without
// overflowing. stride is the padded dimension (how many products a score
// adds).
func flushPlan(rows, q expRange, l2 bool, stride int) (s int, ok bool) {
	if l2 {
		// The terms are (x−q)²: with every nonzero component of either
		// side at least 2^l2MinExp, each difference is a multiple of that
		// side's ulp and its square is not subnormal. A side with no
		// nonzero component (an all-zero row or query) leaves the other
		// side's components as the differences, so it is held to the
		// same bound, not waved through.
		return 0, (!rows.any || rows.min >= l2MinExp) && (!q.any || q.min >= l2MinExp)
	}
	if !rows.any || !q.any {
		return 0, true // every product is 0: every value is 0
	}
	if rows.min <= subnormalExp {
		return 0, false
	}
	s = max(0, dotGridExp-rows.min-q.min, -126-q.min)
	if s == 0 {
		return 0, true
	}
	// The scaled query and |partial sums| < stride · 2^(rows.max+1) ·
	// 2^(q.max+s+1) must stay finite (below 2^128).
	if q.max+s > 126 || rows.max+q.max+s+2+bits.Len(uint(stride)) > 127 {
		return 0, false
	}
	return s, true
}

// rowRange tracks the exponent range of every float32 component a device
// index has been given (uploads and rewrites). It only widens: rows
// truncated or rewritten leave their components in it, which keeps it
// conservative.
type rowRange struct {
	mu sync.Mutex
	r  expRange
}

func (t *rowRange) note(vs []float32) {
	r := rangeOf(vs)
	t.mu.Lock()
	t.r = t.r.widen(r)
	t.mu.Unlock()
}

func (t *rowRange) get() expRange {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.r
}

// scaleBy returns v·2^s rounded once to float32.
func scaleBy(v float32, s int) float32 { return float32(math.Ldexp(float64(v), s)) }
