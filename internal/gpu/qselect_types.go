package gpu

import "errors"

// ErrSelectUnfit says a compressed index's device-side candidate selection
// (SelectSums) cannot take this search on this device (its per-row bound
// data or one query's candidate list would not fit a binding): the caller
// reads every sum back instead (Sums). It is not a device failure.
var ErrSelectUnfit = errors.New("gpu: device-side candidate selection does not fit this search")
