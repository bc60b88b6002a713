package core

import "github.com/umbravec/umbra/diag"

// AdapterInfo is diag.AdapterInfo, named here for the backends that fill
// it in.
type AdapterInfo = diag.AdapterInfo
