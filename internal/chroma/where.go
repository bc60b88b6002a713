package chroma

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/umbravec/umbra/meta"
)

// Chroma's metadata is untyped per key: one record may hold "x": 1 and
// another "x": "one". An umbra field has one kind, fixed by its first
// value, so each Chroma key is kept under one umbra field per type, named
// by a prefix: "s:" strings (keyword), "i:" ints, "f:" floats, "b:" bools
// (int 0 or 1), and "as:", "ai:", "af:", "ab:" arrays of each (a tag set
// of the values written canonically). A where clause is compiled into
// filters over those fields: {"x": 1} matches an int 1 or a float 1.0, as
// in Chroma. The metadata itself, as the client wrote it, rides in the
// row's payload and comes back from there byte for byte.

// metaValue is one metadata value as read from JSON.
type metaValue struct {
	kind byte // 's', 'i', 'f', 'b', 'a' (array), 0 for null
	s    string
	i    int64
	f    float64
	b    bool
	arr  []metaValue // elements of an array, all of one scalar kind
	raw  json.RawMessage
}

// parseMetaValue reads a Chroma metadata value: a string, number, bool,
// null, or an array of strings, numbers or bools of one type.
func parseMetaValue(key string, raw json.RawMessage, allowArray bool) (metaValue, error) {
	raw = bytes.TrimSpace(raw)
	v := metaValue{raw: raw}
	if len(raw) == 0 {
		return v, fmt.Errorf("metadata key %q: no value", key)
	}
	switch c := raw[0]; {
	case c == 'n':
		return v, nil
	case c == 't' || c == 'f':
		v.kind, v.b = 'b', c == 't'
	case c == '"':
		v.kind = 's'
		if err := json.Unmarshal(raw, &v.s); err != nil {
			return v, fmt.Errorf("metadata key %q: %v", key, err)
		}
	case c == '[':
		if !allowArray {
			return v, fmt.Errorf("metadata key %q: an array inside an array", key)
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return v, fmt.Errorf("metadata key %q: %v", key, err)
		}
		v.kind = 'a'
		for _, e := range elems {
			ev, err := parseMetaValue(key, e, false)
			if err != nil {
				return v, err
			}
			if ev.kind == 0 {
				return v, fmt.Errorf("metadata key %q: null in an array", key)
			}
			if len(v.arr) > 0 && !sameNumberClass(v.arr[0].kind, ev.kind) {
				return v, fmt.Errorf("Expected metadata list value for key '%s' to contain only one type", key)
			}
			v.arr = append(v.arr, ev)
		}
	case c == '-' || (c >= '0' && c <= '9'):
		n, err := parseNumber(key, raw)
		if err != nil {
			return v, err
		}
		return n, nil
	default:
		return v, fmt.Errorf("Expected metadata value for key '%s' to be a string, int, float, bool, list or None, got %s", key, shorten(raw))
	}
	return v, nil
}

// sameNumberClass says two array element kinds may share an array: ints
// and floats mix (as numbers), other kinds only with themselves.
func sameNumberClass(a, b byte) bool {
	num := func(k byte) bool { return k == 'i' || k == 'f' }
	return a == b || (num(a) && num(b))
}

// parseNumber reads a JSON number: an int when written without a
// fraction or exponent and within int64, else a float.
func parseNumber(key string, raw json.RawMessage) (metaValue, error) {
	s := string(raw)
	v := metaValue{raw: raw}
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			v.kind, v.i = 'i', i
			return v, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return v, fmt.Errorf("metadata key %q: number %s is not a finite float64", key, shorten(raw))
	}
	v.kind, v.f = 'f', f
	return v, nil
}

func shorten(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}

// tagText is a scalar's canonical text, as an array element is kept in a
// tag set.
func (v metaValue) tagText() string {
	switch v.kind {
	case 's':
		return v.s
	case 'i':
		return strconv.FormatInt(v.i, 10)
	case 'f':
		if v.f == math.Trunc(v.f) && math.Abs(v.f) < 1<<53 {
			return strconv.FormatInt(int64(v.f), 10)
		}
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	case 'b':
		return strconv.FormatBool(v.b)
	}
	return ""
}

// arrayPrefix is the field prefix of an array whose elements are of kind k
// (ints and floats share one: their texts are canonical numbers).
func arrayPrefix(k byte) string {
	switch k {
	case 's':
		return "as:"
	case 'i', 'f':
		return "an:"
	case 'b':
		return "ab:"
	}
	return ""
}

