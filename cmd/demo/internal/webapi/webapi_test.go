package webapi

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// goValue is a JavaScript value made of Go ones: undefined{}, nil (null),
// bool, float64, string, []float32 (a Float32Array), []float64 (a
// Float64Array), []any (an Array), map[string]any (an Object),
// func() (a function).
type goValue struct{ x any }

type undefined struct{}

type bigint struct{}

// typed is a goValue whose typed arrays give their numbers at once
// (webapi.Floats), as the page's program reads a Float32Array.
type typed struct{ goValue }

func (v typed) Floats() ([]float64, bool) {
	switch x := v.x.(type) {
	case []float32:
		out := make([]float64, len(x))
		for i, f := range x {
			out[i] = float64(f)
		}
		return out, true
	case []float64:
		return x, true
	}
	return nil, false
}

func (v goValue) Type() Type {
	switch v.x.(type) {
	case undefined:
		return Undefined
	case nil:
		return Null
	case bool:
		return Boolean
	case float64:
		return Number
	case string:
		return String
	case func():
		return Function
	case bigint:
		return BigInt
	}
	return Object
}

func (v goValue) Float() float64 { return v.x.(float64) }

func (v goValue) Class() string {
	switch v.x.(type) {
	case []float32:
		return "Float32Array"
	case []float64:
		return "Float64Array"
	case []any:
		return "Array"
	}
	return "Object"
}

func (v goValue) Length() int {
	switch x := v.x.(type) {
	case []float32:
		return len(x)
	case []float64:
		return len(x)
	case []any:
		return len(x)
	}
	panic("Length of a non-array")
}

func (v goValue) Index(i int) Value {
	switch x := v.x.(type) {
	case []float32:
		return goValue{float64(x[i])}
	case []float64:
		return goValue{x[i]}
	case []any:
		return goValue{x[i]}
	}
	panic("Index of a non-array")
}

func args(xs ...any) []Value {
	out := make([]Value, len(xs))
	for i, x := range xs {
		out[i] = goValue{x}
	}
	return out
}

// refused checks that err is an *Error of kind whose message holds each
// of want.
func refused(t *testing.T, what string, err error, kind string, want ...string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Errorf("%s: got %v, want a %s", what, err, kind)
		return
	}
	if e.Kind != kind {
		t.Errorf("%s: a %s (%s), want a %s", what, e.Kind, e.Msg, kind)
	}
	for _, w := range want {
		if !strings.Contains(e.Msg, w) {
			t.Errorf("%s: %q does not say %q", what, e.Msg, w)
		}
	}
}

func TestRowRefusesBadArguments(t *testing.T) {
	const rows = 20
	for _, c := range []struct {
		name string
		args []Value
		kind string
		want []string
	}{
		{"no argument", args(), "TypeError", []string{"umbra.row(i) takes 1 argument, got 0"}},
		{"two", args(1.0, 2.0), "TypeError", []string{"takes 1 argument, got 2"}},
		{"undefined", args(undefined{}), "TypeError", []string{"i must be a number, got undefined"}},
		{"null", args(nil), "TypeError", []string{"got null"}},
		{"a string", args("3"), "TypeError", []string{"got a string"}},
		{"a boolean", args(true), "TypeError", []string{"got a boolean"}},
		{"an object", args(map[string]any{}), "TypeError", []string{"got an Object"}},
		{"an array", args([]any{1.0}), "TypeError", []string{"got an Array of 1"}},
		{"NaN", args(math.NaN()), "TypeError", []string{"i must be an integer, got NaN"}},
		{"Infinity", args(math.Inf(1)), "TypeError", []string{"got Infinity"}},
		{"a fraction", args(1.5), "TypeError", []string{"got 1.5"}},
		{"a BigInt", args(bigint{}), "TypeError", []string{"got a BigInt"}},
		{"negative", args(-1.0), "RangeError", []string{"row -1 is out of range: the index has 20 rows (0 to 19)"}},
		{"one past", args(20.0), "RangeError", []string{"row 20 is out of range"}},
		{"far past", args(1e300), "RangeError", []string{"row 1e+300 is out of range"}},
		{"2**53", args(float64(1 << 53)), "RangeError", []string{"row 9007199254740992 is out of range"}},
	} {
		_, err := Row(c.args, rows)
		refused(t, c.name, err, c.kind, c.want...)
	}
	for _, i := range []float64{0, 7, rows - 1} {
		got, err := Row(args(i), rows)
		if err != nil || got != int(i) {
			t.Errorf("row %v: %d, %v", i, got, err)
		}
	}
	if _, err := Row(args(0.0), 0); err == nil {
		t.Error("row 0 of an empty index was not refused")
	}
}

