// Package webapi checks the arguments of the demo page's window.umbra
// calls (cmd/demo/webapp) before any of them reaches the engine: types,
// lengths, the index's dimension, finite numbers, row and k ranges. Each
// bad argument is an *Error naming the call, the argument and what was
// wrong, which the page's program throws or rejects with as the
// JavaScript class Kind names.
//
// The checks read JavaScript values through Value, which the page's
// program implements on syscall/js and the tests on Go values, so the
// same checks run in `go test` without a browser.
package webapi

import (
	"fmt"
	"math"
	"strconv"
)

// Type is a JavaScript value's type, in syscall/js.Type's order.
type Type int

// The JavaScript types (syscall/js.TypeUndefined and on).
const (
	Undefined Type = iota
	Null
	Boolean
	Number
	String
	Symbol
	Object
	Function
	// BigInt is past syscall/js.Type's values (syscall/js has none).
	BigInt
)

// Value is what the checks read of a JavaScript value. Float is called
// only on a Number, Length and Index only on an Object whose Class is
// one of Vectors.
type Value interface {
	Type() Type
	Float() float64
	// Class is an Object's class as Object.prototype.toString names it:
	// "Array", "Float32Array", "Object", …
	Class() string
	Length() int
	Index(i int) Value
}

// Floats is a Value that can read a typed array's numbers at once (a
// fast path for Float32Array and Float64Array); ok is false when it
// cannot, and the numbers are then read one by one.
type Floats interface {
	Floats() (xs []float64, ok bool)
}

// Vectors are the classes a query may be.
var Vectors = []string{"Float32Array", "Float64Array", "Array"}

// MaxK is the largest k a search takes (k above the number of rows
// returns every row, as the engine's Search does).
const MaxK = math.MaxInt32

// Error is a refused call: Kind is the JavaScript error class to throw or
// reject with ("TypeError" for a value of the wrong type, "RangeError"
// for one out of range, "Error" otherwise).
type Error struct {
	Kind, Msg string
}

func (e *Error) Error() string { return e.Msg }

func typeErr(format string, args ...any) error {
	return &Error{"TypeError", fmt.Sprintf(format, args...)}
}

func rangeErr(format string, args ...any) error {
	return &Error{"RangeError", fmt.Sprintf(format, args...)}
}

// Describe names v for a message: "null", "undefined", "NaN", "1.5",
// "the string \"7\"", "a Float32Array of 3", "an Object", ….
func Describe(v Value) string {
	switch v.Type() {
	case Undefined:
		return "undefined"
	case Null:
		return "null"
	case Boolean:
		return "a boolean"
	case Number:
		return number(v.Float())
	case String:
		return "a string"
	case Symbol:
		return "a symbol"
	case Function:
		return "a function"
	case BigInt:
		return "a BigInt"
	}
	c := v.Class()
	if isVector(c) {
		return fmt.Sprintf("%s %s of %d", article(c), c, v.Length())
	}
	return article(c) + " " + c
}

func article(word string) string {
	if word != "" && (word[0] == 'A' || word[0] == 'E' || word[0] == 'I' || word[0] == 'O' || word[0] == 'U') {
		return "an"
	}
	return "a"
}

// number writes x as JavaScript would: NaN, Infinity, -Infinity, 1.5.
func number(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "Infinity"
	case math.IsInf(x, -1):
		return "-Infinity"
	}
	if x == math.Trunc(x) && math.Abs(x) < 1e21 {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

func isVector(class string) bool {
	for _, c := range Vectors {
		if c == class {
			return true
		}
	}
	return false
}

// Arity refuses a call of call (its signature, "umbra.row(i)") with
// other than want arguments.
func Arity(call string, args []Value, want int) error {
	if len(args) == want {
		return nil
	}
	s := "s"
	if want == 1 {
		s = ""
	}
	return typeErr("%s takes %d argument%s, got %d", call, want, s, len(args))
}

// integer checks that v is a Number holding an integer and returns it;
// name is how messages call it ("i", "k").
func integer(call, name string, v Value) (float64, error) {
	if v.Type() != Number {
		return 0, typeErr("%s: %s must be a number, got %s", call, name, Describe(v))
	}
	x := v.Float()
	if math.IsNaN(x) || math.IsInf(x, 0) || x != math.Trunc(x) {
		return 0, typeErr("%s: %s must be an integer, got %s", call, name, number(x))
	}
	return x, nil
}

// Row checks umbra.row(i)'s arguments against an index of rows rows and
// returns i.
func Row(args []Value, rows int) (int, error) {
	const call = "umbra.row(i)"
	if err := Arity(call, args, 1); err != nil {
		return 0, err
	}
	x, err := integer(call, "i", args[0])
	if err != nil {
		return 0, err
	}
	if x < 0 || x >= float64(rows) {
		return 0, rangeErr("%s: row %s is out of range: the index has %d rows (0 to %d)", call, number(x), rows, rows-1)
	}
	return int(x), nil
}

// Search checks umbra.search(query, k)'s arguments against an index of
// dim-dimensional vectors and returns the query as float32s and k.
func Search(args []Value, dim int) ([]float32, int, error) {
	const call = "umbra.search(query, k)"
	if err := Arity(call, args, 2); err != nil {
		return nil, 0, err
	}
	q, err := Vector(call, "query", args[0], dim)
	if err != nil {
		return nil, 0, err
	}
	k, err := integer(call, "k", args[1])
	if err != nil {
		return nil, 0, err
	}
	if k < 1 || k > MaxK {
		return nil, 0, rangeErr("%s: k must be from 1 to %d, got %s", call, MaxK, number(k))
	}
	return q, int(k), nil
}

// Vector reads v, an argument name of call, as dim float32s: a
// Float32Array, Float64Array or Array of finite numbers, each within
// float32's range.
func Vector(call, name string, v Value, dim int) ([]float32, error) {
	if v.Type() != Object || !isVector(v.Class()) {
		return nil, typeErr("%s: %s must be a Float32Array, Float64Array or Array of %d numbers, got %s", call, name, dim, Describe(v))
	}
	if f, ok := v.(Floats); ok {
		if xs, ok := f.Floats(); ok {
			if len(xs) != dim {
				return nil, lengthErr(call, name, len(xs), dim)
			}
			out := make([]float32, dim)
			for i, x := range xs {
				if err := finite(call, name, i, x); err != nil {
					return nil, err
				}
				out[i] = float32(x)
			}
			return out, nil
		}
	}
	if n := v.Length(); n != dim {
		return nil, lengthErr(call, name, n, dim)
	}
	out := make([]float32, dim)
	for i := range out {
		e := v.Index(i)
		if e.Type() != Number {
			return nil, typeErr("%s: %s[%d] must be a number, got %s", call, name, i, Describe(e))
		}
		x := e.Float()
		if err := finite(call, name, i, x); err != nil {
			return nil, err
		}
		out[i] = float32(x)
	}
	return out, nil
}

func lengthErr(call, name string, n, dim int) error {
	return rangeErr("%s: %s has %d numbers; the index's vectors have %d", call, name, n, dim)
}

// finite checks element i of a vector: a finite number within float32's
// range.
func finite(call, name string, i int, x float64) error {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return rangeErr("%s: %s[%d] is %s: every number must be finite", call, name, i, number(x))
	}
	if math.Abs(x) > math.MaxFloat32 {
		return rangeErr("%s: %s[%d] is %s, beyond float32's range (±3.4e38)", call, name, i, number(x))
	}
	return nil
}
