package engine

import (
	"context"
	"testing"

	"github.com/umbravec/umbra/internal/gpu"
)

// TestTakeBatch: a batch is the queue's live requests, in order, that share
// the first one's k and select path, up to the limit; the caller who left
// is dropped, and the rest stay queued in order.
func TestTakeBatch(t *testing.T) {
	auto, radix := context.Background(), gpu.WithSelectPath(context.Background(), gpu.SelectRadix)
	req := func(ctx context.Context, k int) *request { return &request{ctx: ctx, k: k} }
	q := []*request{req(auto, 5), req(radix, 5), req(auto, 5), req(auto, 7), req(auto, 5), req(auto, 5)}
	q[4].gone.Store(true)
	batch, rest := takeBatch(q, 2)
	if len(batch) != 2 || batch[0] != q[0] || batch[1] != q[2] {
		t.Errorf("batch %v, want requests 0 and 2", batch)
	}
	if len(rest) != 3 || rest[0] != q[1] || rest[1] != q[3] || rest[2] != q[5] {
		t.Errorf("rest %v, want requests 1, 3 and 5", rest)
	}
	batch, _ = takeBatch(rest, 8)
	if len(batch) != 1 || batch[0] != q[1] {
		t.Errorf("the radix request's batch %v, want it alone", batch)
	}
}
