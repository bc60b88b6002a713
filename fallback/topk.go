package fallback

import "slices"

// Selection works on keys, not scores: a key is the score for Dot and its
// negation for L2, so "larger key is better" everywhere and the hot loops
// carry no metric branch. Negation is exact, so ties survive it.

func toKeys(m Metric, v []float32) {
	if m == L2 {
		for i := range v {
			v[i] = -v[i]
		}
	}
}

func key(m Metric, score float32) float32 {
	if m == L2 {
		return -score
	}
	return score
}

// worse is the one ordering rule of every path, on keys: a hit is worse
// than another with a larger key or, with the same key, a larger ID
// (ids[row]; with ids nil, a larger row, for callers whose rows are in ID
// order). It is a total order even for non-finite keys, the one the GPU's
// shaders use on keys: -0 and +0 are one key, and NaN (a dot product of
// huge finite vectors can overflow to +Inf + -Inf) is worse than every
// number, NaNs ranked by ID.
func worse(a, b Hit, ids []uint64) bool {
	if a.Score < b.Score {
		return true
	}
	if a.Score > b.Score {
		return false
	}
	if an, bn := a.Score != a.Score, b.Score != b.Score; an != bn {
		return an
	}
	if ids != nil {
		return ids[a.Row] > ids[b.Row]
	}
	return a.Row > b.Row
}

// sameKey reports whether two keys are one under worse's order: equal
// numbers (-0 == +0), or both NaN.
func sameKey(a, b float32) bool { return a == b || a != a && b != b }

// Worse reports whether hit a ranks after hit b under m: the ordering rule
// every path of the engine returns its hits in. Equal scores go to the
// lower ID, ids[row], or with ids nil to the lower row (a device's
// answer, or rows whose IDs increase with the row).
func Worse(a, b Hit, m Metric, ids []uint64) bool {
	return worse(Hit{Row: a.Row, Score: key(m, a.Score)}, Hit{Row: b.Row, Score: key(m, b.Score)}, ids)
}

// Tied reports whether scores a and b are one under m's order (-0 == +0,
// NaN == NaN): hits holding them are ranked by ID alone.
func Tied(a, b float32, m Metric) bool { return sameKey(key(m, a), key(m, b)) }

// Rerank takes hits ranked best first by score, equal scores in any
// order (a device ranks them by row), and puts each run of equal scores
// in Worse's order under ids. Only such runs move, so hits without ties
// cost one pass.
func Rerank(hits []Hit, m Metric, ids []uint64) {
	for i := 0; i < len(hits); {
		j := i + 1
		for j < len(hits) && Tied(hits[i].Score, hits[j].Score, m) {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(hits[i:j], func(a, b Hit) int { return order(a, b, m, ids) })
		}
		i = j
	}
}

// order is Worse as a comparison for sorting best first.
func order(a, b Hit, m Metric, ids []uint64) int {
	switch {
	case Worse(b, a, m, ids):
		return -1
	case Worse(a, b, m, ids):
		return 1
	}
	return 0
}

// topK keeps the k best keys seen. Until k hits arrive it only appends;
// when it fills it becomes a min-heap with the worst kept hit at h[0], so
// a rejected candidate costs one comparison.
// Ties go by ids, as in worse.
type topK struct {
	k    int
	heap bool
	h    []Hit
	ids  []uint64
}

func newTopK(k, expect int, ids []uint64) topK {
	// Preallocation is capped: a batch holds one of these per query per
	// worker, and a huge k need not cost memory until hits arrive.
	return topK{k: k, h: make([]Hit, 0, max(0, min(k, expect, 4096))), ids: ids}
}

func (t *topK) offer(row int, k float32) {
	if !t.heap {
		t.h = append(t.h, Hit{Row: row, Score: k})
		if len(t.h) == t.k {
			t.heapify()
		}
		return
	}
	if worse(Hit{Row: row, Score: k}, t.h[0], t.ids) {
		return
	}
	t.h[0] = Hit{Row: row, Score: k}
	t.down(0)
}

