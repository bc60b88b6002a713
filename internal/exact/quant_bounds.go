package exact

import (
	"math"

	"github.com/umbravec/umbra/internal/core"
)

// The guarantee. For a row x (float32, as the slab holds it), its
// compression x̂ with ε ≥ ‖x − x̂‖₂, and a query q, let s(q, x) be the score
// the float32 kernels compute. From the compressed scan we get an estimate
// e and a half-width B with |s(q, x) − e| ≤ B, built from four facts:
//
//  1. Cauchy–Schwarz: |q·x − q·x̂| = |q·(x − x̂)| ≤ ‖q‖·ε.
//  2. Int8 queries are quantised too (q̂ = s_q·c_q, ε_q ≥ ‖q − q̂‖): then
//     |q·x̂ − q̂·x̂| ≤ ε_q·‖x̂‖ ≤ ε_q·(‖x‖ + ε); q̂·x̂ = s_q·s_x·Σ c_q c_x is
//     an exact integer sum times a scale. Float16 rows meet the float32
//     query in float32 FMAs: |fl(q·x̂) − q·x̂| ≤ γ_m·‖q‖·‖x̂‖ (m terms) plus
//     2^-150 a step where sums underflow.
//  3. The float32 kernel itself: any order of n fused or unfused
//     multiply-adds is within γ_{n+1}·Σ|q_j x_j| ≤ γ_{n+1}·‖q‖·‖x‖ of q·x
//     (Higham, Accuracy and Stability of Numerical Algorithms, §3.1, which
//     holds for every summation order), plus 2^-150 a step in underflow;
//     for L2 each difference rounds once more, so fl(Σ(q_j−x_j)²) is within
//     γ_{n+3} of ‖q − x‖² relatively. γ_m = m·u/(1 − m·u), u = 2^-24.
//  4. L2: ‖q − x‖ lies within ε of ‖q − x̂‖ (triangle inequality), and
//     ‖q − x̂‖² = ‖q‖² − 2 q·x̂ + ‖x̂‖², the middle term bounded by 2.
//
// The bounds are evaluated in float64, whose own rounding (relative 2^-53 a
// step, a few dozen steps) is covered by widening every half-width by
// 2^-20 relative and 2^-40·‖q‖·‖x̂‖ absolute, and the float64 interval is
// rounded outward to float32. A row whose magnitudes could overflow
// float32 anywhere (‖q‖·‖x‖ ≥ 2^100), or whose estimate is not finite, gets
// the interval [−Inf, +Inf]: it is always rescored, never trusted.
//
// Hence every row's float32 score lies in its interval, and ExactSearch's
// rule follows: with τ the k-th best lower bound among the allowed rows,
// at least k rows score ≥ τ, so every row of the float32 top k (ties
// included) scores ≥ τ and has an upper bound ≥ τ; rescoring all those rows
// with the float32 kernel and selecting among them gives the float32 answer,
// IDs, ties and scores alike.

// quantQuery is one query prepared for a scan of compressed rows.
type quantQuery struct {
	q   []float32 // the float32 query, Stride long (the slab's)
	qf  []float32 // F16: the query padded to the code stride
	q8  []int8    // Int8: the query's codes, code stride long
	sq  float64   // Int8: the query's scale
	off int64     // Int8: 128·Σ codes, the row offset's share of the raw sum
	qn  float64   // ≥ ‖q‖
	qn2 float64   // ‖q‖², nearest
	eq  float64   // Int8: ≥ ‖q − q̂‖
	// γ for the float32 rescore kernel (n = slab stride, +3 for L2) and
	// for the float16 accumulation (m = code stride), and the absolute
	// underflow allowances.
	g32, g16    float64
	abs32       float64
	abs16       float64
	prec        core.Precision
	metric      core.Metric
	wide, wide2 float64 // 1 + 2^-20, 1 − 2^-20
}

func gamma(m int) float64 {
	mu := float64(m) * 0x1p-24
	return mu / (1 - mu)
}