func TestSearchRefusesBadArguments(t *testing.T) {
	const dim = 4
	q := []float32{1, 2, 3, 4}
	for _, c := range []struct {
		name string
		args []Value
		kind string
		want []string
	}{
		{"no argument", args(), "TypeError", []string{"umbra.search(query, k) takes 2 arguments, got 0"}},
		{"no k", args(q), "TypeError", []string{"got 1"}},
		{"three", args(q, 1.0, 2.0), "TypeError", []string{"got 3"}},
		{"null query", args(nil, 10.0), "TypeError", []string{"query must be a Float32Array, Float64Array or Array of 4 numbers, got null"}},
		{"undefined query", args(undefined{}, 10.0), "TypeError", []string{"got undefined"}},
		{"a string query", args("abcd", 10.0), "TypeError", []string{"got a string"}},
		{"a number query", args(3.0, 10.0), "TypeError", []string{"got 3"}},
		{"an object query", args(map[string]any{"length": 4.0}, 10.0), "TypeError", []string{"got an Object"}},
		{"a function query", args(func() {}, 10.0), "TypeError", []string{"got a function"}},
		{"short", args([]float32{1, 2, 3}, 10.0), "RangeError", []string{"query has 3 numbers; the index's vectors have 4"}},
		{"long", args(make([]float64, 5), 10.0), "RangeError", []string{"query has 5 numbers"}},
		{"empty", args([]any{}, 10.0), "RangeError", []string{"query has 0 numbers"}},
		{"a string element", args([]any{1.0, "2", 3.0, 4.0}, 10.0), "TypeError", []string{"query[1] must be a number, got a string"}},
		{"a hole", args([]any{1.0, 2.0, undefined{}, 4.0}, 10.0), "TypeError", []string{"query[2] must be a number, got undefined"}},
		{"a null element", args([]any{nil, 2.0, 3.0, 4.0}, 10.0), "TypeError", []string{"query[0] must be a number, got null"}},
		{"NaN element", args([]float32{1, float32(math.NaN()), 3, 4}, 10.0), "RangeError", []string{"query[1] is NaN: every number must be finite"}},
		{"Infinity element", args([]float64{1, 2, 3, math.Inf(-1)}, 10.0), "RangeError", []string{"query[3] is -Infinity"}},
		{"beyond float32", args([]float64{1, 2, 1e39, 4}, 10.0), "RangeError", []string{"query[2] is 1e+39, beyond float32's range (±3.4e38)"}},
		{"undefined k", args(q, undefined{}), "TypeError", []string{"k must be a number, got undefined"}},
		{"null k", args(q, nil), "TypeError", []string{"k must be a number, got null"}},
		{"a string k", args(q, "10"), "TypeError", []string{"got a string"}},
		{"NaN k", args(q, math.NaN()), "TypeError", []string{"k must be an integer, got NaN"}},
		{"Infinity k", args(q, math.Inf(1)), "TypeError", []string{"got Infinity"}},
		{"a fraction k", args(q, 2.5), "TypeError", []string{"got 2.5"}},
		{"zero k", args(q, 0.0), "RangeError", []string{"k must be from 1 to 2147483647, got 0"}},
		{"negative k", args(q, -3.0), "RangeError", []string{"got -3"}},
		{"huge k", args(q, 1e15), "RangeError", []string{"got 1000000000000000"}},
		{"a BigInt k", args(q, bigint{}), "TypeError", []string{"k must be a number, got a BigInt"}},
	} {
		_, _, err := Search(c.args, dim)
		refused(t, c.name, err, c.kind, c.want...)
		// The same through the typed arrays' fast path.
		if len(c.args) > 0 {
			fast := append([]Value{typed{c.args[0].(goValue)}}, c.args[1:]...)
			_, _, err := Search(fast, dim)
			refused(t, c.name+" (Floats)", err, c.kind, c.want...)
		}
	}
	for _, c := range []struct {
		name  string
		query any
		k     float64
	}{
		{"Float32Array", []float32{1, -2, 3.5, 0}, 1},
		{"Float64Array", []float64{1, -2, 3.5, 0}, 10},
		{"Array", []any{1.0, -2.0, 3.5, 0.0}, MaxK},
	} {
		for _, a := range [][]Value{args(c.query, c.k), {typed{goValue{c.query}}, goValue{c.k}}} {
			got, k, err := Search(a, dim)
			if err != nil || k != int(c.k) || len(got) != dim || got[0] != 1 || got[1] != -2 || got[2] != 3.5 || got[3] != 0 {
				t.Errorf("%s: %v, k %d, %v", c.name, got, k, err)
			}
		}
	}
}

func TestArity(t *testing.T) {
	if err := Arity("umbra.info()", args(), 0); err != nil {
		t.Error(err)
	}
	refused(t, "info(1)", Arity("umbra.info()", args(1.0), 0), "TypeError", "umbra.info() takes 0 arguments, got 1")
}