// fieldsOf turns a record's metadata (keys to raw values, nulls already
// dropped) into umbra's typed fields.
func fieldsOf(m map[string]json.RawMessage) (meta.Fields, error) {
	if len(m) == 0 {
		return nil, nil
	}
	f := make(meta.Fields, len(m))
	for k, raw := range m {
		v, err := parseMetaValue(k, raw, true)
		if err != nil {
			return nil, err
		}
		switch v.kind {
		case 's':
			f["s:"+k] = meta.KeywordOf(v.s)
		case 'i':
			f["i:"+k] = meta.IntOf(v.i)
		case 'f':
			f["f:"+k] = meta.FloatOf(v.f)
		case 'b':
			f["b:"+k] = meta.IntOf(boolInt(v.b))
		case 'a':
			tags := make([]string, len(v.arr))
			for i, e := range v.arr {
				tags[i] = e.tagText()
			}
			elem := byte('s') // an empty array: a tag set like any other, holding nothing
			if len(v.arr) > 0 {
				elem = v.arr[0].kind
			}
			f[arrayPrefix(elem)+k] = meta.TagsOf(tags...)
		}
	}
	return f, nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// whereError is a where or where_document clause Chroma would refuse.
type whereError struct{ msg string }

func (e *whereError) Error() string { return e.msg }

func whereErr(format string, a ...any) error { return &whereError{fmt.Sprintf(format, a...)} }

// maxWhereDepth and maxWhereTerms bound a clause as meta.ParseWhere bounds
// umbra's own: deep nesting and long lists are refused while read.
const (
	maxWhereDepth = 32
	maxWhereTerms = meta.MaxWhereTerms
)

type whereCompiler struct{ terms int }

func (w *whereCompiler) count(n int) error {
	w.terms += n
	if w.terms > maxWhereTerms {
		return whereErr("Invalid where clause: more than %d terms", maxWhereTerms)
	}
	return nil
}

// compileWhere compiles a Chroma where clause into an umbra filter over
// the typed fields (see fieldsOf).
func compileWhere(raw json.RawMessage) (meta.Filter, error) {
	var w whereCompiler
	return w.clause(raw, 0)
}

// object reads a JSON object keeping its keys' order.
func object(raw json.RawMessage) ([]string, map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if err != nil || t != json.Delim('{') {
		return nil, nil, whereErr("Invalid where clause: expected an object, got %s", shorten(raw))
	}
	var keys []string
	m := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, whereErr("Invalid where clause: %v", err)
		}
		k := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, whereErr("Invalid where clause: %v", err)
		}
		if _, dup := m[k]; !dup {
			keys = append(keys, k)
		}
		m[k] = v
	}
	return keys, m, nil
}

func (w *whereCompiler) clause(raw json.RawMessage, depth int) (meta.Filter, error) {
	if depth > maxWhereDepth {
		return meta.Filter{}, whereErr("Invalid where clause: nested more than %d deep", maxWhereDepth)
	}
	keys, m, err := object(raw)
	if err != nil {
		return meta.Filter{}, err
	}
	if len(keys) == 0 {
		return meta.Filter{}, whereErr("Invalid where clause")
	}
	var parts []meta.Filter
	for _, k := range keys {
		if err := w.count(1); err != nil {
			return meta.Filter{}, err
		}
		v := m[k]
		switch k {
		case "$and", "$or":
			var list []json.RawMessage
			if err := json.Unmarshal(v, &list); err != nil || len(list) == 0 {
				return meta.Filter{}, whereErr("Invalid where clause: %s takes a non-empty list of where clauses", k)
			}
			subs := make([]meta.Filter, 0, len(list))
			for _, s := range list {
				f, err := w.clause(s, depth+1)
				if err != nil {
					return meta.Filter{}, err
				}
				subs = append(subs, f)
			}
			if k == "$and" {
				parts = append(parts, meta.And(subs...))
			} else {
				parts = append(parts, meta.Or(subs...))
			}
		default:
			if strings.HasPrefix(k, "$") {
				return meta.Filter{}, whereErr("Invalid where clause: unknown operator %s", k)
			}
			f, err := w.field(k, v)
			if err != nil {
				return meta.Filter{}, err
			}
			parts = append(parts, f)
		}
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return meta.And(parts...), nil
}

// field compiles the condition on one metadata key: a bare value ($eq) or
// an object of one operator.
func (w *whereCompiler) field(key string, raw json.RawMessage) (meta.Filter, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return w.op(key, "$eq", raw)
	}
	keys, m, err := object(raw)
	if err != nil {
		return meta.Filter{}, err
	}
	if len(keys) != 1 {
		return meta.Filter{}, whereErr("Invalid where clause: the condition on %q takes exactly one operator", key)
	}
	return w.op(key, keys[0], m[keys[0]])
}

