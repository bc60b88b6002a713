package engine

import (
	"context"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpu"
	"github.com/umbravec/umbra/internal/packed"
)

// device is an index's device side: internal/gpu's driver in this
// process (local: on wgpu-native, or in a browser on WebGPU), or in a
// child process whose crash cannot end this one (isolate.go). Every
// method is the driver's of the same name, except that Stage returns the
// call that publishes what it staged.
type device interface {
	Adapter() core.AdapterInfo
	Limits() gpu.Limits
	ChunkRows() int
	Stage(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) (publish func(), err error)
	Upload(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) error
	Truncate(rows int)
	Rewrite(ctx context.Context, s *packed.Slab, rows []int) error
	// MarkDead marks deleted rows in the tombstones resident on the
	// device, which a search without a mask skips.
	MarkDead(rows []int)
	Search(ctx context.Context, qs [][]float32, k, rows int, mask []uint64, st *core.Stages) ([][]core.Hit, error)
	Scores(ctx context.Context, q []float32, rows int) ([]float32, error)
	// Sums is the compressed rows' raw sums (a compressed precision's
	// device side only).
	Sums(ctx context.Context, qs [][]float32, rows int, st *core.Stages) ([]float32, int, error)
	Floor(ctx context.Context) (time.Duration, int64, string, error)
	Calibrate() (time.Duration, float64, error)
	// Sibling is a new, empty device side like this one (compaction
	// uploads into it); Renew is one on a device that passes the
	// self-test again (recovery).
	Sibling() (device, error)
	Renew(ctx context.Context, timeout time.Duration) (device, error)
	SetFault(f func(step string) error)
	Release()
}

// local is internal/gpu's driver in this process.
type local struct{ *gpu.Index }

func (l local) Stage(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) (func(), error) {
	staged, err := l.Index.Stage(ctx, s, from, st, progress)
	if err != nil {
		return nil, err
	}
	return func() { l.Index.Publish(staged) }, nil
}

func (l local) Sibling() (device, error) {
	g, err := l.Index.Sibling()
	if err != nil {
		return nil, err
	}
	return local{g}, nil
}

func (l local) Renew(ctx context.Context, timeout time.Duration) (device, error) {
	g, err := l.Index.Renew(ctx, timeout)
	if err != nil {
		return nil, err
	}
	return local{g}, nil
}
