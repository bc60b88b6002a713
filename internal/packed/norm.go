package packed

import "math"

// lanes is how many partial sums a row's sum of squares keeps: enough
// independent float64 additions in flight to hide their latency, eight
// AVX2 registers of four.
const lanes = 32

// sumSquares is the sum of float64(v[j])² over v, in the one order every
// path takes (this function, the assembly kernel, Norm for a query):
// component j is added to partial sum j mod 32, in component order; then
// the 32 partial sums are folded pairwise, sum l taking sum l+16, then
// l+8, l+4, l+2 and l+1 (reduceLanes). A stored row's scale and a query's
// are therefore the same function of their components, bit for bit.
//
// The square of a float32 is exact in float64 (24 significant bits
// squared fit in 53, and the smallest subnormal squared is a normal
// float64), so a fused multiply-add gives the same bits as a multiply
// and an add, and only the order of the additions matters. The sum is
// finite exactly when every component is (a square is below 1.2e77 and a
// row has fewer than 2^24 of them) and zero exactly when every component
// is ±0: the checks read it instead of the components.
func sumSquares(v []float32) float64 {
	var acc [lanes]float64
	full := len(v) &^ (lanes - 1)
	if full > 0 {
		sumLanes(&acc, v[:full])
	}
	for l, x := range v[full:] {
		acc[l] += float64(x) * float64(x)
	}
	return reduceLanes(&acc)
}

// sumLanesGo adds the squares of v (a multiple of lanes long) to acc,
// component j to acc[j%lanes]: the portable loop, and what the assembly
// must match.
func sumLanesGo(acc *[lanes]float64, v []float32) {
	for i := 0; i+lanes <= len(v); i += lanes {
		for l, x := range (*[lanes]float32)(v[i : i+lanes]) {
			acc[l] += float64(x) * float64(x)
		}
	}
}

// reduceLanes folds the partial sums pairwise into one.
func reduceLanes(acc *[lanes]float64) float64 {
	for w := lanes / 2; w >= 1; w /= 2 {
		for l := range w {
			acc[l] += acc[l+w]
		}
	}
	return acc[0]
}

// unitSlack bounds how far from 1 the float64 sum of squares of a float32
// vector that is a unit vector rounded to float32 can be: each component
// u_i = w_i(1+d_i) with |d_i| <= 2^-24 and sum w_i^2 = 1, so
// sum u_i^2 - 1 = sum w_i^2 (2d_i + d_i^2), at most 2^-23 + 2^-48 in size,
// and the float64 sum adds far less. Twice that leaves room for both.
const unitSlack = 0x1p-22

// InvNorm is the factor a row (or query) whose squares sum to sum (as
// sumSquares adds them) is scaled by to unit norm: 1/sqrt(sum), except
// that a vector already of unit norm to within float32 rounding is kept as
// it is (factor 1, which changes no bit). That makes normalising
// idempotent: the rows an index stored under cosine, exported and added
// again, are stored with the same bits, so a store rebuilt from its export
// answers every search identically. Every row and query goes through it,
// so a stored row and an equal query are still scaled alike.
func InvNorm(sum float64) float64 {
	if math.Abs(sum-1) <= unitSlack {
		return 1
	}
	return 1 / math.Sqrt(sum)
}
