package core

import (
	"fmt"
	"strings"
)

// Precision is how an index holds the copy of its vectors that a search
// scans. Whatever the precision, searches return the exact float32 answer:
// the float32 rows stay on the host, the scan of the compressed copy
// bounds every row's float32 score, and only the rows whose bound can reach
// the k-th best are scored again in float32. A compressed precision reads
// 2× (F16) or about 4× (Int8) fewer bytes per scan and keeps both copies
// in host memory; on a GPU the device holds only the compressed copy,
// scans it there, and the host bounds and rescores.
//
// The numbers are part of the store format (a base file's header holds
// one) and of the shaders' templates: never renumber them.
type Precision int

const (
	// F32 scans the float32 rows themselves (the default).
	F32 Precision = iota
	// F16 scans IEEE half floats of each row scaled by a power of two (so
	// no component overflows or needlessly underflows), 2 bytes a
	// component.
	F16
	// Int8 scans each row as signed bytes with one scale per row
	// (symmetric: code = round(x·127/max|x|)), 1 byte a component.
	Int8
)

func (p Precision) String() string {
	switch p {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case Int8:
		return "int8"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// ParsePrecision reads a precision's name as String writes it, or one of
// its other names ("float32", "fp32", "" for F32; "float16", "fp16",
// "half"; "i8"), in any case.
func ParsePrecision(s string) (Precision, bool) {
	switch strings.ToLower(s) {
	case "f32", "float32", "fp32", "":
		return F32, true
	case "f16", "float16", "fp16", "half":
		return F16, true
	case "int8", "i8":
		return Int8, true
	}
	return 0, false
}
