package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/umbravec/umbra/internal/cluster/protocol"
)

// IDs the cluster assigns come from blocks. The collection's counter (key
// name in umbra_counters) is where the next unreserved block starts; a
// handle reserves a block of IDBlock IDs with one compare-and-set and
// hands them out itself, so concurrent writers do not meet on one key at
// every call. IDs a block leaves unused are never given: IDs are unique,
// not dense.
//
// The floor (key name.floor) is past every ID a caller has named in an
// Add or Upsert (WithIDs). A call that assigns IDs reads it first (one
// read, no write) and takes its IDs past it, skipping the part of its
// block below it; a block is reserved past it too. So an assigned ID is
// never one a caller named in a call that ended before this one began,
// as locally, although another handle's block reserved earlier may still
// hold it.

// defaultIDBlock is how many IDs a handle reserves at a time.
const defaultIDBlock = 1024

// IDBlock is how many IDs a collection handle reserves from the
// collection's counter at a time (default 1024; 1 takes them call by
// call, one compare-and-set each). Larger blocks mean fewer
// compare-and-sets and more IDs skipped when a handle is dropped.
func IDBlock(n int) ClientOption {
	return func(c *Client) {
		if n >= 1 {
			c.idBlock = uint64(n)
		}
	}
}

func floorKey(coll string) string { return coll + ".floor" }

// idAlloc is a handle's block of IDs, [next, end), and the highest floor
// it has seen or set.
type idAlloc struct {
	mu        sync.Mutex
	next, end uint64
	floor     uint64
}

// withDeadline gives ctx the client's timeout when it has no deadline.
func (c *Client) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.timeout)
}

// readCounter reads key of the counters bucket from the stream's leader
// (a KV Get may be answered by a follower that has not yet applied the
// latest update; the floor must not be read stale). Absent: 0, revision 0.
func (c *Client) readCounter(ctx context.Context, key string) (uint64, uint64, error) {
	data, seq, err := c.x.LeaderGet(ctx, protocol.BucketCounters, key)
	if err != nil || len(data) == 0 {
		return 0, seq, err
	}
	v, err := strconv.ParseUint(string(data), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("ID counter %s holds %q", key, data)
	}
	return v, seq, nil
}

// moveCounter sets key to next(cur) by compare-and-set, retrying while
// other writers move it, and returns the value it found (cur). next
// returning cur leaves the key as it is.
func (c *Client) moveCounter(ctx context.Context, key string, next func(cur uint64) (uint64, error)) (uint64, error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		// Each attempt has its own short deadline: a request sent to a
		// leader that dies gets no answer, and waiting for it to the
		// call's deadline would fail a call that an election would let
		// through in seconds.
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		cur, rev, err := c.readCounter(actx, key)
		acancel()
		if err != nil {
			// A bucket between leaders answers nothing for a few
			// seconds: try again until ctx ends.
			if ctx.Err() != nil {
				return 0, fmt.Errorf("ID counter: %w", err)
			}
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		n, err := next(cur)
		if err != nil || n == cur {
			return cur, err
		}
		// A lost answer to an update that did apply costs only IDs: the
		// retry reads the moved counter and takes the next ones.
		actx, acancel = context.WithTimeout(ctx, 2*time.Second)
		val := []byte(strconv.FormatUint(n, 10))
		if rev == 0 {
			_, err = c.x.Ctrs.Create(actx, key, val)
		} else {
			_, err = c.x.Ctrs.Update(actx, key, val, rev)
		}
		acancel()
		if err == nil {
			return cur, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && ctx.Err() != nil {
			return 0, fmt.Errorf("ID counter: %w", err)
		}
		// Another writer moved it: read again.
	}
}

// raiseFloor makes the collection's floor at least floor: every ID a
// later call assigns is at or past it.
func (col *Collection) raiseFloor(ctx context.Context, floor uint64) error {
	a := &col.ids
	a.mu.Lock()
	known := a.floor
	a.mu.Unlock()
	if known >= floor {
		return nil // this handle set it at least that high; it only rises
	}
	_, err := col.c.moveCounter(ctx, floorKey(col.meta.Name), func(cur uint64) (uint64, error) { return max(cur, floor), nil })
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.floor = max(a.floor, floor)
	a.mu.Unlock()
	return nil
}

// assign takes n consecutive new IDs, past the floor, from the handle's
// block, reserving a new block when this one cannot give them. It
// returns the first.
func (col *Collection) assign(ctx context.Context, n uint64) (uint64, error) {
	ctx, cancel := col.c.withDeadline(ctx)
	defer cancel()
	// Read only (next returns cur), with moveCounter's retries: a bucket
	// between leaders answers nothing for a few seconds.
	floor, err := col.c.moveCounter(ctx, floorKey(col.meta.Name), func(cur uint64) (uint64, error) { return cur, nil })
	if err != nil {
		return 0, fmt.Errorf("ID floor: %w", err)
	}
	a := &col.ids
	a.mu.Lock()
	defer a.mu.Unlock()
	floor = max(floor, a.floor)
	a.floor = floor
	if start := max(a.next, floor); start < a.end && n <= a.end-start {
		a.next = start + n
		return start, nil
	}
	size := max(col.c.idBlock, n)
	var first uint64
	_, err = col.c.moveCounter(ctx, col.meta.Name, func(cur uint64) (uint64, error) {
		first = max(cur, floor)
		next := first + size
		if next >= protocol.ReservedIDs || next < first {
			return cur, fmt.Errorf("%w: the collection's IDs are spent", ErrReservedID)
		}
		return next, nil
	})
	if err != nil {
		return 0, err
	}
	a.next, a.end = first+n, first+size
	return first, nil
}
