package link

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/gpu"
)

// TestBorrowChecksTheTypes: what is lent is borrowed with its functions
// intact; borrowing it as an Engine of other types fails at once, naming
// both sides, rather than at a call.
func TestBorrowChecksTheTypes(t *testing.T) {
	saved := lent
	t.Cleanup(func() { lent = saved })
	type index struct{ n int }
	type config struct{ dim int }
	type sel struct{ name string }
	Lend(Engine[*index, config, sel]{
		NewOnDevice:  func(_ context.Context, c config, _ *gpu.Device) (*index, error) { return &index{c.dim}, nil },
		RankAdapters: func(infos []core.AdapterInfo, _ sel) []int { return make([]int, len(infos)) },
		WithDevice:   func(*index, Visit) error { return ErrNoDevice },
	})
	e := Borrow[*index, config, sel]()
	ix, err := e.NewOnDevice(context.Background(), config{dim: 7}, nil)
	require.NoError(t, err)
	assert.Equal(t, 7, ix.n)
	assert.Len(t, e.RankAdapters(make([]core.AdapterInfo, 3), sel{}), 3)
	assert.ErrorIs(t, e.WithDevice(ix, nil), ErrNoDevice)

	msg := func() (msg any) {
		defer func() { msg = recover() }()
		Borrow[*index, config, int]()
		return nil
	}()
	require.IsType(t, "", msg, "borrowing other types must panic")
	assert.Regexp(t, `^link: engine lent link\.Engine\[.*sel.*\], ondevice borrows link\.Engine\[.*,int\]$`, msg)
}
