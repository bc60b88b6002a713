package metaindex

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/umbravec/umbra/meta"
)

// What the index reads of a meta.Value beyond its accessors.

// intOf is an Int value's integer, or a Time value's Unix nanoseconds.
func intOf(v meta.Value) int64 {
	if v.Kind() == meta.Time {
		return v.Time().UnixNano()
	}
	return v.Int()
}

// badTime reports a Time value out of the int64-nanosecond range (its
// Time is the zero time; no instant in range is).
func badTime(v meta.Value) bool { return v.Kind() == meta.Time && v.Time().IsZero() }

// timeNanos is a Time value of n Unix nanoseconds.
func timeNanos(n int64) meta.Value { return meta.TimeOf(time.Unix(0, n)) }

// tagsValue is the Tags value of ts, sorted and without duplicates already.
func tagsValue(ts []string) meta.Value { return meta.TagsOf(ts...) }

// validKind reports whether k is one of the five kinds.
func validKind(k meta.Kind) bool { return k >= meta.Keyword && k <= meta.Tags }

// numeric reports whether k orders as a number.
func numeric(k meta.Kind) bool { return k == meta.Int || k == meta.Float || k == meta.Time }

// metaError is an error of the index: its message, and the meta sentinel
// it wraps.
type metaError struct {
	kind error
	msg  string
}

func (e *metaError) Error() string { return e.msg }
func (e *metaError) Unwrap() error { return e.kind }

// invalidf is an error wrapping meta.ErrInvalid.
func invalidf(format string, a ...any) error {
	return &metaError{meta.ErrInvalid, fmt.Sprintf(format, a...)}
}

// tooLargef is an error wrapping meta.ErrTooLarge.
func tooLargef(format string, a ...any) error {
	return &metaError{meta.ErrTooLarge, fmt.Sprintf(format, a...)}
}

var sprintf = fmt.Sprintf

func quote(s string) string { return strconv.Quote(s) }

// checkName validates a field name (meta's rule).
func checkName(name string, lim meta.Limits) error {
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

// names are f's field names, sorted.
func names(f meta.Fields) []string {
	out := make([]string, 0, len(f))
	for k := range f {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
