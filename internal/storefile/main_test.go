package storefile

import (
	"os"
	"testing"
)

// childEnv selects a child role when the test binary re-executes itself
// (crash and lock tests), as Go's own os/exec tests do.
const childEnv = "UMBRA_STOREFILE_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	os.Exit(m.Run())
}
