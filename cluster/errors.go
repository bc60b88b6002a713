package cluster

import "github.com/umbravec/umbra/internal/cluster/protocol"

// Errors of a cluster collection, besides package umbra's (every call
// returns those as an engine.Index does). Check them with errors.Is.
var (
	// ErrShardsUnavailable: some shard gave no answer by the deadline (no
	// replica serves it, every replica was behind, failed, stopped at a
	// message it cannot apply (ErrShardStopped), or gave replies that do
	// not verify). The error names the shards and, for each, the last
	// thing heard; no partial answer is returned.
	ErrShardsUnavailable = protocol.ErrShardsUnavailable
	// ErrNoCollection: no collection of that name.
	ErrNoCollection = protocol.ErrNoCollection
	// ErrCollectionExists: Create of a name already taken with another
	// configuration.
	ErrCollectionExists = protocol.ErrCollectionExists
	// ErrReservedID: IDs from 0xFFFF<<48 up are the cluster's own: each
	// replica records the stream sequence it has applied as a row with
	// ID 0xFFFF<<48 + sequence, inside the same atomic store write that
	// applies the message. A write naming one is refused; reads never
	// return one.
	ErrReservedID = protocol.ErrReservedID
	// ErrOutcomeUnknown: the write is durable in its shard's stream (it
	// will be applied, exactly once, by every replica), but no replica
	// could report how it applied before the deadline.
	ErrOutcomeUnknown = protocol.ErrOutcomeUnknown
	// ErrUnreadableMessage: a write message no replica could read (its
	// checksum failed, it was too short to carry one, or its body did not
	// decode), or one an operator skipped ('umbra repair --skip'): every
	// replica passed it without changing any row. The error says why.
	ErrUnreadableMessage = protocol.ErrUnreadableMessage
	// ErrShardStopped: a shard's replica stopped at a stream message it
	// cannot apply (its checksum holds, its format version is newer than
	// the build's). The error names the message and the way out: upgrade
	// the node, or skip the message with 'umbra repair'. The error of a
	// search whose shards stopped so wraps it besides ErrShardsUnavailable.
	ErrShardStopped = protocol.ErrShardStopped
)
