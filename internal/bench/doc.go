// Package bench is umbra's benchmark harness: its measurement method (groups
// of repeats keeping the minimum, many independent groups, median, range and
// jitter, speed-ups paired inside each group), five tiers, each with its
// premise stated (fallback, kernel, resident, contiguous, list) and each
// also stated as a multiple of its device's read floor (engine
// Index.ReadFloor, timed in the same groups), a stage-by-stage breakdown
// from diag.Trace, a float64 reference that every tier is checked against
// in the same run, peers (chromem-go and FAISS, package peers) run on the
// same data and checked the same way, and the JSON, text and PNG forms of a
// Report. cmd/bench is its command line; the testing.B benchmarks in this
// package run the same tiers at small sizes for go test -bench and
// benchstat. The JSON schema is in SCHEMA.md.
package bench
