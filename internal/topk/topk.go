// Package topk is the one ordering rule of every path and the bounded
// selection built on it: which of two hits ranks first (by score under the
// metric, equal scores by lower ID, -0 == +0, NaN worst — the rule the
// GPU's shaders follow on the device), and a heap that keeps the k best of
// a stream of scores. The CPU backend (package fallback), the exact search
// of compressed rows and the GPU backend's host-side selection all select
// through it, so their answers agree bit for bit.
package topk

import (
	"slices"

	"github.com/umbravec/umbra/internal/core"
)

// Selection works on keys, not scores: a key is the score for Dot and its
// negation for L2, so "larger key is better" everywhere and the hot loops
// carry no metric branch. Negation is exact, so ties survive it.

// ToKeys turns scores into keys in place.
func ToKeys(m core.Metric, v []float32) {
	if m == core.L2 {
		for i := range v {
			v[i] = -v[i]
		}
	}
}

// Key is score as a key under m.
func Key(m core.Metric, score float32) float32 {
	if m == core.L2 {
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
func worse(a, b core.Hit, ids []uint64) bool {
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
// answer, or rows whose IDs increase with the row). Cosine ranks as Dot.
func Worse(a, b core.Hit, m core.Metric, ids []uint64) bool {
	return worse(core.Hit{Row: a.Row, Score: Key(m, a.Score)}, core.Hit{Row: b.Row, Score: Key(m, b.Score)}, ids)
}

// Tied reports whether scores a and b are one under m's order (-0 == +0,
// NaN == NaN): hits holding them are ranked by ID alone.
func Tied(a, b float32, m core.Metric) bool { return sameKey(Key(m, a), Key(m, b)) }

// Rerank takes hits ranked best first by score, equal scores in any
// order (a device ranks them by row), and puts each run of equal scores
// in Worse's order under ids. Only such runs move, so hits without ties
// cost one pass.
func Rerank(hits []core.Hit, m core.Metric, ids []uint64) {
	for i := 0; i < len(hits); {
		j := i + 1
		for j < len(hits) && Tied(hits[i].Score, hits[j].Score, m) {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(hits[i:j], func(a, b core.Hit) int { return order(a, b, m, ids) })
		}
		i = j
	}
}

// order is Worse as a comparison for sorting best first.
func order(a, b core.Hit, m core.Metric, ids []uint64) int {
	switch {
	case Worse(b, a, m, ids):
		return -1
	case Worse(a, b, m, ids):
		return 1
	}
	return 0
}

// Heap keeps the k best keys seen. Until k hits arrive it only appends;
// when it fills it becomes a min-heap with the worst kept hit at the top,
// so a rejected candidate costs one comparison. Ties go by ids, as in
// Worse. The zero value keeps nothing; New makes one.
type Heap struct {
	k    int
	heap bool
	h    []core.Hit
	ids  []uint64
}

// New returns a heap that keeps the k best of about expect offers (a
// hint), ties going to the lower ids[row] (nil: the lower row).
func New(k, expect int, ids []uint64) Heap {
	// Preallocation is capped: a batch holds one of these per query per
	// worker, and a huge k need not cost memory until hits arrive.
	return Heap{k: k, h: make([]core.Hit, 0, max(0, min(k, expect, 4096))), ids: ids}
}

// Full reports whether k hits are kept: from then on Worst is the key an
// offer must beat.
func (t *Heap) Full() bool { return t.heap }

// Len is how many hits are kept.
func (t *Heap) Len() int { return len(t.h) }

// Worst is the worst kept key; the heap holds at least one hit.
func (t *Heap) Worst() float32 { return t.h[0].Score }

// Offer offers key k for row.
func (t *Heap) Offer(row int, k float32) {
	if !t.heap {
		t.h = append(t.h, core.Hit{Row: row, Score: k})
		if len(t.h) == t.k {
			t.heapify()
		}
		return
	}
	if worse(core.Hit{Row: row, Score: k}, t.h[0], t.ids) {
		return
	}
	t.h[0] = core.Hit{Row: row, Score: k}
	t.down(0)
}

// Allows reports whether the row bitmap allow (nil: every row) admits row r.
func Allows(allow []uint64, r int) bool {
	return allow == nil || allow[r>>6]&(1<<(uint(r)&63)) != 0
}

// OfferAllowed offers keys[i] for row base+i where allow (a row bitmap, nil
// for every row) has the row's bit set.
func (t *Heap) OfferAllowed(keys []float32, base int, allow []uint64) {
	if allow == nil {
		t.OfferKeys(keys, base)
		return
	}
	for i, k := range keys {
		if Allows(allow, base+i) {
			t.Offer(base+i, k)
		}
	}
}

// OfferKeys offers keys[i] for row base+i.
func (t *Heap) OfferKeys(keys []float32, base int) {
	i := 0
	for ; i < len(keys) && !t.heap; i++ {
		t.Offer(base+i, keys[i])
	}
	if i == len(keys) {
		return
	}
	w := t.h[0]
	for ; i < len(keys); i++ {
		k := keys[i]
		if k < w.Score || worse(core.Hit{Row: base + i, Score: k}, w, t.ids) {
			continue
		}
		t.h[0] = core.Hit{Row: base + i, Score: k}
		t.down(0)
		w = t.h[0]
	}
}

func (t *Heap) heapify() {
	t.heap = true
	for i := len(t.h)/2 - 1; i >= 0; i-- {
		t.down(i)
	}
}

func (t *Heap) down(i int) {
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

// Merge offers every hit of o (already keys) to t.
func (t *Heap) Merge(o *Heap) {
	for _, h := range o.h {
		t.Offer(h.Row, h.Score)
	}
}

// Result returns the kept hits best first, with keys turned back into
// scores. t is unusable afterwards.
func (t *Heap) Result(m core.Metric) []core.Hit {
	h, ids := t.h, t.ids
	slices.SortFunc(h, func(a, b core.Hit) int {
		switch {
		case worse(b, a, ids):
			return -1
		case worse(a, b, ids):
			return 1
		}
		return 0
	})
	for i := range h {
		h[i].Score = Key(m, h[i].Score)
	}
	t.h = nil
	return h
}

// SelectTopK picks the k best of scores (Row is the index in scores), best
// first, equal scores broken by the lower index. k <= 0 or an unknown
// metric yields an empty result.
func SelectTopK(scores []float32, k int, m core.Metric) []core.Hit {
	return SelectAllowed(scores, k, m, nil)
}

// SelectAllowed is SelectTopK over the rows the bitmap allow admits (bit r
// of word r/64; nil admits every row): a GPU search's host selection of
// read-back scores.
func SelectAllowed(scores []float32, k int, m core.Metric, allow []uint64) []core.Hit {
	if k <= 0 || m != core.Cosine && m != core.Dot && m != core.L2 {
		return []core.Hit{}
	}
	t := New(k, len(scores), nil)
	for i, s := range scores {
		if Allows(allow, i) {
			t.Offer(i, Key(m, s))
		}
	}
	return t.Result(m)
}

// Within returns the rows allow admits whose score is within threshold
// (Range's rule: at least it under Dot, at most it under L2, never NaN),
// best first, equal scores by lower ID (ids[row]; nil: lower row): a GPU
// range search's host side over read-back scores.
func Within(scores []float32, threshold float32, m core.Metric, allow, ids []uint64) []core.Hit {
	limit := Key(m, threshold)
	hits := []core.Hit{}
	for i, s := range scores {
		if k := Key(m, s); k >= limit && Allows(allow, i) {
			hits = append(hits, core.Hit{Row: i, Score: k})
		}
	}
	return RankAll(hits, m, ids)
}

// RankAll orders hits holding keys best first, ties by ids as in Worse,
// and turns the keys back into scores.
func RankAll(hits []core.Hit, m core.Metric, ids []uint64) []core.Hit {
	t := Heap{k: len(hits), heap: true, h: hits, ids: ids}
	return t.Result(m)
}

// Before reports whether a hit of score as and ID aid ranks before one of
// score bs and ID bid under m: Worse's rule, for hits that carry their IDs
// (a merge of shards' answers).
func Before(m core.Metric, as float32, aid uint64, bs float32, bid uint64) bool {
	return Worse(core.Hit{Row: 1, Score: bs}, core.Hit{Row: 0, Score: as}, m, []uint64{aid, bid})
}
