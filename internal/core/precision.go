package core

import "github.com/umbravec/umbra"

// Precision is umbra.Precision, named here for the layers below engine
// that hold and scan compressed rows. Its numbers are part of the store
// format and of the shaders' templates.
type Precision = umbra.Precision

// The precisions, as umbra declares them.
const (
	F32  = umbra.F32
	F16  = umbra.F16
	Int8 = umbra.Int8
)
