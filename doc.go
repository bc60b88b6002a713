// Package umbra is the vocabulary every umbra collection speaks: the
// metric and precision an index ranks and scans by, a search Hit, the rows
// a write takes (RowSource, Vectors, Flat), the search and write options,
// the errors, and Collection, the interface that a store or an in-memory
// index (package engine) and a cluster collection (package cluster) both
// satisfy.
//
// The package has no cgo and no NATS: a program written against
// Collection links neither the GPU backend nor the cluster's server. Each
// option means the same thing on every implementation; an option that an
// implementation cannot honour (Approximate on a cluster collection,
// Eventual on a local index) is refused with ErrInvalidOption naming it,
// never ignored. Every implementation resolves options through one
// internal resolver, the one place where an option given twice, a nil
// option and a bad value are judged.
package umbra
