package packed

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
