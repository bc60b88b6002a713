package chroma

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
)

// docIndex holds a collection's documents by row ID and, for each byte
// trigram, the sorted list of rows whose document contains it. A
// $contains of a string of three bytes or more intersects the lists of
// its trigrams (rarest first) and verifies the few candidates left; a
// shorter string, and $regex, read every document (a known limit,
// docs/chroma.md). Its owner serialises access: writes under the
// collection's write lock, reads under its read lock.
type docIndex struct {
	docs  map[uint64]string
	grams map[uint32][]uint64
}

func newDocIndex() *docIndex {
	return &docIndex{docs: map[uint64]string{}, grams: map[uint32][]uint64{}}
}

// trigrams calls f once for each distinct trigram of s.
func trigrams(s string, f func(uint32)) {
	if len(s) < 3 {
		return
	}
	seen := make(map[uint32]struct{}, len(s))
	for i := 0; i+3 <= len(s); i++ {
		g := uint32(s[i])<<16 | uint32(s[i+1])<<8 | uint32(s[i+2])
		if _, ok := seen[g]; !ok {
			seen[g] = struct{}{}
			f(g)
		}
	}
}

// set makes id's document doc (nil: none).
func (x *docIndex) set(id uint64, doc *string) {
	if old, ok := x.docs[id]; ok {
		if doc != nil && *doc == old {
			return
		}
		x.remove(id)
	}
	if doc == nil {
		return
	}
	x.docs[id] = *doc
	trigrams(*doc, func(g uint32) {
		p := x.grams[g]
		if n := len(p); n == 0 || p[n-1] < id {
			x.grams[g] = append(p, id)
			return
		}
		i, _ := slices.BinarySearch(p, id)
		x.grams[g] = slices.Insert(p, i, id)
	})
}

// remove drops id's document.
func (x *docIndex) remove(id uint64) {
	old, ok := x.docs[id]
	if !ok {
		return
	}
	delete(x.docs, id)
	trigrams(old, func(g uint32) {
		p := x.grams[g]
		if i, found := slices.BinarySearch(p, id); found {
			p = slices.Delete(p, i, i+1)
		}
		if len(p) == 0 {
			delete(x.grams, g)
		} else {
			x.grams[g] = p
		}
	})
}

