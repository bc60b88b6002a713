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

// worse orders hits by key, then by row: a hit is worse than another with a
// larger key, or with the same key and a lower row. It is a total order
// even for non-finite keys, the same one the GPU's select shader uses: -0
// and +0 are one key, and NaN (a dot product of huge finite vectors can
// overflow to +Inf + -Inf) is worse than every number, NaNs ranked by row.
func worse(a, b Hit) bool {
	if a.Score < b.Score {
		return true
	}
	if a.Score > b.Score {
		return false
	}
	if an, bn := a.Score != a.Score, b.Score != b.Score; an != bn {
		return an
	}
	return a.Row > b.Row
}

// Worse reports whether hit a ranks after hit b under m: the ordering rule
// every path of the engine returns its hits in.
func Worse(a, b Hit, m Metric) bool {
	return worse(Hit{Row: a.Row, Score: key(m, a.Score)}, Hit{Row: b.Row, Score: key(m, b.Score)})
}

// topK keeps the k best keys seen. Until k hits arrive it only appends;
// when it fills it becomes a min-heap with the worst kept hit at h[0], so
// a rejected candidate costs one comparison.
type topK struct {
	k    int
	heap bool
	h    []Hit
}

func newTopK(k, expect int) topK {
	// Preallocation is capped: a batch holds one of these per query per
	// worker, and a huge k need not cost memory until hits arrive.
	return topK{k: k, h: make([]Hit, 0, max(0, min(k, expect, 4096)))}
}

func (t *topK) offer(row int, k float32) {
	if !t.heap {
		t.h = append(t.h, Hit{Row: row, Score: k})
		if len(t.h) == t.k {
			t.heapify()
		}
		return
	}
	if worse(Hit{Row: row, Score: k}, t.h[0]) {
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
		if k < w.Score || worse(Hit{Row: base + i, Score: k}, w) {
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
	h := t.h
	n := len(h)
	x := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && worse(h[r], h[c]) {
			c = r
		}
		if !worse(h[c], x) {
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
	h := t.h
	slices.SortFunc(h, func(a, b Hit) int {
		switch {
		case worse(b, a):
			return -1
		case worse(a, b):
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
	t := newTopK(k, len(scores))
	for i, s := range scores {
		if allows(allow, i) {
			t.offer(i, key(m, s))
		}
	}
	return t.result(m)
}

// Within returns the rows allow admits whose score is within threshold
// (Range's rule: at least it under Dot, at most it under L2, never NaN),
// best first: a GPU range search's host side over read-back scores.
func Within(scores []float32, threshold float32, m Metric, allow []uint64) []Hit {
	limit := key(m, threshold)
	hits := []Hit{}
	for i, s := range scores {
		if k := key(m, s); k >= limit && allows(allow, i) {
			hits = append(hits, Hit{Row: i, Score: k})
		}
	}
	return rankAll(hits, m)
}

// rankAll orders hits holding keys best first and turns the keys back into
// scores.
func rankAll(hits []Hit, m Metric) []Hit {
	t := topK{k: len(hits), heap: true, h: hits}
	return t.result(m)
}