func (w *whereCompiler) op(key, op string, raw json.RawMessage) (meta.Filter, error) {
	switch op {
	case "$eq", "$ne":
		v, err := w.scalar(key, op, raw)
		if err != nil {
			return meta.Filter{}, err
		}
		f := eqFilter(key, v)
		if op == "$ne" {
			f = meta.Not(f)
		}
		return f, nil
	case "$gt", "$gte", "$lt", "$lte":
		v, err := w.scalar(key, op, raw)
		if err != nil {
			return meta.Filter{}, err
		}
		if v.kind != 'i' && v.kind != 'f' {
			return meta.Filter{}, whereErr("Invalid where clause: %s on %q takes a number, got %s", op, key, shorten(raw))
		}
		cmp := map[string]func(string, meta.Value) meta.Filter{"$gt": meta.Gt, "$gte": meta.Gte, "$lt": meta.Lt, "$lte": meta.Lte}[op]
		n := numberValue(v)
		return meta.Or(cmp("i:"+key, n), cmp("f:"+key, n)), nil
	case "$in", "$nin":
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return meta.Filter{}, whereErr("Invalid where clause: %s on %q takes a list of values", op, key)
		}
		if err := w.count(len(list)); err != nil {
			return meta.Filter{}, err
		}
		subs := make([]meta.Filter, 0, len(list))
		for _, e := range list {
			v, err := w.scalar(key, op, e)
			if err != nil {
				return meta.Filter{}, err
			}
			subs = append(subs, eqFilter(key, v))
		}
		f := meta.Or(subs...)
		if op == "$nin" {
			f = meta.Not(f)
		}
		return f, nil
	case "$contains", "$not_contains":
		v, err := w.scalar(key, op, raw)
		if err != nil {
			return meta.Filter{}, err
		}
		f := meta.Contains(arrayPrefix(v.kind)+key, v.tagText())
		if op == "$not_contains" {
			f = meta.Not(f)
		}
		return f, nil
	}
	return meta.Filter{}, whereErr("Invalid where clause: unknown operator %s on %q", op, key)
}

// scalar reads an operand: a string, number or bool.
func (w *whereCompiler) scalar(key, op string, raw json.RawMessage) (metaValue, error) {
	v, err := parseMetaValue(key, raw, false)
	if err != nil || v.kind == 0 {
		return v, whereErr("Invalid where clause: %s on %q takes a string, number or bool, got %s", op, key, shorten(raw))
	}
	return v, nil
}

func numberValue(v metaValue) meta.Value {
	if v.kind == 'i' {
		return meta.IntOf(v.i)
	}
	return meta.FloatOf(v.f)
}

// eqFilter matches the records whose key holds v: a number matches an
// int or a float field of that value, as in Chroma.
func eqFilter(key string, v metaValue) meta.Filter {
	switch v.kind {
	case 's':
		return meta.Eq("s:"+key, meta.KeywordOf(v.s))
	case 'b':
		return meta.Eq("b:"+key, meta.IntOf(boolInt(v.b)))
	}
	n := numberValue(v)
	return meta.Or(meta.Eq("i:"+key, n), meta.Eq("f:"+key, n))
}

// mergeMeta applies an update's metadata to a record's: keys set to null
// are removed, the others set. Either may be nil.
func mergeMeta(old, upd map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(old)+len(upd))
	for k, v := range old {
		out[k] = v
	}
	for k, v := range upd {
		// Chroma keeps no empty array: the key is dropped, as a null
		// drops it.
		if isNull(v) || isEmptyArray(v) {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func isEmptyArray(v json.RawMessage) bool {
	b := bytes.TrimSpace(v)
	return len(b) >= 2 && b[0] == '[' && len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }
