//go:build !cgo || nogpu

package gpu

import (
	"context"
	"time"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/packed"
)

// Built reports whether this binary has the wgpu backend.
const Built = false

// Adapter is one adapter the instance enumerated; this build has none.
type Adapter struct{ Info core.AdapterInfo }

// Adapters reports that this build has no wgpu backend.
func Adapters(backend string) ([]*Adapter, error) { return nil, ErrNotBuilt }

// Probe reports that this build has no wgpu backend.
func (ad *Adapter) Probe(ctx context.Context, timeout time.Duration) (*Device, Report) {
	return nil, Report{Error: ErrNotBuilt.Error()}
}

// Device is a wgpu device; this build never has one.
type Device struct{}

// NewIndex reports that this build has no wgpu backend.
func (d *Device) NewIndex(stride int, metric core.Metric, maxChunkRows int) (*Index, error) {
	return nil, ErrNotBuilt
}

// NewCompressedIndex reports that this build has no wgpu backend.
func (d *Device) NewCompressedIndex(words int, prec core.Precision, metric core.Metric, maxChunkRows int) (*Index, error) {
	return nil, ErrNotBuilt
}

// Calibrate reports that this build has no wgpu backend.
func (d *Device) Calibrate() (time.Duration, float64, error) { return 0, 0, ErrNotBuilt }

// Index is an index's device side; this build never has one.
type Index struct{}

func (g *Index) Upload(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) error {
	return ErrNotBuilt
}

// Staged is an upload not yet resident; this build never has one.
type Staged struct{}

func (g *Index) Stage(ctx context.Context, s *packed.Slab, from int, st *core.Stages, progress func(done, total int)) (*Staged, error) {
	return nil, ErrNotBuilt
}

func (g *Index) Publish(s *Staged) {}

func (g *Index) Renew(ctx context.Context, timeout time.Duration) (*Index, error) {
	return nil, ErrNotBuilt
}

func (g *Index) Search(ctx context.Context, qs [][]float32, k, rows int, mask []uint64, st *core.Stages) ([][]core.Hit, error) {
	return nil, ErrNotBuilt
}

func (g *Index) Sums(ctx context.Context, qs [][]float32, rows int, st *core.Stages) ([]float32, int, error) {
	return nil, 0, ErrNotBuilt
}

func (g *Index) Floor(ctx context.Context) (time.Duration, int64, string, error) {
	return 0, 0, "", ErrNotBuilt
}

func (g *Index) Adapter() core.AdapterInfo          { return core.AdapterInfo{} }
func (g *Index) Limits() Limits                     { return Limits{} }
func (g *Index) ChunkRows() int                     { return 0 }
func (g *Index) Release()                           {}
func (g *Index) SetFault(f func(step string) error) {}

func (g *Index) Calibrate() (time.Duration, float64, error) { return 0, 0, ErrNotBuilt }

func (g *Index) Truncate(rows int) {}

func (g *Index) MarkDead(rows []int) {}

func (g *Index) Rewrite(ctx context.Context, s *packed.Slab, rows []int) error { return ErrNotBuilt }

func (g *Index) Sibling() (*Index, error) { return nil, ErrNotBuilt }

func (g *Index) Scores(ctx context.Context, q []float32, rows int) ([]float32, error) {
	return nil, ErrNotBuilt
}
