package storefile

import (
	"testing"

	"github.com/umbravec/umbra/internal/testkit"
)

// TestMain plays a child role (childRoles: the crash and lock tests' other
// process) when a test started this binary again.
func TestMain(m *testing.M) { testkit.Main(m, childRoles) }
