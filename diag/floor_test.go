package diag

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestFloorBytesPerSecond(t *testing.T) {
	assert.Equal(t, 2e9, Floor{Bytes: 1e9, Time: 500 * time.Millisecond}.BytesPerSecond())
	assert.Zero(t, Floor{Bytes: 1e9}.BytesPerSecond(), "an untimed floor has no rate, not an infinite one")
}
