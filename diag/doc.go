// Package diag holds what umbra measures about itself, for benchmarks,
// tuning and bug reports rather than for answering searches: a Trace of
// where a call's time and bytes went, the Floor (one timed read of the
// stored vectors), the adapters the probe found and its verdicts on them
// (AdapterInfo, AdapterReport, ProbeReport).
//
// Nothing here changes what an index answers. An engine.Index reports its
// adapter in engine.Info, times its Floor with
// engine.Index.ReadFloor, and records into a Trace that WithTrace attaches
// to the context of its calls. The package links no cgo and no GPU
// binding: a program that reads these reports carries none of it.
package diag