// allows reports whether the row bitmap allow (nil: every row) admits row r.
func allows(allow []uint64, r int) bool {
	return allow == nil || allow[r>>6]&(1<<(uint(r)&63)) != 0
}

// offerAllowed offers keys[i] for row base+i where allow (a row bitmap, nil
// for every row) has the row's bit set.
func (t *topK) offerAllowed(keys []float32, base int, allow []uint64) {
	if allow == nil {
		t.offerKeys(keys, base)
		return
	}
	for i, k := range keys {
		if allows(allow, base+i) {
			t.offer(base+i, k)
		}
	}
}

// offerKeys offers keys[i] for row base+i.
func (t *topK) offerKeys(keys []float32, base int) {
	i := 0
	for ; i < len(keys) && !t.heap; i++ {
		t.offer(base+i, keys[i])
	}
	if i == len(keys) {
		return
	}
	w := t.h[0]
	for ; i < len(keys); i++ {
		k := keys[i]
		if k < w.Score || worse(Hit{Row: base + i, Score: k}, w, t.ids) {
			continue
		}
		t.h[0] = Hit{Row: base + i, Score: k}
		t.down(0)
		w = t.h[0]
	}
}

func (t *topK) heapify() {
	t.heap = true
	for i := len(t.h)/2 - 1; i >= 0; i-- {
		t.down(i)
	}
}

func (t *topK) down(i int) {
	h, ids := t.h, t.ids
	n := len(h)
	x := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && worse(h[r], h[c], ids) {
			c = r
		}
		if !worse(h[c], x, ids) {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = x
}

// merge offers every hit of o (already keys) to t.
func (t *topK) merge(o *topK) {
	for _, h := range o.h {
		t.offer(h.Row, h.Score)
	}
}

// result returns the kept hits best first, with keys turned back into
// scores. t is unusable afterwards.
func (t *topK) result(m Metric) []Hit {
	h, ids := t.h, t.ids
	slices.SortFunc(h, func(a, b Hit) int {
		switch {
		case worse(b, a, ids):
			return -1
		case worse(a, b, ids):
			return 1
		}
		return 0
	})
	for i := range h {
		h[i].Score = key(m, h[i].Score)
	}
	t.h = nil
	return h
}

// SelectTopK picks the k best of scores (Row is the index in scores), best
// first, equal scores broken by the lower index. k <= 0 or an unknown
// metric yields an empty result.
func SelectTopK(scores []float32, k int, m Metric) []Hit {
	return SelectAllowed(scores, k, m, nil)
}

// SelectAllowed is SelectTopK over the rows the bitmap allow admits (bit r
// of word r/64; nil admits every row): a GPU search's host selection of
// read-back scores.
func SelectAllowed(scores []float32, k int, m Metric, allow []uint64) []Hit {
	if k <= 0 || m.check() != nil {
		return []Hit{}
	}
	t := newTopK(k, len(scores), nil)
	for i, s := range scores {
		if allows(allow, i) {
			t.offer(i, key(m, s))
		}
	}
	return t.result(m)
}

// Within returns the rows allow admits whose score is within threshold
// (Range's rule: at least it under Dot, at most it under L2, never NaN),
// best first, equal scores by lower ID (ids[row]; nil: lower row): a GPU
// range search's host side over read-back scores.
func Within(scores []float32, threshold float32, m Metric, allow, ids []uint64) []Hit {
	limit := key(m, threshold)
	hits := []Hit{}
	for i, s := range scores {
		if k := key(m, s); k >= limit && allows(allow, i) {
			hits = append(hits, Hit{Row: i, Score: k})
		}
	}
	return rankAll(hits, m, ids)
}

// rankAll orders hits holding keys best first, ties by ids as in worse,
// and turns the keys back into scores.
func rankAll(hits []Hit, m Metric, ids []uint64) []Hit {
	t := topK{k: len(hits), heap: true, h: hits, ids: ids}
	return t.result(m)
}
