package engine

import "time"

// testHooks is what tests change in an index: only export_test.go makes
// one, and production code passes nil. They are set when the index is
// made (New and Open take them through the test constructors and options
// of export_test.go) and held by one pointer, so production structs carry
// no test fields and no test mutates a package variable that a parallel
// test reads.
type testHooks struct {
	// maxChunkRows, when non-zero, caps the rows in one device buffer below
	// what the adapter's limits allow, so tests cross chunk boundaries
	// with small data.
	maxChunkRows int
	// softwareAuto lets Device Auto take a software adapter, and sends
	// every search it can to the GPU (no routing), so tests reach Auto's
	// failure and recovery paths on lavapipe.
	softwareAuto bool
	// recoverAfter is the first wait before a GPU recovery attempt (0:
	// recoverFirst); recoverFault, when set, may fail an attempt.
	recoverAfter time.Duration
	recoverFault func(attempt int) error
	// equalShards gives every shard an equal share of the rows rather
	// than one sized by its measured scan rate.
	equalShards bool
	// beforePublish runs in a write just before its staged rows are
	// published, with wmu held and ix.mu not.
	beforePublish func()
	// beforeRewrite runs in an Upsert just before the rows it replaces
	// are written to the device, with wmu and ix.mu held.
	beforeRewrite func()
	// beforeBatch runs at the start of every coalesced batch, with its
	// size.
	beforeBatch func(n int)
	// afterReadOnlyLoad runs between a read-only Open's read of a store
	// and its check that the base file is still the one it read.
	afterReadOnlyLoad func()
	// skipMappedStat trusts a mapped base without checking its size and
	// time, so a truncation reaches the rows and faults.
	skipMappedStat bool
	// sumsPieceBytes, when non-zero, replaces sumsPieceBytes.
	sumsPieceBytes int
	// quantCap, when non-zero, is the candidate capacity of a compressed
	// search's device selection, which then runs whenever it can (not
	// only where it reads back less than every sum).
	quantCap int
	// subset, when not zero, decides every filtered search's path instead
	// of the measured costs: subsetScan or subsetGather.
	subset subsetPath
}

// subsetPath forces how a filtered search meets its filter (tests).
type subsetPath int

const (
	subsetMeasured subsetPath = iota
	subsetScan
	subsetGather
)

// subsetForced is the path the hooks force, subsetMeasured without hooks.
func (h *testHooks) subsetForced() subsetPath {
	if h == nil {
		return subsetMeasured
	}
	return h.subset
}

// chunkRows is maxChunkRows, 0 (the adapter's limit) without hooks.
func (h *testHooks) chunkRows() int {
	if h == nil {
		return 0
	}
	return h.maxChunkRows
}
