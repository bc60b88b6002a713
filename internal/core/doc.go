// Package core declares, once, the concepts every layer of umbra names:
// the metric an index ranks by, the precision its scanned copy is held
// in, one search hit, what an adapter is, and the stages a traced call
// spends its time in. Package engine re-exports the public ones as
// aliases (engine.Metric is core.Metric), fallback, internal/gpu and
// shaders use them directly, so no layer keeps a twin type and no
// converter sits between two.
//
// The package has no dependencies beyond the standard library and holds
// no policy: which adapter to use, how to fall back, how to rank ties —
// those live in the rooms that own them.
package core
