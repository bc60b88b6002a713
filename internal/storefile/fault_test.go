package storefile_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/storefile"
	"github.com/umbravec/umbra/internal/storefile/faultfs"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestWriteBaseFailingAtEveryStep fails each step of a base's atomic
// replacement, for a base that fits WriteFile's buffer and one whose rows
// reach the file while they are encoded: a step before the rename leaves
// the old base, a failed directory fsync the new one (with an error that
// says its name may not be durable), and no temporary file is left either
// way.
func TestWriteBaseFailingAtEveryStep(t *testing.T) {
	r := testkit.Rand(t)
	snapshot := func(n, dim int) *storefile.Snapshot {
		s := &storefile.Snapshot{Dim: dim, Stride: dim, IDs: make([]uint64, n), Rows: make([]float32, n*dim), NextID: uint64(n)}
		for i := range s.IDs {
			s.IDs[i] = uint64(i)
		}
		for i := range s.Rows {
			s.Rows[i] = r.Float32()*2 - 1
		}
		return s
	}
	for _, n := range []int{3, 400} {
		for _, step := range faultfs.Steps() {
			t.Run(fmt.Sprintf("rows=%d/%s", n, step), func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "s.umbra")
				_, err := storefile.WriteBase(storefile.OS, path, snapshot(n, 64))
				require.NoError(t, err)
				before, err := os.ReadFile(path)
				require.NoError(t, err)

				fsys := faultfs.New(nil, func(s, p string) error {
					require.Equal(t, path, p, "the step names the file replaced")
					if s == step {
						return syscall.EIO
					}
					return nil
				})
				next := snapshot(n, 64)
				gen, err := storefile.WriteBase(fsys, path, next)
				require.ErrorIs(t, err, syscall.EIO)
				assert.Zero(t, gen)
				after, _, rerr := storefile.ReadBase(path)
				require.NoError(t, rerr)
				if step == faultfs.StepSyncDir {
					assert.Contains(t, err.Error(), "after renaming")
					assert.Equal(t, next.Rows, after.Rows, "the new base is in place, not known durable")
				} else {
					now, err := os.ReadFile(path)
					require.NoError(t, err)
					assert.Equal(t, before, now, "a failed %s leaves the old base", step)
				}
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				for _, e := range entries {
					assert.False(t, strings.Contains(e.Name(), ".tmp-"), "temporary file %s left behind", e.Name())
				}
			})
		}
	}
}
