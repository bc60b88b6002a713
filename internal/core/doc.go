// Package core names, for the layers below package engine (the CPU
// kernels, the GPU backends, the shaders' templates), the concepts they
// share: the metric an index ranks by and the precision its scanned copy
// is held in (umbra.Metric and umbra.Precision, the public vocabulary),
// what an adapter is (diag.AdapterInfo), one backend search hit (a row and
// a score, turned into an ID by the engine) and the stages a traced call
// spends its time in. The public types are declared once, in their public
// packages; the names here let the internal layers use them without a twin
// type or a converter between two.
//
// The package holds no policy: which adapter to use, how to fall back, how
// to rank ties — those live in the rooms that own them.
package core
