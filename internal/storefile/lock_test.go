package storefile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLockWithinProcess is the part of the lock's contract that needs no
// second process, so that it runs on every platform with a lock (the
// Unix tests add a second process and a dead holder): a second Lock fails
// with ErrLocked naming the lock file, unlock is idempotent and frees the
// store, and the lock file stays.
func TestLockWithinProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	unlock, err := Lock(path)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("no file locks on this platform: %v", err)
	}
	require.NoError(t, err)
	_, err = Lock(path)
	require.ErrorIs(t, err, ErrLocked)
	require.Contains(t, err.Error(), lockPath(path))
	require.NoError(t, unlock())
	require.NoError(t, unlock(), "unlock twice")
	unlock, err = Lock(path)
	require.NoError(t, err, "free once unlocked")
	require.NoError(t, unlock())
	_, err = os.Stat(lockPath(path))
	require.NoError(t, err, "the lock file is never removed")
}

// lockPath is the path of the lock file of the store at path.
func lockPath(path string) string { return path + lockSuffix }
