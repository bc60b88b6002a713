//go:build !cgo || nogpu

package gpu

import (
	"context"
	"time"

	"github.com/umbravec/umbra/internal/core"
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
