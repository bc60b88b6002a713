package engine_test

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestCheckpointOutOfInodes is the failure as a disk gives it: a tmpfs
// with room for the new base's inode but not the new log's, on the CPU
// path where the mapped old base keeps its inode alive. The checkpoint
// fails with ENOSPC after the rename; writes after it are refused until
// space returns, then acknowledged, and every acknowledged one survives a
// reopen. Mounting needs root: UMBRA_REQUIRE_MOUNT=1 (CI sets it) makes a
// machine where mounting fails fail the test rather than skip it.
func TestCheckpointOutOfInodes(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=8m,nr_inodes=64"); err != nil {
		if os.Getenv("UMBRA_REQUIRE_MOUNT") == "1" {
			t.Fatalf("UMBRA_REQUIRE_MOUNT=1 but a tmpfs cannot be mounted: %v", err)
		}
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { require.NoError(t, syscall.Unmount(dir, syscall.MNT_DETACH)) })
	r := testkit.Rand(t)
	const dim = 16
	ctx := context.Background()
	ix, m, next, path := newModelStore(t, r, dir, 50, dim, backends[0])
	require.NoError(t, ix.Close())
	ix, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	defer ix.Close()

	// Room for one more inode: the new base's temporary file takes it
	// (the old base lives on, mapped), and the new log's finds none.
	var fs syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &fs))
	used := fs.Files - fs.Ffree
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, fmt.Sprintf("size=8m,nr_inodes=%d", used+1)))
	err = ix.Checkpoint(ctx)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Contains(t, err.Error(), "log not reset")
	for range 2 {
		m.writeOnce(t, r, ix, &next, dim) // refused: no inode for the log
	}
	m.check(t, ix, "in memory while the disk is full")

	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=8m,nr_inodes=64"))
	for range 3 {
		require.Equal(t, 3, m.writeOnce(t, r, ix, &next, dim), "writes once space returns")
	}
	m.reopened(t, path, ix, "after the inodes returned")
}
