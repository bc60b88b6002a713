package node

import (
	"context"
	"fmt"
	"time"

	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// What a replica does with a stream message it cannot apply.
//
// A message no build can read — too short to carry a checksum, a checksum
// that fails, or one that verifies but whose body does not decode under
// its version (a bad op, a truncation, metadata that is not a canonical
// encoding, rows of another dimension than the collection's) — is skipped
// by every replica alike: the replica records codeUnreadable as that
// sequence's outcome (a writer awaiting it gets ErrUnreadableMessage),
// stores the sequence's sentinel row with nothing else changed (so its
// applied sequence moves past it, also across restarts), and logs the
// stream, sequence, size, reason and first bytes (replica.apply).
//
// A message whose checksum holds but whose format version is newer than
// the build's may be readable by a newer umbra, and skipping it would let
// the replicas of a shard diverge during a rolling upgrade (the upgraded
// ones applying it, the others not). So a replica stops there: it applies
// nothing further, and answers every request with statusStopped and a
// stopError naming the message and the way out — upgrade the node, or
// skip the message with 'umbra repair --skip SEQ'. That command records
// the operator's decision in the KV bucket umbra_repairs under
// COLLECTION.SHARD.SEQ, bound to the message's length and checksum; a
// stopped replica polls for it (repairPoll) and skips exactly that message,
// and a replica that reaches the sequence later consults the same record
// before it stops, so every replica skips it, recording codeSkipped as its
// outcome.

// repairPoll is how often a stopped replica looks for a repair record.
const repairPoll = time.Second

// stopError is a replica stopped at stream message seq: its checksum
// holds, its format version is newer than this build's.
type stopError struct {
	coll    string
	shard   int
	seq     uint64
	size    int
	version byte
	crc     uint32
	head    string
}

func newStopError(coll string, shard int, seq uint64, data []byte, ve *protocol.VersionError) *stopError {
	return &stopError{coll: coll, shard: shard, seq: seq, size: len(data), version: ve.Version, crc: protocol.FrameSum(data), head: protocol.HeadHex(data)}
}

func (e *stopError) Error() string {
	return fmt.Sprintf("shard %s/%d stopped at stream message %d of %s (%d bytes, first bytes %s): %v; "+
		"upgrade umbra on this node, or skip the message on every replica with 'umbra repair --cluster URL --collection %s --shard %d --skip %d'",
		e.coll, e.shard, e.seq, protocol.StreamName(e.coll, e.shard), e.size, e.head, &protocol.VersionError{Version: e.version},
		e.coll, e.shard, e.seq)
}

func (e *stopError) Unwrap() error { return protocol.ErrShardStopped }

func matches(rec *protocol.RepairRecord, se *stopError) bool {
	return rec.Version == 1 && rec.Action == "skip" && rec.Seq == se.seq && rec.Size == se.size && rec.CRC32C == se.crc
}

// awaitRepair holds the replica at se's message until a repair record
// skips it, or the node drops the replica. A record already there skips it
// at once, with no stop.
func (n *Node) awaitRepair(r *replica, se *stopError) {
	key := protocol.RepairKey(r.coll, r.shard, se.seq)
	stopped, lastErr := false, ""
	for {
		ctx, cancel := context.WithTimeout(r.ctx, FollowRequestTimeout)
		rec, err := protocol.ReadRepairRecord(ctx, n.c.JS, r.coll, r.shard, se.seq)
		cancel()
		switch {
		case r.ctx.Err() != nil:
			return
		case err != nil:
			err = fmt.Errorf("shard %s/%d: reading repair record %s: %w", r.coll, r.shard, key, err)
		case rec != nil && !matches(rec, se):
			err = fmt.Errorf("shard %s/%d: repair record %s names a message of %d bytes, checksum %08x; message %d has %d bytes, checksum %08x: not skipped",
				r.coll, r.shard, key, rec.Size, rec.CRC32C, se.seq, se.size, se.crc)
		case rec != nil:
			if err = r.skip(r.ctx, se, rec); err == nil {
				n.cfg.Logf("shard %s/%d: skipped stream message %d of %s (%d bytes, format version %d) as repair record %s says (recorded %s)",
					r.coll, r.shard, se.seq, protocol.StreamName(r.coll, r.shard), se.size, se.version, key, rec.At.Format(time.RFC3339))
				return
			}
		}
		if err != nil && err.Error() != lastErr {
			n.cfg.Logf("%v", err)
			lastErr = err.Error()
		}
		if !stopped {
			r.stopAt(se)
			n.cfg.Logf("%v", se)
			stopped = true
		}
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(repairPoll):
		}
	}
}