// all is every row with a document, sorted.
func (x *docIndex) all() []uint64 {
	out := make([]uint64, 0, len(x.docs))
	for id := range x.docs {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// contains is the sorted rows whose document contains s.
func (x *docIndex) contains(s string) []uint64 {
	if len(s) < 3 {
		return x.scan(func(d string) bool { return strings.Contains(d, s) })
	}
	var lists [][]uint64
	missing := false
	trigrams(s, func(g uint32) {
		p, ok := x.grams[g]
		if !ok {
			missing = true
		}
		lists = append(lists, p)
	})
	if missing {
		return nil
	}
	slices.SortFunc(lists, func(a, b []uint64) int { return len(a) - len(b) })
	cand := slices.Clone(lists[0])
	for _, l := range lists[1:] {
		if len(cand) == 0 {
			break
		}
		cand = intersect(cand, l)
	}
	out := cand[:0]
	for _, id := range cand {
		if strings.Contains(x.docs[id], s) {
			out = append(out, id)
		}
	}
	return out
}

// matching is the sorted rows whose document re matches: when every match
// begins with a literal of three bytes or more, only the documents the
// trigram index says contain it are read; otherwise every one is.
func (x *docIndex) matching(re *regexp.Regexp) []uint64 {
	prefix, _ := re.LiteralPrefix()
	if len(prefix) < 3 {
		return x.scan(re.MatchString)
	}
	cand := x.contains(prefix)
	out := cand[:0]
	for _, id := range cand {
		if re.MatchString(x.docs[id]) {
			out = append(out, id)
		}
	}
	return out
}

// scan is the sorted rows whose document keep accepts, reading every one.
func (x *docIndex) scan(keep func(string) bool) []uint64 {
	var out []uint64
	for id, d := range x.docs {
		if keep(d) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// intersect is the sorted IDs in both a and b (sorted).
func intersect(a, b []uint64) []uint64 {
	out := a[:0:0]
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// union is the sorted IDs in a or b.
func union(a, b []uint64) []uint64 {
	out := make([]uint64, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] > b[j]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// minus is the sorted IDs in a and not in b.
func minus(a, b []uint64) []uint64 {
	out := make([]uint64, 0, len(a))
	j := 0
	for _, id := range a {
		for j < len(b) && b[j] < id {
			j++
		}
		if j < len(b) && b[j] == id {
			continue
		}
		out = append(out, id)
	}
	return out
}

// docSet is the rows a where_document clause selects: ids, or (not) every
// row of the collection but ids. A negation selects the rows whose
// document does not match and the rows without a document, as Chroma's
// does; the index knows only the rows with one, so it answers the
// complement.
type docSet struct {
	ids []uint64
	not bool
}

func (a docSet) and(b docSet) docSet {
	switch {
	case !a.not && !b.not:
		return docSet{ids: intersect(a.ids, b.ids)}
	case !a.not:
		return docSet{ids: minus(a.ids, b.ids)}
	case !b.not:
		return docSet{ids: minus(b.ids, a.ids)}
	}
	return docSet{ids: union(a.ids, b.ids), not: true}
}

func (a docSet) or(b docSet) docSet {
	switch {
	case !a.not && !b.not:
		return docSet{ids: union(a.ids, b.ids)}
	case !a.not:
		return docSet{ids: minus(b.ids, a.ids), not: true}
	case !b.not:
		return docSet{ids: minus(a.ids, b.ids), not: true}
	}
	return docSet{ids: intersect(a.ids, b.ids), not: true}
}

// resolve is the set as sorted IDs, given every row's (sorted).
func (a docSet) resolve(all []uint64) []uint64 {
	if !a.not {
		return a.ids
	}
	return minus(all, a.ids)
}

// eval compiles a where_document clause ({"$contains": s},
// {"$not_contains": s}, {"$regex": re}, {"$not_regex": re}, {"$and": […]},
// {"$or": […]}) into the rows it selects.
func (x *docIndex) eval(raw json.RawMessage, depth int) (docSet, error) {
	if depth > maxWhereDepth {
		return docSet{}, whereErr("Invalid where_document clause: nested more than %d deep", maxWhereDepth)
	}
	keys, m, err := object(raw)
	if err != nil {
		return docSet{}, whereErr("Invalid where_document clause: expected an object")
	}
	if len(keys) != 1 {
		return docSet{}, whereErr("Invalid where_document clause: expected exactly one operator, got %d", len(keys))
	}
	k, v := keys[0], bytes.TrimSpace(m[keys[0]])
	switch k {
	case "$and", "$or":
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil || len(list) == 0 {
			return docSet{}, whereErr("Invalid where_document clause: %s takes a non-empty list of clauses", k)
		}
		var acc docSet
		for i, s := range list {
			r, err := x.eval(s, depth+1)
			if err != nil {
				return docSet{}, err
			}
			switch {
			case i == 0:
				acc = r
			case k == "$and":
				acc = acc.and(r)
			default:
				acc = acc.or(r)
			}
		}
		return acc, nil
	case "$contains", "$not_contains", "$regex", "$not_regex":
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return docSet{}, whereErr("Invalid where_document clause: %s takes a string", k)
		}
		var hit []uint64
		if k == "$contains" || k == "$not_contains" {
			hit = x.contains(s)
		} else {
			re, err := regexp.Compile(s)
			if err != nil {
				return docSet{}, whereErr("Invalid where_document clause: %s: %v", k, err)
			}
			hit = x.matching(re)
		}
		return docSet{ids: hit, not: strings.HasPrefix(k, "$not_")}, nil
	}
	return docSet{}, whereErr("Invalid where_document clause: unknown operator %s", k)
}
