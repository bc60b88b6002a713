package meta

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrInvalid is wrapped by every error about bad input: a malformed
// document or encoding, a value of the wrong kind, an unknown field.
var ErrInvalid = errors.New("invalid metadata")

// ErrTooLarge is wrapped by every error about a limit (see Limits).
var ErrTooLarge = errors.New("metadata over a limit")

// Kind is the type of a field. The zero Kind is invalid.
type Kind uint8

// The kinds of a field.
const (
	Keyword Kind = iota + 1 // a string, compared for equality
	Int                     // an int64
	Float                   // a finite float64 (-0 is stored as 0)
	Time                    // an instant, stored as int64 Unix nanoseconds
	Tags                    // a set of strings
)

var kindNames = [...]string{Keyword: "keyword", Int: "int", Float: "float", Time: "time", Tags: "tags"}

// String is the kind's name: "keyword", "int", "float", "time" or "tags".
func (k Kind) String() string {
	if k >= Keyword && k <= Tags {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k >= Keyword && k <= Tags }

// numeric says values of the kind are ordered (range operators apply).
func (k Kind) numeric() bool { return k == Int || k == Float || k == Time }

// Value is one typed field value. The zero Value has no kind and is refused
// wherever a value is validated. Values are immutable.
//
// A Value is 40 bytes: a filter's $in list holds one per operand, so its
// size sets what parsing a filter costs per byte of input (ParseWhere).
type Value struct {
	kind Kind
	bad  bool      // a Time out of the int64-nanosecond range
	i    int64     // Int; Time as Unix nanoseconds; Float as its IEEE 754 bits
	s    string    // Keyword
	tags *[]string // Tags: sorted, no duplicates; never changed after TagsOf
}

// flt is a Float value's number.
func (v Value) flt() float64 { return math.Float64frombits(uint64(v.i)) }

// tagList is a Tags value's set (nil for another kind), not to be changed.
func (v Value) tagList() []string {
	if v.tags == nil {
		return nil
	}
	return *v.tags
}

// tagsValue is the Tags value of ts, sorted and without duplicates already.
func tagsValue(ts []string) Value { return Value{kind: Tags, tags: &ts} }

// KeywordOf is a Keyword value.
func KeywordOf(s string) Value { return Value{kind: Keyword, s: s} }

// IntOf is an Int value.
func IntOf(i int64) Value { return Value{kind: Int, i: i} }

// FloatOf is a Float value; -0 becomes 0. NaN and ±Inf are refused where
// the value is validated (Fields.Check, and wherever an index takes it).
func FloatOf(f float64) Value {
	if f == 0 {
		f = 0 // -0 → +0
	}
	return Value{kind: Float, i: int64(math.Float64bits(f))}
}

// timeMin and timeMax bound the instants an int64 of Unix nanoseconds holds.
var (
	timeMin = time.Unix(0, math.MinInt64)
	timeMax = time.Unix(0, math.MaxInt64)
)

// TimeOf is a Time value, kept as Unix nanoseconds (the location and the
// monotonic reading are dropped). An instant outside 1677-09-21 to
// 2262-04-11 (UTC), which int64 nanoseconds cannot hold, is refused where
// the value is validated.
func TimeOf(t time.Time) Value {
	if t.Before(timeMin) || t.After(timeMax) {
		return Value{kind: Time, bad: true}
	}
	return Value{kind: Time, i: t.UnixNano()}
}

// timeNanos is a Time value of n Unix nanoseconds.
func timeNanos(n int64) Value { return Value{kind: Time, i: n} }

// TagsOf is a Tags value: the set of tags, sorted, without duplicates. No
// tags is an empty set, which is a value (a row can have the field with no
// tags) and differs from not having the field.
func TagsOf(tags ...string) Value {
	t := slices.Clone(tags)
	slices.Sort(t)
	t = slices.Compact(t)
	if t == nil {
		t = []string{}
	}
	return tagsValue(t)
}

// Kind is the value's kind, 0 for the zero Value.
func (v Value) Kind() Kind { return v.kind }

// Str is a Keyword value's string ("" for another kind).
func (v Value) Str() string { return v.s }

// Int is an Int value's integer (0 for another kind).
func (v Value) Int() int64 {
	if v.kind != Int {
		return 0
	}
	return v.i
}

// Float is a Float value's number (0 for another kind).
func (v Value) Float() float64 {
	if v.kind != Float {
		return 0
	}
	return v.flt()
}

// Time is a Time value's instant in UTC (the zero time for another kind).
func (v Value) Time() time.Time {
	if v.kind != Time || v.bad {
		return time.Time{}
	}
	return time.Unix(0, v.i).UTC()
}

// Tags is a copy of a Tags value's set, sorted (nil for another kind).
func (v Value) Tags() []string { return slices.Clone(v.tagList()) }

// Equal says v and w are the same value of the same kind. Float values
// compare as numbers (FloatOf(-0) equals FloatOf(0)).
func (v Value) Equal(w Value) bool {
	if v.kind != w.kind || v.bad != w.bad {
		return false
	}
	switch v.kind {
	case Keyword:
		return v.s == w.s
	case Int, Time:
		return v.i == w.i
	case Float:
		x, y := v.flt(), w.flt()
		return x == y || (x != x && y != y)
	case Tags:
		return slices.Equal(v.tagList(), w.tagList())
	}
	return true
}

// String is the value as it is written in JSON.
func (v Value) String() string {
	if !v.kind.valid() {
		return "<no value>"
	}
	if v.bad {
		return `{"$time":"<out of range>"}`
	}
	return string(appendValueJSON(nil, v))
}

// Fields is one row's metadata: field name to value. A nil or empty Fields
// is a row without metadata.
type Fields map[string]Value

// Equal says f and g hold the same fields with equal values (nil and empty
// are equal).
func (f Fields) Equal(g Fields) bool {
	if len(f) != len(g) {
		return false
	}
	for k, v := range f {
		w, ok := g[k]
		if !ok || !v.Equal(w) {
			return false
		}
	}
	return true
}

// names is f's field names, sorted.
func (f Fields) names() []string {
	ns := make([]string, 0, len(f))
	for k := range f {
		ns = append(ns, k)
	}
	slices.Sort(ns)
	return ns
}

// Limits bound what one row, and an index (engine.Index, a collection's shard), may hold. A zero field takes its
// default (WithDefaults); a negative one is treated as its default too.
type Limits struct {
	MaxFields      int // fields per row (default 64)
	MaxNameBytes   int // bytes of a field name (default 256)
	MaxStringBytes int // bytes of a keyword or of one tag (default 4096)
	MaxTags        int // tags per row (default 1024)
	MaxRowBytes    int // a row's binary encoding (default 64 KiB)
	MaxDistinct    int // distinct keyword or tag values per field in an index (default 1<<20)
	MaxSchema      int // distinct field names in an index or a stored schema (default 1024)
}

// The default limits (Limits.WithDefaults gives them to a program).
const (
	defaultMaxFields      = 64
	defaultMaxNameBytes   = 256
	defaultMaxStringBytes = 4096
	defaultMaxTags        = 1024
	defaultMaxRowBytes    = 64 << 10
	defaultMaxDistinct    = 1 << 20
	defaultMaxSchema      = 1024
)

// WithDefaults is l with every zero (or negative) field set to its default.
func (l Limits) WithDefaults() Limits {
	def := func(p *int, d int) {
		if *p <= 0 {
			*p = d
		}
	}
	def(&l.MaxFields, defaultMaxFields)
	def(&l.MaxNameBytes, defaultMaxNameBytes)
	def(&l.MaxStringBytes, defaultMaxStringBytes)
	def(&l.MaxTags, defaultMaxTags)
	def(&l.MaxRowBytes, defaultMaxRowBytes)
	def(&l.MaxDistinct, defaultMaxDistinct)
	def(&l.MaxSchema, defaultMaxSchema)
	return l
}

// metaError is an error of this package: its message, and the sentinel it
// wraps.
type metaError struct {
	kind error
	msg  string
}

func (e *metaError) Error() string { return e.msg }
func (e *metaError) Unwrap() error { return e.kind }

// invalidf is an error wrapping ErrInvalid.
func invalidf(format string, a ...any) error {
	return &metaError{ErrInvalid, fmt.Sprintf(format, a...)}
}

// tooLargef is an error wrapping ErrTooLarge.
func tooLargef(format string, a ...any) error {
	return &metaError{ErrTooLarge, fmt.Sprintf(format, a...)}
}

// checkName validates a field name.
func checkName(name string, lim Limits) error {
	switch {
	case name == "":
		return invalidf("empty field name")
	case !utf8.ValidString(name):
		return invalidf("field name %q is not valid UTF-8", name)
	case strings.HasPrefix(name, "$"):
		return invalidf("field name %q starts with '$' (reserved for operators)", name)
	case len(name) > lim.MaxNameBytes:
		return tooLargef("field name %.40q... is %d bytes, over the limit of %d", name, len(name), lim.MaxNameBytes)
	}
	return nil
}

// checkString validates a keyword or a tag of field name.
func checkString(name, what, s string, lim Limits) error {
	if !utf8.ValidString(s) {
		return invalidf("field %q: %s %q is not valid UTF-8", name, what, s)
	}
	if len(s) > lim.MaxStringBytes {
		return tooLargef("field %q: %s of %d bytes, over the limit of %d", name, what, len(s), lim.MaxStringBytes)
	}
	return nil
}

// checkValue validates field name's value v against lim.
func checkValue(name string, v Value, lim Limits) error {
	switch v.kind {
	case Keyword:
		return checkString(name, "keyword", v.s, lim)
	case Int:
	case Float:
		if f := v.flt(); math.IsNaN(f) || math.IsInf(f, 0) {
			return invalidf("field %q: float %v is not finite", name, f)
		}
	case Time:
		if v.bad {
			return invalidf("field %q: time outside 1677-09-21..2262-04-11 (int64 Unix nanoseconds)", name)
		}
	case Tags:
		if len(v.tagList()) > lim.MaxTags {
			return tooLargef("field %q: %d tags, over the limit of %d", name, len(v.tagList()), lim.MaxTags)
		}
		for _, t := range v.tagList() {
			if err := checkString(name, "tag", t, lim); err != nil {
				return err
			}
		}
	default:
		return invalidf("field %q: no value (the zero Value)", name)
	}
	return nil
}

// Check validates f on its own against lim (zero fields of lim take their
// defaults): names, values and the size of its binary encoding. An index
// also checks the kinds against its schema.
func (f Fields) Check(lim Limits) error {
	return f.check(lim.WithDefaults())
}

func (f Fields) check(lim Limits) error {
	if len(f) > lim.MaxFields {
		return tooLargef("%d fields, over the limit of %d", len(f), lim.MaxFields)
	}
	size := uvarintLen(uint64(len(f)))
	for name, v := range f {
		if err := checkName(name, lim); err != nil {
			return err
		}
		if err := checkValue(name, v, lim); err != nil {
			return err
		}
		size += fieldLen(name, v)
	}
	if len(f) > 0 && size > lim.MaxRowBytes {
		return tooLargef("row encodes to %d bytes, over the limit of %d", size, lim.MaxRowBytes)
	}
	return nil
}