func newQuantQuery(c *Compressed, q []float32, m core.Metric) *quantQuery {
	qq := &quantQuery{q: q, prec: c.Prec, metric: m, wide: 1 + 0x1p-20, wide2: 1 - 0x1p-20}
	n := len(q)
	var n2 float64
	var maxAbs float32
	for _, v := range q {
		n2 += float64(v) * float64(v)
		maxAbs = max(maxAbs, abs32(v))
	}
	qq.qn2 = n2
	qq.qn = math.Sqrt(n2) * (1 + 0x1p-30)
	qq.g32 = gamma(n + 3)
	qq.g16 = gamma(c.Stride + 1)
	qq.abs32 = float64(n+3) * 0x1p-149
	qq.abs16 = float64(c.Stride+1) * 0x1p-149
	if c.Prec == core.Int8 {
		qq.q8 = make([]int8, c.Stride)
		if maxAbs > 0 {
			qq.sq = float64(float32(float64(maxAbs) / 127))
		}
		var e2 float64
		var sum int64
		for j, v := range q[:min(len(q), c.Dim)] {
			var code float64
			if qq.sq > 0 {
				code = max(-127, min(127, math.RoundToEven(float64(v)/qq.sq)))
			}
			qq.q8[j] = int8(code)
			sum += int64(code)
			d := float64(v) - code*qq.sq
			e2 += d * d
		}
		qq.off = 128 * sum
		qq.eq = math.Sqrt(e2) * (1 + 0x1p-30)
	} else {
		qq.qf = make([]float32, c.Stride)
		copy(qq.qf, q[:min(len(q), c.Dim)])
	}
	return qq
}

// est returns the compressed estimate of q·x̂ for row i from the kernel's
// raw sum, and the half-width of its error against the exact q·x̂.
func (qq *quantQuery) dotHat(c *Compressed, i int, raw float64, hn float64) (est, half float64) {
	scale := float64(c.Scale[i])
	if qq.prec == core.Int8 {
		return qq.sq * scale * (raw - float64(qq.off)), qq.eq * hn
	}
	return scale * raw, qq.g16*qq.qn*hn + qq.abs16*scale
}

var inf32 = float32(math.Inf(1))

// keyBounds returns row i's key interval [lo, hi] (keys: larger is better;
// the L2 key is the negated distance) and the estimate's key, from the
// kernel's raw sum for the row.
func (qq *quantQuery) keyBounds(c *Compressed, i int, raw float64) (lo, hi, est float32) {
	xn, e := float64(c.Norm[i]), float64(c.Err[i])
	hn := xn + e // ≥ ‖x̂‖
	dot, half := qq.dotHat(c, i, raw, hn)
	if qq.metric == core.L2 {
		r := qq.qn + hn
		if !(r*r < 0x1p100) || math.IsNaN(dot) || math.IsInf(dot, 0) {
			return -inf32, inf32, float32(math.NaN())
		}
		hat2 := float64(c.HatSq[i])
		d2 := qq.qn2 - 2*dot + hat2
		slack := 2*half + 0x1p-22*hn*hn + 0x1p-30*r*r
		rlo := math.Sqrt(max(0, d2-slack)) - e
		rhi := math.Sqrt(max(0, d2+slack)) + e
		rlo = max(0, rlo)
		slo := rlo*rlo*(1-qq.g32)*qq.wide2 - qq.abs32
		shi := rhi*rhi*(1+qq.g32)*qq.wide + qq.abs32
		return -up32(shi), -down32(slo), -float32(max(0, d2))
	}
	if !(qq.qn*hn < 0x1p100) || math.IsNaN(dot) || math.IsInf(dot, 0) {
		return -inf32, inf32, float32(math.NaN())
	}
	b := (qq.qn*e+half+qq.g32*qq.qn*xn+qq.abs32)*qq.wide + 0x1p-40*qq.qn*hn
	return down32(dot - b), up32(dot + b), float32(dot)
}

// dotUpper is keyBounds' upper bound under Dot before its rounding to
// float32 (the same formula, so a valid bound on the row's score), or +Inf
// where keyBounds gives the row no bound.
func (qq *quantQuery) dotUpper(c *Compressed, i int, raw float64) float64 {
	xn, e := float64(c.Norm[i]), float64(c.Err[i])
	hn := xn + e
	scale := float64(c.Scale[i])
	var dot, half float64
	if qq.prec == core.Int8 {
		dot, half = qq.sq*scale*(raw-float64(qq.off)), qq.eq*hn
	} else {
		dot, half = scale*raw, qq.g16*qq.qn*hn+qq.abs16*scale
	}
	if !(qq.qn*hn < 0x1p100) || dot-dot != 0 {
		return math.Inf(1)
	}
	return dot + (qq.qn*e+half+qq.g32*qq.qn*xn+qq.abs32)*qq.wide + 0x1p-40*qq.qn*hn
}

// estKey is the Approximate mode's key for row i: the compressed estimate
// of the score (of q·x̂, or of ‖q − x̂‖² under L2), with no bound.
func (qq *quantQuery) estKey(c *Compressed, i int, raw float64) float32 {
	scale := float64(c.Scale[i])
	var dot float64
	if qq.prec == core.Int8 {
		dot = qq.sq * scale * (raw - float64(qq.off))
	} else {
		dot = scale * raw
	}
	if qq.metric == core.L2 {
		return -float32(max(0, qq.qn2-2*dot+float64(c.HatSq[i])))
	}
	return float32(dot)
}
